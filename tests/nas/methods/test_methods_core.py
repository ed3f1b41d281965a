"""The method protocol (genlab.nas.methods): presets fill the config, parts reach the loop."""

import json

import pytest
import torch
from nas_reference import run_cli

from genlab.core.errors import ConfigError
from genlab.nas.architect import bilevel_step
from genlab.nas.bench import BenchConfig, row_options, run_bench
from genlab.nas.methods import (
    Method,
    Perturbation,
    build_parts,
    build_supernet,
    get_method,
    method_names,
)
from genlab.nas.regularizers import make_regularizer
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import get_space
from genlab.nas.spaces.nb201.supernet import NB201SuperNet


def test_presets_fill_the_config_and_explicit_values_win():
    plain = SearchConfig().resolved()
    assert (plain.method, plain.reg, plain.arch_lr, plain.w_weight_decay,
            plain.arch_weight_decay) == ("darts", "ber", 3e-2, 3e-4, 0.0)  # as before methods
    assert SearchConfig(method="darts").resolved().reg == "none"  # DARTS' own: no penalty
    assert SearchConfig(method="beta").resolved().reg == "beta"
    assert SearchConfig(method="beta", reg="ber").resolved().reg == "ber"  # BER on top
    assert SearchConfig(method="darts", arch_lr=1e-3).resolved().arch_lr == 1e-3


def test_unknown_method_and_part_are_refused_with_the_choices():
    with pytest.raises(ConfigError, match="darts"):
        SearchConfig(method="nope").validate()
    with pytest.raises(ConfigError, match="softmax"):
        SearchConfig(relaxation="nope").validate()
    with pytest.raises(ConfigError, match="arch[-_]start"):
        SearchConfig(supernet_params={"arch_start": 1.5}).validate()


def test_first_order_only_method_refuses_order_2():
    from genlab.nas.methods import METHODS

    name = "test-first-order-only"
    if name not in METHODS.names():
        METHODS.register(name, Method(name, "test", "first order only", orders=(1,)))
    with pytest.raises(ConfigError, match="first order only"):
        SearchConfig(method=name, order=2).validate()


def _tiny_nb201():
    torch.manual_seed(0)
    return NB201SuperNet(C=4, N=1, num_classes=3, in_channels=1)


def _batches():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 1, 8, 8, generator=g)
    y = torch.randint(0, 3, (8,), generator=g)
    return (x, y), (x.flip(0), y.flip(0))


def _opts(net):
    a_opt = torch.optim.Adam(net.arch_parameters(), lr=0.1)
    w_opt = torch.optim.SGD(net.weight_parameters(), lr=0.1)
    return a_opt, w_opt


def test_arch_warm_up_keeps_alpha_then_moves_it():
    net = _tiny_nb201()
    a_opt, w_opt = _opts(net)
    parts = build_parts(get_method("darts"), supernet={"arch_start": 0.5})
    reg = make_regularizer("none")
    train, val = _batches()
    start = net.arch_params.detach().clone()
    for step in range(2):  # steps 0, 1 of 4: before the warm-up ends at 0.5 x 4
        bilevel_step(net, a_opt, w_opt, train, val, reg, step, 4, 0.0, 1, None, parts)
        assert torch.equal(net.arch_params.detach(), start)
    bilevel_step(net, a_opt, w_opt, train, val, reg, 2, 4, 0.0, 1, None, parts)
    assert not torch.equal(net.arch_params.detach(), start)


class _SkipOnly(Perturbation):
    """Weight-step weights with all mass on skip_connect: no conv enters the forward."""

    def weights(self, net, batch, step, total):
        w = torch.zeros_like(net.arch_params)
        w[:, net.ops.index("skip_connect")] = 1.0
        return {"cell": w}


def test_weight_step_uses_the_perturbation_weights_and_restores_alpha():
    net = _tiny_nb201()
    a_opt, w_opt = _opts(net)
    parts = build_parts(get_method("darts"))
    parts.perturbation = _SkipOnly()
    train, val = _batches()
    conv = net.search_cells()[0].convs["nor_conv_3x3_from0"]
    before, alpha_before = conv.detach().clone(), net.arch_params.detach().clone()
    a_opt.param_groups[0]["lr"] = 0.0  # alpha stays: only the weight step is under test
    bilevel_step(net, a_opt, w_opt, train, val, make_regularizer("none"), 0, 4, 0.0, 1, None,
                 parts)
    assert torch.equal(conv.detach(), before)  # no gradient reached the conv (SGD, no decay)
    assert net.mixing_override is None
    assert torch.equal(net.arch_params.detach(), alpha_before)
    stem = net.stem[0].weight
    assert stem.grad is not None and stem.grad.abs().sum() > 0  # the skip path trained


def test_relaxation_is_what_the_forward_mixes():
    net = _tiny_nb201()
    x = torch.randn(2, 1, 8, 8)
    net.eval()
    ref = net(x)
    net.relaxation = lambda name, a, training: torch.softmax(2 * a, dim=-1)
    with torch.no_grad():
        net.arch_params.mul_(0.5)  # softmax(2 * alpha/2) = softmax(alpha): the same forward
    assert torch.allclose(net(x), ref, atol=1e-6)


def test_build_supernet_at_the_upstream_size_counts_as_quark0_darts():
    # quark0/darts cnn/model_search.py Network(C=16, num_classes=10, layers=8): 1,930,618
    # weights besides the alphas (the count its search log prints is of the same tensors)
    net = build_supernet("darts", method="darts")
    assert sum(p.numel() for p in net.weight_parameters()) == 1_930_618
    assert [tuple(a.shape) for a in net.arch_parameters()] == [(14, 8), (14, 8)]


def test_every_method_is_listed_with_its_source(capsys):
    code, out, _ = run_cli(["nas", "methods"], capsys)
    assert code == 0
    for name in method_names():
        assert name in out and get_method(name).source in out


def test_bench_rows_name_methods_regularisers_or_both():
    assert row_options("beta") == {"method": "beta", "reg": None}
    assert row_options("ber") == {"method": None, "reg": "ber"}
    assert row_options("darts+ber") == {"method": "darts", "reg": "ber"}
    with pytest.raises(ConfigError, match="unknown bench row"):
        row_options("nope")


def test_method_bench_records_methods_and_reuses_equal_searches(tmp_path):
    cfg = BenchConfig(methods=["darts", "ber", "darts+ber"], seeds=[0],
                      search=SearchConfig(channels=4, cells=1, steps=3, hessian_points=0,
                                          diag_batch=16),
                      retrain_epochs=0, random_archs=False)
    result = run_bench(cfg, tmp_path / "b")
    runs = {r["run"]: r for r in result["records"]}
    assert set(runs) == {"darts-s0", "ber-s0", "darts+ber-s0"}
    assert runs["ber-s0"]["genotype"] == runs["darts+ber-s0"]["genotype"]
    # darts+ber is the same search as ber: one run folder for both
    assert sorted(p.name for p in (tmp_path / "b" / "search").iterdir()) == ["ber-s0",
                                                                              "darts-s0"]
    summary = json.loads((tmp_path / "b" / "search" / "darts-s0" / "summary.json").read_text())
    assert (summary["method"], summary["reg"], summary["select"]) == ("darts", "none", "argmax")


def test_search_summary_records_method_and_select(tmp_path):
    cfg = SearchConfig(method="beta", channels=4, cells=1, steps=2, hessian_points=0,
                       diag_batch=16)
    s = run_search(cfg, tmp_path / "r")
    assert (s["method"], s["reg"], s["select"], s["stopped_epoch"]) == ("beta", "beta",
                                                                         "argmax", None)
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["method"] == "beta" and config["reg_resolved"]["name"] == "beta"
    assert get_space("nb201").parse(s["genotype"])


def test_a_resumed_bench_may_gain_rows_and_reuses_the_finished_jobs(tmp_path):
    search = SearchConfig(channels=4, cells=1, steps=3, hessian_points=0, diag_batch=16)
    first = BenchConfig(methods=["darts"], seeds=[0], search=search, retrain_epochs=0,
                        random_archs=False)
    run_bench(first, tmp_path / "b")
    summary = tmp_path / "b" / "search" / "darts-s0" / "summary.json"
    stamp = summary.stat().st_mtime_ns
    more = BenchConfig(methods=["darts", "beta"], seeds=[0], search=search, retrain_epochs=0,
                       random_archs=False)
    result = run_bench(more, tmp_path / "b", resume=True)
    assert {r["run"] for r in result["records"]} == {"darts-s0", "beta-s0"}
    assert summary.stat().st_mtime_ns == stamp  # darts-s0 was read back, not searched again


def test_alpha_forces_skip_an_alpha_without_gradient():
    from genlab.nas.diagnostics import alpha_forces

    ce = [None, torch.tensor([3.0, 0.0])]
    total = [None, torch.tensor([3.0, 4.0])]
    forces = alpha_forces(ce, total)  # |ce| = 3, |total - ce| = 4
    assert (forces["force_ce"], forces["force_reg"], forces["force_ratio"]) == (3.0, 4.0, 4 / 3)
