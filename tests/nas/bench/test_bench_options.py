"""`nas bench` takes every option of `nas search` (derived from SearchConfig, not listed),
each with the search's default, passed into the rows' search template; and every option of
`nas train` that it does not set itself as --retrain-NAME, passed to each retraining."""

from __future__ import annotations

import json
from dataclasses import dataclass

from nas_reference import run_cli
from wrappers import check_wraps, wrap_problems

import genlab.nas.bench.jobs as jobs_mod
from genlab.core.options import option_fields, option_like
from genlab.nas.bench.config import (
    _TEMPLATE,
    RANDOM,
    RETRAIN_SET,
    ROW_OPTIONS,
    BenchCommandConfig,
)
from genlab.nas.bench.jobs import BenchJob, run_job
from genlab.nas.retrain import RetrainConfig
from genlab.nas.search import SearchConfig


def test_nas_bench_takes_every_search_option():
    check_wraps(BenchCommandConfig, SearchConfig, skip=ROW_OPTIONS)
    searched = {f.name for f, _ in option_fields(SearchConfig)} - set(ROW_OPTIONS)
    assert set(_TEMPLATE) == searched  # every one of them builds the template


def test_nas_bench_takes_every_train_option_it_does_not_set():
    # the bench's retraining budget defaults to 30 epochs (nas train: the space's recipe)
    check_wraps(BenchCommandConfig, RetrainConfig, skip=RETRAIN_SET, prefix="retrain_",
                defaults={"epochs": 30})
    assert BenchCommandConfig().retrain_epochs == 30


def test_the_check_names_what_a_hand_listed_wrapper_lacks():
    @dataclass
    class HandListed:
        space: str = option_like(SearchConfig, "space")
        steps: int | None = option_like(SearchConfig, "steps", default=5)

    problems = wrap_problems(HandListed, SearchConfig, skip=("seed", "nope"))
    assert "skip names nope, which is no option of SearchConfig" in problems
    assert "HandListed.steps defaults to 5, expected None (SearchConfig.steps)" in problems
    assert "HandListed has no option dataset" in problems
    assert not any("space" in p or " seed" in p for p in problems)
    # every option but the two it lists, the one it skips and the one it defaults otherwise
    assert len(problems) == len(option_fields(SearchConfig)) - 3 + 1 + 1


def test_the_options_reach_the_template(capsys):
    cfg = BenchCommandConfig(supernet_params={"arch_start": 0.1}, force_every=3,
                             cuda_graph="off", w_lr=0.5)
    search = cfg.bench().search
    assert (search.supernet_params, search.force_every, search.cuda_graph, search.w_lr) == \
        ({"arch_start": 0.1}, 3, "off", 0.5)
    code, out, err = run_cli(["nas", "bench", "--supernet-param", "partial_channels=2",
                              "--w-lr", "0.5", "--print-config"], capsys)
    assert code == 0, err
    printed = json.loads(out)
    assert printed["supernet_params"] == {"partial_channels": 2} and printed["w_lr"] == 0.5


def test_the_train_options_reach_each_retraining(tmp_path, monkeypatch, capsys):
    bench = BenchCommandConfig(retrain_lr=0.1, retrain_cutout=False, retrain_epochs=2).bench()
    assert bench.retrain == {"lr": 0.1, "cutout": False}  # only those set otherwise
    seen = []

    def fake_retrain(cfg, folder):
        seen.append(cfg)
        return {"test_acc": 50.0, "params": 1}

    monkeypatch.setattr(jobs_mod, "retrain_once", fake_retrain)
    run_job(BenchJob(RANDOM, 1, bench, str(tmp_path)), tmp_path / "job")
    assert (seen[0].lr, seen[0].cutout, seen[0].epochs, seen[0].seed, seen[0].batch_size) == \
        (0.1, False, 2, 1, 64)
    code, out, err = run_cli(["nas", "bench", "--retrain-lr", "0.1", "--retrain-aux-weight",
                              "0", "--print-config"], capsys)
    assert code == 2 and "--retrain-aux-weight" in err  # no spelling of nas train's own
    code, out, err = run_cli(["nas", "bench", "--retrain-lr", "0.1",
                              "--retrain-auxiliary-weight", "0", "--print-config"], capsys)
    assert code == 0, err
    printed = json.loads(out)
    assert (printed["retrain_lr"], printed["retrain_auxiliary_weight"]) == (0.1, 0)


def test_a_bench_record_gives_back_its_retraining_options(tmp_path, capsys):
    from dataclasses import asdict

    from genlab.nas.bench.config import BenchConfig

    bench = BenchConfig(retrain={"lr": 0.1, "nesterov": True}, retrain_epochs=3)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**asdict(bench), "genlab_version": "0"}))
    code, out, err = run_cli(["nas", "bench", "--config", path, "--print-config"], capsys)
    assert code == 0, err
    printed = json.loads(out)
    assert (printed["retrain_lr"], printed["retrain_nesterov"]) == (0.1, True)
    assert asdict(BenchCommandConfig(**printed).bench()) == asdict(bench)


def test_a_bad_retraining_option_is_refused_before_the_bench_starts(tmp_path):
    import pytest

    from genlab.core.errors import ConfigError
    from genlab.nas.bench import run_bench

    bench = BenchCommandConfig(retrain_drop_path=1.5, retrain_epochs=1, seeds=[0],
                               regs=["none"]).bench()
    with pytest.raises(ConfigError, match="drop-path must be below 1"):
        run_bench(bench, tmp_path / "b")
    assert not (tmp_path / "b").exists()
