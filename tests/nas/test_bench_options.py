"""`nas bench` takes every option of `nas search` (derived from SearchConfig, not listed):
each with the search's default, passed into the rows' search template."""

from __future__ import annotations

import json
from dataclasses import dataclass

from nas_reference import run_cli
from wrappers import check_wraps, wrap_problems

from genlab.core.options import option_fields, option_like
from genlab.nas.bench.config import _TEMPLATE, ROW_OPTIONS, BenchCommandConfig
from genlab.nas.search import SearchConfig


def test_nas_bench_takes_every_search_option():
    check_wraps(BenchCommandConfig, SearchConfig, skip=ROW_OPTIONS)
    searched = {f.name for f, _ in option_fields(SearchConfig)} - set(ROW_OPTIONS)
    assert set(_TEMPLATE) == searched  # every one of them builds the template


def test_the_check_names_what_a_hand_listed_wrapper_lacks():
    @dataclass
    class HandListed:
        space: str = option_like(SearchConfig, "space")
        steps: int | None = option_like(SearchConfig, "steps", default=5)

    problems = wrap_problems(HandListed, SearchConfig, skip=("seed", "nope"))
    assert "skip names nope, which is no option of SearchConfig" in problems
    assert "HandListed.steps defaults to 5, SearchConfig.steps to None" in problems
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
