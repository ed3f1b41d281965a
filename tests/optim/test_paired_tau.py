"""Paired tau differences against brute-force resampling loops; Jiang et al.'s conditional
mutual information against hand-computed cases."""

import itertools
import math
import os

import numpy as np
import pytest

from genlab.core.errors import ConfigError, DataError
from genlab.optim.measures.correlation import (
    RANDOM_MEASURE,
    conditional_mi,
    granulated_tau,
    jackknife_tau_difference,
    kendall_tau,
    paired_granulated_difference,
    paired_table,
    paired_tau_difference,
    verdict_text,
    with_random_measure,
)

AXES = ["lr", "batch", "width"]


def grid_records(reps: int, seed: int = 0, *, tie_levels: int = 0) -> list[dict]:
    """A 2 x 2 x 2 grid, ``reps`` trainings per cell: the gap grows with lr and batch plus
    noise; "good" is the gap plus noise, "weak" a noisier copy, "indep" independent noise.
    ``tie_levels`` > 0 rounds "weak" onto that many levels (ties in the measure)."""
    rng = np.random.default_rng(seed)
    records = []
    for lr, batch, width in itertools.product([0.01, 0.1], [16, 128], [32, 64]):
        for _ in range(reps):
            gap = 3 * lr + batch / 200 + 0.3 * rng.normal()
            weak = gap + rng.normal()
            if tie_levels:
                weak = float(np.round(weak * tie_levels / 3))
            records.append({"lr": lr, "batch": batch, "width": width, "gap": gap,
                            "good": gap + 0.2 * rng.normal(), "weak": weak,
                            "indep": float(rng.normal())})
    return records


def percentile_interval(values: list[float], level: float = 0.95) -> tuple[float, float]:
    tail = 100 * (1 - level) / 2
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def column(records, key):
    return [r[key] for r in records]


def test_paired_tau_matches_a_brute_force_resampling_loop():
    records = grid_records(2, seed=1, tie_levels=2)  # 16 trainings, ties in "weak"
    resamples, seed = 300, 7
    res = paired_tau_difference(records, "good", "weak", "gap", resamples=resamples,
                                seed=seed, level=0.9)
    # the point estimate: two plain kendall_tau calls
    tau_good = kendall_tau(column(records, "good"), column(records, "gap"))
    tau_weak = kendall_tau(column(records, "weak"), column(records, "gap"))
    assert res["tau_a"] == pytest.approx(tau_good, abs=1e-12)
    assert res["tau_b"] == pytest.approx(tau_weak, abs=1e-12)
    assert res["difference"] == pytest.approx(tau_good - tau_weak, abs=1e-12)
    # the interval: resample the trainings (the documented draws), both taus per resample
    draws = np.random.default_rng(seed).integers(0, len(records), (resamples, len(records)))
    diffs = []
    for row in draws:
        sample = [records[i] for i in row]
        a = kendall_tau(column(sample, "good"), column(sample, "gap"))
        b = kendall_tau(column(sample, "weak"), column(sample, "gap"))
        if not (math.isnan(a) or math.isnan(b)):
            diffs.append(a - b)
    low, high = percentile_interval(diffs, 0.9)
    assert res["resamples"] == len(diffs)
    assert res["low"] == pytest.approx(low, abs=1e-12)
    assert res["high"] == pytest.approx(high, abs=1e-12)
    assert res["n"] == len(records)


def test_paired_granulated_matches_a_brute_force_resampling_loop():
    records = grid_records(2, seed=2)
    resamples, seed = 120, 3
    res = paired_granulated_difference(records, "good", "indep", "gap", AXES,
                                       resamples=resamples, seed=seed)
    ga, gb = (granulated_tau(records, m, "gap", AXES) for m in ("good", "indep"))
    assert res["granulated_a"] == pytest.approx(ga["granulated"], abs=1e-12)
    assert res["difference"] == pytest.approx(ga["granulated"] - gb["granulated"], abs=1e-12)
    for h in AXES:
        assert res["per_axis"][h]["psi_a"] == pytest.approx(ga["per_hyperparameter"][h])
        assert res["per_axis"][h]["difference"] == pytest.approx(
            ga["per_hyperparameter"][h] - gb["per_hyperparameter"][h], abs=1e-12)
    # brute force: resample the records, regroup them (granulated_tau), both measures
    draws = np.random.default_rng(seed).integers(0, len(records), (resamples, len(records)))
    total, per = [], {h: [] for h in AXES}
    for row in draws:
        sample = [records[i] for i in row]
        a, b = (granulated_tau(sample, m, "gap", AXES) for m in ("good", "indep"))
        if a["granulated"] is not None and b["granulated"] is not None:
            total.append(a["granulated"] - b["granulated"])
        for h in AXES:
            pa, pb = a["per_hyperparameter"][h], b["per_hyperparameter"][h]
            if pa is not None and pb is not None:
                per[h].append(pa - pb)
    assert res["resamples"] == len(total)
    assert (res["low"], res["high"]) == pytest.approx(percentile_interval(total), abs=1e-12)
    for h in AXES:
        assert (res["per_axis"][h]["low"], res["per_axis"][h]["high"]) == pytest.approx(
            percentile_interval(per[h]), abs=1e-12)


def test_random_measure_difference_covers_zero_and_a_real_measure_beats_it():
    records = with_random_measure(grid_records(8, seed=4))  # 64 trainings
    against_indep = paired_tau_difference(records, RANDOM_MEASURE, "indep", "gap")
    assert against_indep["low"] < 0 < against_indep["high"]
    against_good = paired_tau_difference(records, RANDOM_MEASURE, "good", "gap")
    assert against_good["high"] < 0
    rows = paired_table(records, "gap", AXES, nonuniform=("good", "weak"),
                        sharp=("indep", "good"), resamples=300)
    pairs = [(r["a"], r["b"]) for r in rows]
    assert pairs == [("good", "indep"), ("good", "good"), ("weak", "indep"), ("weak", "good"),
                     (RANDOM_MEASURE, "indep"), (RANDOM_MEASURE, "good")]
    by_pair = dict(zip(pairs, rows, strict=True))
    assert by_pair[("good", "indep")]["tau_verdict"] == "good beats indep"
    assert by_pair[("weak", "good")]["tau_verdict"] == "good beats weak"
    assert by_pair[(RANDOM_MEASURE, "good")]["tau_verdict"] == f"good beats {RANDOM_MEASURE}"
    assert by_pair[(RANDOM_MEASURE, "indep")]["tau_verdict"] in (
        "undecided", "no difference larger than 0.1")
    # a measure against itself: the difference is 0 in every resample
    same = by_pair[("good", "good")]
    assert same["tau_diff"] == same["tau_lo"] == same["tau_hi"] == 0.0
    assert same["tau_verdict"] == "no difference larger than 0.1"
    assert same["granulated_verdict"] == "no difference larger than 0.1"
    assert {f"psi_{h}_diff" for h in AXES} <= same.keys()
    assert same["cmi_a"] == same["cmi_b"]


def test_paired_table_adds_the_random_measure_and_matches_its_parts():
    records = grid_records(3, seed=5)
    rows = paired_table(records, "gap", AXES, nonuniform=("good",), sharp=("weak",),
                        resamples=100, seed=2)
    assert [(r["a"], r["b"]) for r in rows] == [("good", "weak"), (RANDOM_MEASURE, "weak")]
    plain = paired_tau_difference(records, "good", "weak", "gap", resamples=100, seed=2)
    gran = paired_granulated_difference(records, "good", "weak", "gap", AXES,
                                        resamples=100, seed=2)
    row = rows[0]
    assert (row["tau_diff"], row["tau_lo"], row["tau_hi"]) == (
        plain["difference"], plain["low"], plain["high"])
    assert (row["granulated_diff"], row["granulated_lo"]) == (gran["difference"], gran["low"])
    assert row["cmi_a"] == conditional_mi(records, "good", "gap", AXES)["K"]
    # the uncorrected 95 % interval a results file records: the replicates' percentiles
    reps = np.asarray(plain["replicates"], dtype=float)
    reps = reps[np.isfinite(reps)]
    assert (row["tau_lo_plain"], row["tau_hi_plain"]) == pytest.approx(
        (np.percentile(reps, 2.5), np.percentile(reps, 97.5)))
    reps = np.asarray(gran["replicates"], dtype=float)
    reps = reps[np.isfinite(reps)]
    assert (row["granulated_lo_plain"], row["granulated_hi_plain"]) == pytest.approx(
        (np.percentile(reps, 2.5), np.percentile(reps, 97.5)))


def test_paired_table_judges_the_claim_pairs_under_holm_by_hand():
    """Each row's p-value from its bootstrap replicates by hand, Holm's adjusted p-values and
    step levels by hand over the claim's rows; the sanity row judged alone."""
    records = with_random_measure(grid_records(3, seed=11))  # 24 trainings
    rows = paired_table(records, "gap", AXES, nonuniform=("good", "weak"), sharp=("indep",),
                        resamples=200, seed=3)
    assert [(r["a"], r["b"]) for r in rows] == [("good", "indep"), ("weak", "indep"),
                                                (RANDOM_MEASURE, "indep")]
    reps = [paired_tau_difference(records, r["a"], r["b"], "gap", resamples=200,
                                  seed=3)["replicates"] for r in rows]
    reps = [x[np.isfinite(x)] for x in reps]
    ps = [min(1.0, 2 * min(float((x <= 0).mean()), float((x >= 0).mean()))) for x in reps]
    assert [r["tau_p"] for r in rows] == pytest.approx(ps)
    first, second = sorted(range(2), key=lambda i: ps[i])  # Holm over the two claim rows
    adjusted = {first: min(1.0, 2 * ps[first])}
    adjusted[second] = max(adjusted[first], min(1.0, ps[second]))
    assert [rows[i]["tau_p_holm"] for i in range(2)] == pytest.approx(
        [adjusted[0], adjusted[1]])
    assert rows[2]["tau_p_holm"] is None  # the sanity row: alone, uncorrected
    level = 1 - 0.05 / 2  # the first step's level
    assert rows[first]["tau_level"] == pytest.approx(level)
    assert (rows[first]["tau_lo"], rows[first]["tau_hi"]) == pytest.approx(
        percentile_interval(list(reps[first]), level))
    for r in rows:
        assert (r["tau_models_needed"] is None) == (r["tau_verdict"] != "undecided")


def test_models_needed_against_the_normal_formula():
    """Replicates N(D, se) over n models: sd = se sqrt(n); 'beats' needs
    ((z_.975 + z_.8) sd / D)^2 models, 'no difference larger than m' (1.96 sd / (m - D))^2;
    the fewer of the two."""
    from genlab.core.stats import bootstrap_estimate
    from genlab.optim.measures.correlation import models_needed

    n, effect, se = 100, 0.05, 0.04
    reps = np.random.default_rng(0).normal(effect, se, 200_000)
    est = bootstrap_estimate(effect, reps, n, "bootstrap")
    sd = se * math.sqrt(n)
    beats = ((1.959964 + 0.841621) * sd / effect) ** 2  # 502
    same = (1.959964 * sd / (0.1 - effect)) ** 2  # 246
    assert models_needed(est, alpha=0.05, margin=0.1) == pytest.approx(min(beats, same),
                                                                      rel=0.03)
    assert models_needed(est, alpha=0.05, margin=0.01) == pytest.approx(beats, rel=0.03)


def test_verdict_text_names_the_measures():
    from genlab.core.stats import Estimate, judge

    def verdict(low, high, margin=0.1):
        est = Estimate((low + high) / 2, 10, "t", 0.0 if low > 0 or high < 0 else 1.0,
                       lambda level: (low, high))
        return verdict_text(judge(est, margin=margin), "a", "b")

    assert verdict(0.01, 0.3) == "a beats b"
    assert verdict(-0.3, -0.01) == "b beats a"
    assert verdict(-0.08, 0.1) == "no difference larger than 0.1"
    assert verdict(-0.08, 0.12) == "undecided"
    assert verdict(-0.15, 0.12, margin=0.2) == "no difference larger than 0.2"


def test_missing_values_leave_the_training_out_of_both_taus():
    records = grid_records(2, seed=6)
    records[0] = {**records[0], "weak": None}
    records[1] = {**records[1], "good": float("nan")}
    res = paired_tau_difference(records, "good", "weak", "gap", resamples=50)
    rest = records[2:]
    assert res["n"] == len(rest)
    assert res["difference"] == pytest.approx(
        kendall_tau(column(rest, "good"), column(rest, "gap"))
        - kendall_tau(column(rest, "weak"), column(rest, "gap")))


def test_bad_input():
    records = grid_records(1)
    with pytest.raises(ConfigError, match="lack 'nope'"):
        paired_tau_difference(records, "good", "nope", "gap")
    with pytest.raises(ConfigError, match="lack 'depth'"):
        paired_granulated_difference(records, "good", "weak", "gap", ["lr", "depth"])
    with pytest.raises(ConfigError, match="resamples"):
        paired_tau_difference(records, "good", "weak", "gap", resamples=0)
    with pytest.raises(ConfigError, match="level"):
        paired_tau_difference(records, "good", "weak", "gap", level=1.5)
    with pytest.raises(DataError, match="at least two"):
        paired_tau_difference(records[:1], "good", "weak", "gap")
    with pytest.raises(ConfigError, match="k must be"):
        conditional_mi(records, "good", "gap", AXES, k=4)


def test_conditional_mi_hand_computed():
    # Four trainings on two binary axes; the gap orders them A < B < C < D, the measure
    # A < C < B < D (only B and C swapped).
    #   name  lr  batch  gap  measure
    #   A     0   0      1    1
    #   B     0   1      2    3
    #   C     1   0      3    2
    #   D     1   1      4    4
    # Pairs: the 12 ordered pairs of distinct trainings, V = sgn of the difference.
    records = [{"lr": lr, "batch": b, "gap": g, "m": m}
               for lr, b, g, m in [(0, 0, 1, 1), (0, 1, 2, 3), (1, 0, 3, 2), (1, 1, 4, 4)]]
    # S = {} : 10 pairs agree, 2 (B,C and C,B) disagree; V_g is +-1 with 1/2 each:
    #   I = 1 - H(1/6) bits, H(V_g) = 1 bit, ratio 1 - H(1/6) = 0.3500.
    h = lambda p: -(p * math.log2(p) + (1 - p) * math.log2(1 - p))  # noqa: E731
    res0 = conditional_mi(records, "m", "gap", ["lr", "batch"], k=0)
    assert res0["K"] == pytest.approx(1 - h(1 / 6), abs=1e-12)
    assert res0["mi"] == pytest.approx(1 - h(1 / 6)) and res0["entropy"] == pytest.approx(1)
    # S = {lr}: U = (lr_i, lr_j).
    #   u = (0,0): pairs AB, BA: V_m = V_g, each sign 1/2   -> I = 1, H = 1 (p(u) = 2/12)
    #   u = (1,1): pairs CD, DC: same                       -> I = 1, H = 1 (2/12)
    #   u = (0,1): A,B against C,D: V_g always -1           -> I = 0, H = 0 (4/12)
    #   u = (1,0): V_g always +1                            -> I = 0, H = 0 (4/12)
    #   I = 4/12, H = 4/12: ratio 1.
    # S = {batch}: U = (batch_i, batch_j).
    #   u = (0,0): AC, CA agree                             -> I = 1, H = 1 (2/12)
    #   u = (1,1): BD, DB agree                             -> I = 1, H = 1 (2/12)
    #   u = (0,1): AB, AD, CB, CD: V_g = -,-,+,-, V_m all - -> I = 0, H = H(1/4) (4/12)
    #   u = (1,0): BA, BC, DA, DC: V_g = +,-,+,+, V_m all + -> I = 0, H = H(1/4) (4/12)
    #   I = 4/12, H = 4/12 + (8/12) H(1/4): ratio 1 / (1 + 2 H(1/4)) = 0.381307.
    res1 = conditional_mi(records, "m", "gap", ["lr", "batch"], k=1)
    ratios = {tuple(s["axes"]): s["ratio"] for s in res1["subsets"]}
    assert ratios[("lr",)] == pytest.approx(1.0, abs=1e-12)
    assert ratios[("batch",)] == pytest.approx(1 / (1 + 2 * h(1 / 4)), abs=1e-12)
    assert res1["K"] == pytest.approx(0.381307, abs=1e-6) and res1["axes"] == ["batch"]
    assert res1["mi"] == pytest.approx(4 / 12)
    # S = {lr, batch}: every pair is alone in its cell, the gap's order is fixed: no ratio.
    res2 = conditional_mi(records, "m", "gap", ["lr", "batch"], k=2)
    assert res2["K"] is None and res2["subsets"][0]["entropy"] == 0.0


def test_conditional_mi_extremes():
    records = grid_records(25, seed=8)  # 200 trainings
    # the gap itself (or any increasing function of it): ratio 1 under every conditioning
    for r in records:
        r["exp_gap"] = math.exp(r["gap"])
        r["lr_only"] = r["lr"]
    res = conditional_mi(records, "exp_gap", "gap", AXES)
    assert res["K"] == pytest.approx(1.0, abs=1e-12)
    assert all(s["ratio"] == pytest.approx(1.0) for s in res["subsets"])
    assert len(res["subsets"]) == 3  # {lr, batch}, {lr, width}, {batch, width}
    # an independent measure: about 0 (the plug-in estimate's small upward bias)
    assert conditional_mi(records, "indep", "gap", AXES)["K"] < 0.01
    # a measure that only repeats the learning rate: tau with the gap is positive, but given
    # the learning rates of the pair it says nothing more: K = 0 exactly, at an S with lr
    assert kendall_tau(column(records, "lr_only"), column(records, "gap")) > 0.15
    res = conditional_mi(records, "lr_only", "gap", AXES)
    assert res["K"] == 0.0 and "lr" in res["axes"]


def test_jackknife_matches_a_leave_one_out_loop():
    records = grid_records(2, seed=9, tie_levels=3)
    res = jackknife_tau_difference(records, "good", "weak", "gap")
    leaves = []
    for i in range(len(records)):
        rest = records[:i] + records[i + 1:]
        leaves.append(kendall_tau(column(rest, "good"), column(rest, "gap"))
                      - kendall_tau(column(rest, "weak"), column(rest, "gap")))
    n = len(leaves)
    expected = math.sqrt((n - 1) / n * sum((d - sum(leaves) / n) ** 2 for d in leaves))
    assert res["se"] == pytest.approx(expected, abs=1e-12)
    assert res["n"] == len(records)
    assert res["difference"] == pytest.approx(
        kendall_tau(column(records, "good"), column(records, "gap"))
        - kendall_tau(column(records, "weak"), column(records, "gap")))
    # the standard error shrinks about as 1/sqrt(n): 8 times the trainings, about a third
    many = jackknife_tau_difference(grid_records(16, seed=9), "good", "weak", "gap")
    assert 0.2 < many["se"] / res["se"] < 0.6


def test_correlate_counts_every_model_capped_ones_included(tmp_path, monkeypatch):
    """`optim correlate` under the stopping rule: no model is dropped. A model whose
    training cross-entropy (finish()'s, recorded as train_loss) is still at or above the
    stop loss after the cap is counted as capped and listed; the paired table's differences
    are the two taus' difference over every model."""
    from genlab.optim.measures.correlation import RANDOM_MEASURE, kendall_tau
    from genlab.optim.studies import correlate
    from genlab.optim.studies.correlate import CorrelateConfig, report, run_correlate
    from genlab.optim.training import train

    monkeypatch.setattr(train, "_plot_curves", lambda run: None)  # the figures: not tested
    monkeypatch.setattr(correlate, "_scatter", lambda *args: None)  # here
    cfg = CorrelateConfig(lrs=[0.02, 0.1], batch_sizes=[64], widths=[4], depths=[1],
                          optimizers=["sgd", "sam"], weight_decays=[0.0], epochs=2,
                          stop_loss=1.5, measure_samples=16, curvature_samples=8,
                          measure_iterations=2, measure_probes=2, resamples=50)
    before = os.times()
    summary = run_correlate(cfg, tmp_path / "c", progress_bar=False)
    spent = sum(os.times()[:4]) - sum(before[:4])  # user, system, children's: measured here
    assert 0 < summary["cpu_seconds_this_invocation"] <= spent
    recs = [r for r in summary["records"] if not r.get("diverged")]
    assert summary["models"] == len(recs) == summary["trainings"] - summary["diverged"] == 4
    capped = [r["key"] for r in recs if r["train_loss"] >= 1.5]  # by hand, from finish()
    assert 0 < len(capped) < 4  # this grid has both kinds
    assert summary["capped"] == len(capped)
    assert [r["key"] for r in summary["capped_models"]] == capped
    assert all(r["epochs_trained"] == 2 for r in summary["capped_models"])
    assert set(summary["paired"]) == {"gap_acc", "gap_loss"}
    rows = summary["paired"]["gap_acc"]
    assert {(r["a"], r["b"]) for r in rows} >= {("trace_sigma", "hessian_top_eigenvalue"),
                                                (RANDOM_MEASURE, "m_sharpness")}
    assert all(r["n"] == 4 for r in rows)  # every model, none dropped
    row = next(r for r in rows if (r["a"], r["b"]) == ("trace_sigma", "m_sharpness"))
    expected = (kendall_tau([r["trace_sigma"] for r in recs], [r["gap_acc"] for r in recs])
                - kendall_tau([r["m_sharpness"] for r in recs], [r["gap_acc"] for r in recs]))
    assert row["tau_diff"] == pytest.approx(expected)
    table = (tmp_path / "c" / "table.md").read_text()
    assert "tau(a) - tau(b)" in table and "capped at 2 epochs" in table
    printed = report(summary, cfg.resolved())
    assert any(isinstance(b, tuple) and b[0].startswith("tau(a) - tau(b)") for b in printed)
    assert any(isinstance(b, tuple) and b[0].startswith("models capped") for b in printed)
    if (tmp_path / "c" / "results.json").exists():  # a git checkout: the results file
        from genlab.core.results.files import load_result
        written = load_result(tmp_path / "c" / "results.json")
        assert written.command.startswith("genlab optim correlate --out ")
        assert written.figures["mlp_msharp"]["effect"] == pytest.approx(expected)
        assert written.figures["mlp_msharp"]["n"] == 4
        assert written.figures["converged"] == f"MLP {4 - len(capped)} of 4"
