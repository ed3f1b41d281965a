"""Studies: toy dynamics against the stability argument, label noise, models, optimiser wiring."""

import math

import pytest
import torch

from genlab.core.errors import ConfigError
from genlab.optim.studies.synthetic import toy
from genlab.optim.training.models import build_model
from genlab.optim.training.noise import DIGITS_ASYMMETRIC_MAP, corrupt_labels
from genlab.optim.training.train import TrainConfig, build_optimizer


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
    from genlab.optim.studies.synthetic.sparse import (
        DiagonalNet,
        SparseConfig,
        fit_one,
        make_problem,
    )

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


def test_sparse_table_gives_the_sample_std_over_seeds():
    from genlab.optim.studies.synthetic.sparse import aggregate

    l1 = [2.0, 2.5, 1.5, 2.2, 1.8]
    runs = [{"optimizer": "sam", "train_loss": 0.0, "test_loss": 0.1, "beta_l1": v,
             "support_size": 3, "support_recovered": True, "seconds": 1.0} for v in l1]
    row = aggregate(runs, ["sam"])[0]
    by_hand = math.sqrt(sum((v - 2.0) ** 2 for v in l1) / 4)  # n - 1, as every table has it
    assert row["beta_l1"] == pytest.approx(2.0) and row["beta_l1_std"] == pytest.approx(by_hand)


@pytest.mark.slow
def test_demo_section_writes_report_parts(tmp_path):
    from genlab.core.report import Report
    from genlab.optim.demo import demo_section

    report = Report("demo")
    result = demo_section(tmp_path / "optim", report)
    report.write(tmp_path)
    text = (tmp_path / "report.md").read_text()
    for image in ("optim/toy/toy_paths.png", "optim/sparse/sparse_paths.png",
                  "optim/train/curves.png"):
        assert image in text and (tmp_path / image).exists()
    assert result["toy"]["gd_escaped"] is False


# -- the comparison protocol ------------------------------------------------------------
def test_holdout_split_is_fixed_and_disjoint():
    from genlab.optim.training.tasks import task_data

    a = task_data("digits", "holdout", data_seed=0)
    b = task_data("digits", "holdout", data_seed=0, label_noise=0.4, noise_seed=3)
    assert (len(a.fit), len(a.val), len(a.test)) == (1079, 359, 359)
    assert torch.equal(a.fit.images, b.fit.images)  # noise changes labels, never the split
    assert torch.equal(b.clean_fit_labels, a.fit.labels)
    assert abs(float((b.fit.labels != a.fit.labels).float().mean()) - 0.4) < 0.05
    rows = {tuple(r.tolist()) for r in a.fit.images.flatten(1)}
    assert not any(tuple(r.tolist()) in rows for r in a.val.images.flatten(1))
    full = task_data("digits", "full", data_seed=0)
    assert full.val is None and len(full.fit) == 1438


def test_class_subsets_and_few_shot():
    from genlab.optim.training.tasks import majority_accuracy, task_data

    low = task_data("digits0-4", "holdout", data_seed=0)
    high = task_data("digits5-9", "holdout", data_seed=0, per_class=7)
    assert low.num_classes == high.num_classes == 5
    assert set(low.fit.labels.tolist()) == set(range(5)) == set(high.test.labels.tolist())
    assert torch.bincount(high.fit.labels).tolist() == [7] * 5
    full = task_data("digits", "holdout", data_seed=0)
    assert len(high.test) == int((full.test.labels >= 5).sum())
    counts = torch.bincount(low.fit.labels)
    expected = 100 * float((low.test.labels == int(counts.argmax())).float().mean())
    assert majority_accuracy(low) == pytest.approx(expected)
    with pytest.raises(ConfigError):
        task_data("digits5-9", "holdout", label_noise=0.2, noise_kind="asymmetric")
    with pytest.raises(ConfigError):
        task_data("letters")


def test_translation_moves_each_image_by_its_own_shift_against_a_pixel_loop():
    from genlab.optim.training.tasks import translate_images

    images = torch.randn(40, 2, 5, 6)
    out = translate_images(images, 2, seed=3, background=-9.0)
    shifts = torch.randint(-2, 3, (40, 2), generator=torch.Generator().manual_seed(3))
    for n in range(40):  # out[y, x] = images[y - dy, x - dx], blank where that is outside
        dy, dx = shifts[n].tolist()
        for c in range(2):
            for y in range(5):
                for x in range(6):
                    sy, sx = y - dy, x - dx
                    inside = 0 <= sy < 5 and 0 <= sx < 6
                    want = float(images[n, c, sy, sx]) if inside else -9.0
                    assert float(out[n, c, y, x]) == want
    assert len({tuple(s) for s in shifts.tolist()}) > 10  # the draws differ per image
    assert torch.equal(translate_images(images, 0, seed=3, background=0.0), images)


def test_jittered_task_fixed_per_data_seed_with_copies():
    from genlab.optim.training.tasks import task_data

    plain = task_data("digits5-9", "holdout", data_seed=0, per_class=4)
    a = task_data("digits5-9", "holdout", data_seed=0, per_class=4, translate=1)
    b = task_data("digits5-9", "holdout", data_seed=0, per_class=4, translate=1,
                  translate_copies=3, label_noise=0.0)
    assert torch.equal(a.fit.labels, plain.fit.labels) and len(a.test) == len(plain.test)
    assert not torch.equal(a.test.images, plain.test.images)  # the domain moved ...
    background = float(task_data("digits", "full").fit.images.amin())
    for split in (a.fit, a.val, a.test):  # ... within one pixel, blank paper uncovered
        assert float(split.images.amin()) == pytest.approx(background)
    again = task_data("digits5-9", "holdout", data_seed=0, per_class=4, translate=1)
    assert torch.equal(again.fit.images, a.fit.images)  # one fixed draw per data seed
    assert len(b.fit) == 3 * len(a.fit) and torch.equal(b.fit.images[:len(a.fit)],
                                                        a.fit.images)
    assert torch.equal(b.fit.labels, a.fit.labels.repeat(3))
    assert not torch.equal(b.fit.images[len(a.fit):2 * len(a.fit)], a.fit.images)
    assert torch.equal(b.test.images, a.test.images)  # copies touch the fit set only
    assert torch.equal(b.val.images, a.val.images)
    v = task_data("digits5-9", "holdout", data_seed=0, per_class=4, translate=1, val_copies=3)
    n = len(a.val)
    assert len(v.val) == 3 * n and torch.equal(v.val.images[:n], a.val.images)
    assert torch.equal(v.val.labels, a.val.labels.repeat(3))
    assert not torch.equal(v.val.images[n:2 * n], a.val.images)  # a second draw of shifts
    assert torch.equal(v.fit.images, a.fit.images) and torch.equal(v.test.images, a.test.images)
    for bad in ({"translate": 4}, {"translate": -1}, {"translate": 0, "translate_copies": 2},
                {"translate": 1, "translate_copies": 0}, {"translate": 0, "val_copies": 2},
                {"translate": 1, "val_copies": 0}):
        with pytest.raises(ConfigError):
            task_data("digits5-9", "holdout", **bad)
    with pytest.raises(ConfigError):
        TrainConfig(translate=5).validate()
    with pytest.raises(ConfigError, match="val_copies"):
        TrainConfig(translate=0, val_copies=2).validate()


def test_search_budget_equal_and_choice_on_validation():
    from pathlib import Path

    from genlab.optim.studies.search import (
        SEARCH_GRIDS,
        Protocol,
        choose,
        search_specs,
        with_choice,
    )

    for _, grid in SEARCH_GRIDS.items():
        sizes = {o: len(grid.trials(o)) for o in ("sgd", "sam", "cov", "csam")}
        assert len(set(sizes.values())) == 1, sizes
    protocol = Protocol.for_arch("cnn")
    specs = search_specs(protocol, ["sgd", "cov"], Path("store"))
    assert len(specs) == 18 and len({s.out for s in specs}) == 18
    assert all(s.config.split == "holdout" and s.config.seed == 0 for s in specs)
    records = {s.name: {"val_acc": 50.0, "val_loss": 1.0, "test_acc": 0.0} for s in specs}
    best_cov = [s for s in specs if s.config.optimizer == "cov"][4]
    records[best_cov.name].update(val_acc=90.0, test_acc=10.0)
    tie = [s for s in specs if s.config.optimizer == "sgd"][2:4]
    records[tie[0].name].update(val_acc=80.0, val_loss=0.5)
    records[tie[1].name].update(val_acc=80.0, val_loss=0.4, test_acc=100.0)
    choices = choose(specs, records)
    assert (choices["cov"]["lr"], choices["cov"]["radius"]) == (best_cov.config.lr,
                                                                best_cov.config.lam)
    assert choices["sgd"]["lr"] == tie[1].config.lr  # equal accuracy: lower val loss
    cfg = with_choice(protocol.base(), choices["cov"])
    assert (cfg.optimizer, cfg.lr, cfg.lam) == ("cov", best_cov.config.lr, best_cov.config.lam)


def test_stats_means():
    from genlab.optim.studies.stats import mean_std, pct

    m, s = mean_std([90, 92, 94])
    assert m == pytest.approx(92) and s == pytest.approx(2)  # sample std (ddof 1)
    assert mean_std([50]) == (50.0, 0.0)
    assert pct(92.34, 1.23) == "92.3 ± 1.2"  # percentages, printed as they are


def test_paired_comparisons_by_hand():
    """Guided minus SAM and SGD, paired by seed: the exact sign-flip p-values of all-positive
    differences (2 / 2^n), Holm over the four testable comparisons by hand, a missing seed
    left out of its pairs, one seed in common not testable, and the MDE of the paired t
    formula at alpha 0.05 / 4."""
    import numpy as np
    from scipy import stats as st

    from genlab.optim.studies.stats import compare, per_seed

    seeds = range(9)
    sgd = {s: 90.0 + s for s in seeds}
    sam = {s: 91.0 + s for s in seeds}
    cov = {s: sam[s] + [1, 2, 3][s % 3] for s in seeds}  # above both on every seed
    swing = [0.5, -0.5, 0.2, -0.2, 0.1, -0.1, 0.3, -0.3]
    csam = {s: sam[s] + swing[s] for s in range(8)}  # seed 8 missing: 8 pairs; 0 vs SAM
    values = {"": {"sgd": sgd, "sam": sam, "asam": dict(sam), "cov": cov,
                   "csam_identity": csam, "acsam_identity": {0: 95.0}}}
    rows = compare(values)
    assert [(r["optimizer"], r["against"]) for r in rows] == [
        ("cov", "sam"), ("cov", "sgd"), ("csam_identity", "sam"), ("csam_identity", "sgd"),
        ("acsam_identity", "sam"), ("acsam_identity", "sgd")]  # asam: a baseline
    by = {(r["optimizer"], r["against"]): r for r in rows}
    assert [by["cov", "sam"]["n"], by["csam_identity", "sgd"]["n"]] == [9, 8]
    assert by["cov", "sam"]["difference"] == pytest.approx(2.0)
    assert by["csam_identity", "sgd"]["difference"] == pytest.approx(1.0)
    p = {k: by[k]["p"] for k in by if by[k]["p"] is not None}
    assert p == pytest.approx({("cov", "sam"): 2 / 2 ** 9, ("cov", "sgd"): 2 / 2 ** 9,
                               ("csam_identity", "sgd"): 2 / 2 ** 8,
                               ("csam_identity", "sam"): 1.0})
    holm = {("cov", "sam"): 4 * 2 / 2 ** 9, ("cov", "sgd"): 4 * 2 / 2 ** 9,  # hand Holm
            ("csam_identity", "sgd"): 4 * 2 / 2 ** 9, ("csam_identity", "sam"): 1.0}
    assert {k: by[k]["p_holm"] for k in holm} == pytest.approx(holm)
    assert [by[k]["kind"] for k in holm] == ["better", "better", "better", "undecided"]
    assert by["cov", "sam"]["low"] > 0 and "Holm 4" in by["cov", "sam"]["line"]
    assert by["acsam_identity", "sam"]["kind"] == "not testable"
    assert by["acsam_identity", "sam"]["mde"] is None
    d = [csam[s] - sam[s] for s in range(8)]
    sd = float(np.std(d, ddof=1))
    mde = (st.t.ppf(1 - 0.05 / 4 / 2, 7) + st.t.ppf(0.8, 7)) * sd / np.sqrt(8)
    assert by["csam_identity", "sam"]["mde"] == pytest.approx(mde)
    worse = compare(values, higher_is_better=False)  # e.g. a spread: lower is better
    assert [r["kind"] for r in worse[:2]] == ["worse", "worse"]
    records = [{"seed": 3, "test_acc": 97.0}, {"seed": 4, "test_acc": None},
               {"seed": 5, "diverged": True}]
    assert per_seed(records) == {3: 97.0}


def test_store_names_and_execute_order(tmp_path):
    from dataclasses import replace

    from genlab.optim.studies.grid import config_hash, execute, stored, training

    base = TrainConfig()
    assert config_hash(base) == config_hash(TrainConfig())
    assert config_hash(replace(base, lr=0.1)) != config_hash(base)
    spec = stored(tmp_path, "x", replace(base, width=4, depth=1, epochs=1, measure=False))
    assert spec.out == tmp_path / spec.name and spec.name.startswith("x-")
    with pytest.raises(ConfigError, match="needs 'b', which is not in the sweep"):
        execute([training("a", base, tmp_path / "a", after=("b",))])
    with pytest.raises(ConfigError, match="two runs are named"):
        execute([spec, spec])
    first = execute([spec])[spec.name]
    (spec.out / "metrics.jsonl").unlink()  # a finished spec is read back, not retrained
    again = execute([spec])[spec.name]
    assert again["test_acc"] == first["test_acc"]


def test_fine_tuning_starts_from_the_backbone(tmp_path):
    from dataclasses import replace

    from genlab.core.errors import CheckpointError
    from genlab.optim.training.train import prepare, train_digits

    pre = replace(TrainConfig(arch="cnn", width=4, depth=1, epochs=1, measure=False),
                  task="digits0-4")
    train_digits(pre, tmp_path / "pre", progress_bar=False)
    _, pretrained = prepare(pre)
    pretrained.load_state_dict(torch.load(tmp_path / "pre" / "checkpoint.pt",
                                          weights_only=True)["model"])
    ft = replace(pre, task="digits5-9", seed=1, init_from=str(tmp_path / "pre" / "checkpoint.pt"))
    _, model = prepare(ft)
    _, fresh = prepare(replace(ft, init_from=""))
    for (k, v), w, f in zip(model.state_dict().items(), pretrained.state_dict().values(),
                            fresh.state_dict().values(), strict=True):
        assert torch.equal(v, f if k.startswith("head.") else w), k
    with pytest.raises(CheckpointError, match="do not fit"):
        prepare(replace(ft, arch="mlp"))


def test_a_diverged_training_is_a_result_read_back_on_rerun(tmp_path, monkeypatch):
    import json

    import genlab.optim.studies.grid as grid
    from genlab.core.errors import DivergedError

    calls = []

    def diverging(cfg, out, **kw):
        calls.append(out)
        (out / "config.json").parent.mkdir(parents=True, exist_ok=True)
        raise DivergedError("loss is nan at epoch 1")

    monkeypatch.setattr(grid, "train_digits", diverging)
    spec = grid.stored(tmp_path, "x", TrainConfig(width=4, depth=1, epochs=1, measure=False))
    record = grid.execute([spec])[spec.name]
    assert record["diverged"] is True and record["error"] == "loss is nan at epoch 1"
    summary = json.loads((spec.out / "summary.json").read_text())
    assert summary == {"diverged": True, "error": "loss is nan at epoch 1"}
    assert grid.execute([spec])[spec.name]["diverged"] is True and len(calls) == 1


def test_comparison_tables_print_p_values_to_three_significant_digits():
    from genlab.cli.studies import aligned_table
    from genlab.optim.studies.stats import compare, comparison_block, comparison_markdown

    # five seeds, SAMGCM below SAM on every one: the sign-flip test's smallest p, 2/32
    per_opt = {"samgcm": {s: 1.0 + 0.1 * s for s in range(5)},
               "sam": {s: 3.0 + 0.1 * s for s in range(5)}}
    rows = compare({"l1": per_opt}, higher_is_better=False)
    title, shown, columns = comparison_block("l1", rows)
    assert rows[0]["p"] == pytest.approx(2 / 32) and shown[0]["p"] == "0.0625"
    text = aligned_table(shown, columns, digits=1)  # a study's decimals elsewhere
    assert "0.0625" in text and " inf" in text  # and five seeds cannot reach 0.05 / 1
    assert "| 0.0625 |" in comparison_markdown("l1", rows)
