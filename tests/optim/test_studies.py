"""Studies: toy dynamics against the stability argument, label noise, models, optimiser wiring."""

import pytest
import torch

from genlab.core.errors import ConfigError
from genlab.optim.studies import toy
from genlab.optim.studies.models import build_model
from genlab.optim.studies.noise import DIGITS_ASYMMETRIC_MAP, corrupt_labels
from genlab.optim.studies.train import TrainConfig, build_optimizer


def test_toy_sgd_escapes_gd_stays():
    cfg = toy.ToyConfig(iterations=600)
    sgd = toy.describe(toy.trajectory(cfg, stochastic=True, seed=8), cfg)
    gd = toy.describe(toy.trajectory(cfg, stochastic=False), cfg)
    assert sgd["escaped"] and sgd["left_at"] is not None
    assert not gd["escaped"] and gd["left_at"] is None
    assert gd["final_x"] == pytest.approx(1.0, abs=1e-9)


def test_toy_cov_threshold_matches_linear_stability():
    # COV adds 1.62 lam to the curvature at x = 1: unstable for lr 0.6 iff lam > 0.823
    below = toy.describe(toy.cov_trajectory(toy.ToyConfig(cov_lam=0.7, iterations=300)),
                         toy.ToyConfig())
    above = toy.describe(toy.cov_trajectory(toy.ToyConfig(cov_lam=1.0, iterations=300)),
                         toy.ToyConfig())
    assert below["left_at"] is None and above["escaped"]


def test_toy_quantities_hand_computed():
    # at x = 1: f1' = 0.2 (x-1), f2' = 3.8 (x-1); curvatures 0.2 and 3.8; s = 1.8
    assert toy.sample_grads(1.1) == pytest.approx((0.02, 0.38))
    assert toy.curvature_nonuniformity_at(1.0) == pytest.approx(1.8)
    assert toy.curvature_nonuniformity_at(0.0) == 0.0
    assert toy.noise_trace_at(1.1) == pytest.approx(((0.02 - 0.38) / 2) ** 2)
    with pytest.raises(ConfigError):
        toy.ToyConfig(lr=-0.1).validate()


def test_run_toy_writes_folder(tmp_path):
    summary = toy.run_toy(toy.ToyConfig(iterations=400, seeds=4), tmp_path / "toy")
    assert summary["sgd_escape_fraction"] > 0.5 and not summary["gd_escaped"]
    assert (tmp_path / "toy" / "toy_paths.png").stat().st_size > 0
    assert (tmp_path / "toy" / "summary.json").exists()


def test_label_noise_rates_and_map():
    labels = torch.arange(10).repeat(500)
    sym = corrupt_labels(labels, 0.4, "symmetric", seed=1)
    flipped = (sym != labels).float().mean()
    assert abs(float(flipped) - 0.4) < 0.03  # symmetric flips always change the class
    asym = corrupt_labels(labels, 0.4, "asymmetric", seed=1)
    changed = asym != labels
    assert set(labels[changed].tolist()) == set(DIGITS_ASYMMETRIC_MAP)
    for src, dst in DIGITS_ASYMMETRIC_MAP.items():
        sel = changed & (labels == src)
        assert torch.all(asym[sel] == dst)
    assert torch.equal(corrupt_labels(labels, 0.0), labels)
    with pytest.raises(ConfigError):
        corrupt_labels(labels, 1.5)


@pytest.mark.parametrize("arch", ["mlp", "cnn", "transformer"])
def test_models_shapes_and_bad_sizes(arch):
    model = build_model(arch, 8, 2)
    assert model(torch.randn(3, 1, 8, 8)).shape == (3, 10)
    with pytest.raises(ConfigError):
        build_model(arch, 0, 2)


def test_build_optimizer_passes_each_its_options():
    model = build_model("cnn", 4, 1)
    sam = build_optimizer(TrainConfig(optimizer="sam", rho=0.2), model, 100)
    assert sam.param_groups[0]["rho"] == 0.2 and sam.model is model
    cov = build_optimizer(TrainConfig(optimizer="cov", lam=0.3), model, 100)
    assert cov.lam == 0.3 and cov.n_total == 100
    with pytest.raises(ConfigError):
        TrainConfig(lr=-1).validate()
    with pytest.raises(ConfigError):
        TrainConfig(optimizer="adamw").validate()


def test_sparse_problem_and_diagonal_net():
    from genlab.optim.studies.sparse import DiagonalNet, SparseConfig, fit_one, make_problem

    cfg = SparseConfig(n=30, d=20, k=3, epochs=2, seeds=1)
    prob = make_problem(cfg, 0)
    assert float(prob["theta"].norm()) == pytest.approx(1.0)
    assert torch.count_nonzero(prob["theta"]) == 3 and torch.all(prob["theta"][:3] > 0)
    assert torch.allclose(prob["y_test"], prob["x_test"] @ prob["theta"])
    net = DiagonalNet(20, 0.2, torch.Generator().manual_seed(0))
    assert torch.allclose(net(prob["x"]), prob["x"] @ (net.u * net.v))
    res = fit_one("sgd", cfg, 0, record_path=True)
    beta = torch.tensor(res["final_beta"], dtype=torch.float64)
    assert res["support_size"] == int((beta.abs() > 1e-2).sum())
    assert res["beta_l1"] == pytest.approx(float(beta.abs().sum()))
    test = 0.5 * float(((prob["x_test"] @ beta - prob["y_test"]) ** 2).mean())
    assert res["test_loss"] == pytest.approx(test)
    with pytest.raises(ConfigError):
        SparseConfig(k=200).validate()
    with pytest.raises(ConfigError):
        SparseConfig(lr=-0.05).validate()


@pytest.mark.slow
def test_demo_section_writes_report_parts(tmp_path):
    from genlab.core.report import Report
    from genlab.optim.studies.demo import demo_section

    report = Report("demo")
    result = demo_section(tmp_path / "optim", report)
    report.write(tmp_path)
    text = (tmp_path / "report.md").read_text()
    for image in ("optim/toy/toy_paths.png", "optim/sparse/sparse_paths.png",
                  "optim/train/curves.png"):
        assert image in text and (tmp_path / image).exists()
    assert result["toy"]["gd_escaped"] is False
