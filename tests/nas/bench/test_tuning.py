"""Tuning alike (`genlab nas bench --tune`): the choice by hand values, every method's grid
against the search options, the parts' own settings, and a tiny tuned bench."""

import json
from dataclasses import replace

import pytest
import torch

from genlab.core.errors import ConfigError
from genlab.nas.bench import (
    BenchConfig,
    constant_accuracy,
    constant_tuning_row,
    row_options,
    run_bench,
)
from genlab.nas.bench.report import CONSTANT, tuning_markdown
from genlab.nas.bench.tuning import score_settings, setting_text, tuning_grid
from genlab.nas.methods import get_method, method_names, search_method
from genlab.nas.methods.base import TUNING_MAX, build_parts, check_tuning
from genlab.nas.regularizers import PENALTIES
from genlab.nas.search import SearchConfig


def _records(scores_and_edges):
    """{setting index: [(val_acc, param-free edges) per seed]} -> tuning records."""
    return [{"setting_index": k, "val_acc": acc, "param_free_ops": edges}
            for k, seeds in scores_and_edges.items() for acc, edges in seeds]


def test_choice_is_the_best_eligible_mean_by_hand():
    grid = ({}, {"drop_path": 0.2}, {"drop_path": 0.4})
    # means: 80, 90 (one seed collapses: 3 parameter-free edges), 85
    records = _records({0: [(79, 0), (81, 1)], 1: [(95, 3), (85, 0)], 2: [(84, 2), (86, 2)]})
    rows, best = score_settings("rdarts-dp", grid, records, collapse_edges=2)
    assert best == 2 and [r["chosen"] for r in rows] == [False, False, True]
    assert [r["eligible"] for r in rows] == [True, False, True]
    assert rows[1]["val_acc_mean"] == 90 and rows[1]["max_param_free"] == 3
    assert rows[0]["val_acc_std"] == pytest.approx(2 ** 0.5)
    assert rows[2]["setting"] == "drop_path=0.4"
    # none eligible: the highest mean, said so
    rows, best = score_settings("x", grid, records, collapse_edges=0)
    assert best == 1 and rows[1]["note"].startswith("no setting eligible")
    # a tie keeps the earlier setting (the preset first)
    rows, best = score_settings("x", grid[:2], _records({0: [(80, 0)], 1: [(80, 0)]}), 2)
    assert best == 0


def test_setting_text():
    assert setting_text({}) == "preset"
    assert setting_text({"relaxation_params": {"tau_max": 5.0, "tau_min": 0.1}}) == \
        "relaxation.tau_max=5, relaxation.tau_min=0.1"
    assert setting_text({"partial_channels": 2}) == "partial_channels=2"
    # the supernet options print as they did when they were search options
    assert setting_text({"supernet_params": {"partial_channels": 2, "drop_path": 0.2}}) == \
        "partial_channels=2, drop_path=0.2"


@pytest.mark.parametrize("name", method_names())
def test_every_method_grid_is_within_budget_and_builds(name):
    """Each setting is at most TUNING_MAX, holds the preset, names search options, and
    builds the method's parts (a part's setting it does not take would be refused)."""
    grid = tuning_grid(name, row_options(name))
    assert 1 <= len(grid) <= TUNING_MAX and {} in grid
    for setting in grid:
        cfg = replace(SearchConfig(method=name), **setting).resolved()
        search_method(cfg, get_method(name))


def test_regulariser_rows_take_their_penalty_grid():
    assert tuning_grid("ber", {"method": None, "reg": "ber"}) == PENALTIES.get("ber").tuning
    assert tuning_grid("none", {"method": None, "reg": "none"}) == ({},)


def test_grid_checks():
    with pytest.raises(ConfigError, match="1 to 4 settings"):
        check_tuning("m", ({}, {"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}))
    with pytest.raises(ConfigError, match="repeated"):
        check_tuning("m", ({}, {}))
    from genlab.nas.bench.tuning import check_setting_keys
    with pytest.raises(ConfigError, match="not search options"):
        check_setting_keys("m", ({}, {"temperature": 1}))


def test_part_params_reach_the_part_and_unknown_ones_are_refused():
    gdas = get_method("gdas")
    parts = build_parts(gdas, part_params={"relaxation": {"tau_max": 5.0}})
    assert (parts.relaxation.tau_max, parts.relaxation.tau_min) == (5.0, 0.1)  # preset kept
    parts = build_parts(get_method("sdarts-rs"), part_params={"perturb": {"eps_max": 0.6}})
    assert (parts.perturbation.eps_min, parts.perturbation.eps_max) == (0.03, 0.6)
    with pytest.raises(ConfigError, match="relaxation gumbel has no parameter.*tau_max"):
        build_parts(gdas, part_params={"relaxation": {"temperature": 1.0}})
    with pytest.raises(ConfigError, match="relaxation softmax has no parameter"):
        build_parts(get_method("darts"), part_params={"relaxation": {"tau_max": 1.0}})
    cfg = SearchConfig(method="rdarts-es", stop_params={"factor": 1.5}).resolved()
    assert search_method(cfg).stop.factor == 1.5


def test_tiny_tuned_bench(tmp_path):
    """Every setting of the row on the selection seeds, then the chosen one on the report
    seed; the tuning table is written and a rerun reuses every job."""
    cfg = BenchConfig(methods=["pc-darts"], seeds=[0], tune=True, tune_seeds=[3],
                      search=SearchConfig(channels=8, cells=1, steps=3, hessian_points=0,
                                          diag_batch=16, batch_size=16),
                      retrain_epochs=1, retrain_channels=4, random_archs=False)
    result = run_bench(cfg, tmp_path / "b")
    table = json.loads((tmp_path / "b" / "tuning.json").read_text())["rows"]
    grid = get_method("pc-darts").tuning
    assert [r["setting"] for r in table[:-1]] == [setting_text(s) for s in grid]
    assert sum(r["chosen"] for r in table) == 1
    chosen = next(r for r in table if r["chosen"])
    jobs = tmp_path / "b" / "jobs"
    for k in range(len(grid)):  # each setting searched and scored on validation data
        summary = json.loads((jobs / f"tune-pc-darts-t{k}-s3" / "summary.json").read_text())
        assert "val_acc" in summary and "test_acc" not in summary
    report = json.loads((jobs / "pc-darts-s0" / "config.json").read_text())
    assert report["setting"] == grid[chosen["index"]] and report["eval_on"] == "test"
    assert result["settings"] == {"pc-darts": chosen["setting"]}
    assert "### Tuning" in (tmp_path / "b" / "bench.md").read_text()
    # the sanity row, last: the constant predictor through the split the tuning jobs' own
    # retrainings scored (their summaries' constant_val_acc)
    sanity = table[-1]
    retrained = [json.loads((tmp_path / "b" / "retrain" / f"tune-pc-darts-t{k}-s3"
                             / "summary.json").read_text()) for k in range(len(grid))]
    assert sanity["row"] == CONSTANT and not sanity["chosen"] and sanity["seeds"] == 1
    assert {r["constant_val_acc"] for r in retrained} == {sanity["val_acc_mean"]}
    assert 5 < sanity["val_acc_mean"] < 15  # digits: ten balanced classes
    again = run_bench(cfg, tmp_path / "b", resume=True)
    assert again["records"] == result["records"]
    # the setting chosen here runs unchanged in another space (--settings-from)
    other = BenchConfig(methods=["pc-darts"], seeds=[1], settings_from=str(tmp_path / "b"),
                        search=SearchConfig(space="s2", channels=4, cells=3, steps=2,
                                            hessian_points=0, diag_batch=16, batch_size=16),
                        retrain_epochs=0, random_archs=False)
    moved = run_bench(other, tmp_path / "s2")
    job = json.loads((tmp_path / "s2" / "jobs" / "pc-darts-s1" / "config.json").read_text())
    assert job["setting"] == grid[chosen["index"]]
    search = json.loads((tmp_path / "s2" / "search" / "pc-darts-s1" / "config.json").read_text())
    assert {k: search[k] for k in grid[chosen["index"]]} == grid[chosen["index"]]
    assert moved["settings"] == {"pc-darts": chosen["setting"]}


def test_settings_from_refuses_what_it_cannot_use(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "tuning.json").write_text(json.dumps({"chosen": {"darts": {}}}))
    small = SearchConfig(channels=2, cells=1, steps=1)
    with pytest.raises(ConfigError, match="chose no setting for beta"):
        run_bench(BenchConfig(methods=["darts", "beta"], settings_from=str(tmp_path / "t"),
                              search=small), tmp_path / "b")
    with pytest.raises(ConfigError, match="give one of them"):
        run_bench(BenchConfig(methods=["darts"], settings_from=str(tmp_path / "t"), tune=True,
                              search=small), tmp_path / "b")
    with pytest.raises(ConfigError, match="cannot read"):
        run_bench(BenchConfig(methods=["darts"], settings_from=str(tmp_path / "none"),
                              search=small), tmp_path / "b")
    assert not (tmp_path / "b").exists()  # refused before the folder


@pytest.fixture
def tiny_dataset():
    """The data set "tiny" registered for one test (removed after it)."""
    from genlab.nas.data import DATASETS, DatasetEntry

    DATASETS.register("tiny", DatasetEntry(_tiny_data, False, "tiny"))
    yield
    DATASETS.unregister("tiny")


def _tiny_data(root, size, seed):
    """Labels by hand, per seed (the images do not matter to the constant predictor)."""
    from genlab.core.data import ImageData, Split

    labels = {3: ([0, 0, 1, 2], [0, 1, 1, 1, 2], [1, 1, 0, 2]),
              4: ([2, 2, 2, 1], [2, 1, 1, 0], [0, 0, 0, 2])}[seed]
    splits = [Split(torch.zeros(len(y), 1, size, size), torch.tensor(y)) for y in labels]
    return ImageData("tiny", *splits, num_classes=3, in_channels=1, size=size)


def test_constant_row_by_hand_count(tiny_dataset):
    """The majority class of the train half scored on the validation half, per seed's split:
    seed 3 answers 0 (train 0,0,1,2), right on 1 of 5; seed 4 answers 2 (train 2,2,2,1),
    right on 1 of 4. The test split's predictor fits train + val instead: at seed 3 that is
    0,0,1,2,0,1,1,1,2, whose majority is 1, right on 2 of the test's 4."""
    search = SearchConfig(dataset="tiny")
    assert constant_accuracy(search, 3, eval_on="val") == pytest.approx(20.0)
    assert constant_accuracy(search, 4, eval_on="val") == pytest.approx(25.0)
    assert constant_accuracy(search, 3, eval_on="test") == pytest.approx(50.0)
    row = constant_tuning_row(search, [3, 4])
    assert row["row"] == CONSTANT and row["seeds"] == 2
    assert row["val_acc_mean"] == pytest.approx(22.5)
    assert row["val_acc_std"] == pytest.approx(5 / 2 ** 0.5)
    line = tuning_markdown([row]).splitlines()[-1]
    assert line.startswith(f"| {CONSTANT} | - | 22.50 ± 3.54 (n=2) | - | - |")


def test_tune_needs_retraining(tmp_path):
    cfg = BenchConfig(methods=["darts"], seeds=[0], tune=True, retrain_epochs=0)
    with pytest.raises(ConfigError, match="retrain-epochs"):
        run_bench(cfg, tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_standing_tau_by_hand():
    from genlab.nas.methods.reported import REPORTED_NB201, standing

    # reported C10: darts 54.30 < pc-darts 93.41 < gdas 93.61 < drnas 94.36
    same = {"darts": {"cifar10_mean": 50.0}, "pc-darts": {"cifar10_mean": 60.0},
            "gdas": {"cifar10_mean": 70.0}, "drnas": {"cifar10_mean": 80.0},
            "ber": {"cifar10_mean": 99.0}}  # no reported figure: left out
    assert REPORTED_NB201["gdas"][0] < REPORTED_NB201["drnas"][0]
    rank = standing(same)
    assert rank["tau"] == pytest.approx(1.0) and len(rank["rows"]) == 4
    flipped = {k: {"cifar10_mean": -v["cifar10_mean"]} for k, v in same.items()}
    assert standing(flipped)["tau"] == pytest.approx(-1.0)
    # one discordant pair of 6 (gdas and drnas swapped): (5 - 1) / 6
    swapped = dict(same, gdas={"cifar10_mean": 80.0}, drnas={"cifar10_mean": 70.0})
    assert standing(swapped)["tau"] == pytest.approx(4 / 6)
    assert standing({"darts": {"cifar10_mean": 1.0}}) is None


def test_standing_interval_over_seeds():
    from genlab.nas.methods.reported import standing

    rows = ("darts", "pc-darts", "gdas", "drnas")
    means = {"darts": 50.0, "pc-darts": 60.0, "gdas": 70.0, "drnas": 80.0}
    per_row = {r: {"cifar10_mean": means[r]} for r in rows}
    # seeds that never overlap between rows: every resample keeps the order, tau 1 throughout
    apart = {r: [means[r] - 1, means[r] + 1] for r in rows}
    rank = standing(per_row, apart)
    assert (rank["low"], rank["high"], rank["seeds"]) == (1.0, 1.0, 2)
    # overlapping seeds: a row's resampled mean is its low seed, the midpoint or its high seed
    # with chances 1/4, 1/2, 1/4. gdas (60.5 / 70 / 79.5) lands above drnas (70.5 / 80 / 89.5)
    # in 1/16 of the redraws and below pc-darts (59 / 60 / 61) in another 1/16, never both:
    # one discordant pair of six (tau (5 - 1) / 6) in 1/8 of the resamples, so the 5% point
    # of the 90% interval is 4/6 and the 95% point 1
    overlap = dict(apart, gdas=[60.5, 79.5], drnas=[70.5, 89.5])
    rank = standing(per_row, overlap)
    assert rank["high"] == 1.0 and rank["low"] == pytest.approx(4 / 6)
    assert "low" not in standing(per_row)  # no seeds given: no interval


def test_method_plus_regulariser_rows_tune_the_regulariser():
    assert tuning_grid("darts+ber", row_options("darts+ber")) == PENALTIES.get("ber").tuning
    assert tuning_grid("beta", row_options("beta")) == get_method("beta").tuning
