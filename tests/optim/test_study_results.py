"""The optim studies' results files (results.json): each loads, and every region of the
pages that cites the recovered file it replaces (docs/results/optim_*.json) renders from it
with the run's per-seed figures. The studies' summaries are made up from the recovered
files' rows (no training runs)."""

from __future__ import annotations

import json
import re
import statistics

import pytest
from results_regions import RESULTS, regions_citing, render_citing

from genlab.core.results import files as results_files
from genlab.optim.studies import results as study_results
from genlab.optim.studies.labelnoise import LabelNoiseConfig
from genlab.optim.studies.results import ROW_NAMES, write_study_results
from genlab.optim.studies.sensitivity import SensitivityConfig
from genlab.optim.studies.standard import StandardConfig
from genlab.optim.studies.synthetic.sparse import SparseConfig
from genlab.optim.studies.synthetic.toy import ToyConfig
from genlab.optim.studies.transfer import TransferConfig

OPTIMIZER = {row: name for name, row in ROW_NAMES.items()}


def recovered(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def made_up_seeds(metric: str, name: str, seeds) -> dict:
    """{optimiser: {seed: value}}: each committed row's mean (recovered, or over a rerun's
    seeds) moved by (seed - 1) / 7, so that the per-seed figures differ from one another and
    from the committed means."""
    data = recovered(name)
    if metric in data.get("summaries", {}):
        means = {row: mean for row, (mean, _, _) in data["summaries"][metric].items()}
    else:  # a rerun replaced the recovered file: its per-seed values
        means = {row: statistics.fmean(v.values()) for row, v in data["values"][metric].items()}
    return {OPTIMIZER.get(row, row): {s: mean + (s - 1) / 7 for s in seeds}
            for row, mean in means.items()}


def standard_summary(cfg):
    return {"tables": [{"arch": m, "per_seed": made_up_seeds(m, "optim_standard", cfg.seeds)}
                       for m in ("transformer", "cnn")]}


def labelnoise_summary(cfg):
    return {"settings": ["sym 60%"],
            "per_seed": {"sym 60%": made_up_seeds("sym60", "optim_labelnoise", cfg.seeds)}}


def transfer_summary(cfg):
    return {"per_seed": made_up_seeds("test", "optim_transfer", cfg.seeds)}


def sensitivity_summary(cfg):
    rows = recovered("optim_sensitivity")["summaries"]["worst_transformer"]
    names = {"SGD (the 3 shared lr)": "sgd (the 3 shared learning rates)"}
    return {"rows": [{"optimizer": names.get(r, OPTIMIZER.get(r, r)), "worst": mean + 0.3}
                     for r, (mean, _, _) in rows.items()],
            "spread_per_seed": {"sgd": {s: 1.0 + s for s in cfg.seeds}}}


def sparse_summary(cfg):
    l1 = made_up_seeds("l1", "optim_sparse", cfg.seeds)
    return {"beta_l1_per_seed": l1,
            "table": [{"optimizer": o, "test_loss": 0.01, "test_loss_std": 0.001,
                       "seeds": len(cfg.seeds)} for o in l1]}


def toy_summary(cfg):
    return {"sgd_leave_iterations": [None if s == 3 else 100 + s for s in cfg.seeds],
            "gd_left": False}


STUDIES = {
    "standard": (StandardConfig, standard_summary, "optim_standard"),
    "labelnoise": (LabelNoiseConfig, labelnoise_summary, "optim_labelnoise"),
    "transfer": (TransferConfig, transfer_summary, "optim_transfer"),
    "sensitivity": (SensitivityConfig, sensitivity_summary, "optim_sensitivity"),
    "sparse": (SparseConfig, sparse_summary, "optim_sparse"),
    "toy": (ToyConfig, toy_summary, "optim_toy"),
}


def written_file(study: str, tmp_path):
    config, summary_of, name = STUDIES[study]
    cfg = config()
    summary = summary_of(cfg)
    data = getattr(study_results, f"{study}_results")(summary, cfg)
    path = write_study_results(f"genlab optim {study}", cfg, tmp_path / "run", data)
    return cfg, summary, name, path


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_study_results_replace_recovered_file(study, tmp_path):
    cfg, summary, name, path = written_file(study, tmp_path)
    assert path == tmp_path / "run" / "results.json"
    rendered = render_citing(path, name, tmp_path)
    values = rendered[name.replace("_", "-")]
    assert f"`genlab optim {study} --out {tmp_path / 'run'}` at commit" in values
    assert "recovered" not in values
    if study == "toy":  # 19 of 20 seeds left the nonuniform minimum
        assert "left_nonuniform | successes 19, trials 20" in values
        assert "19 of 20" in rendered["claims"]
        return
    spec = regions_citing(name)[0][name.replace("_", "-")].get("digits", {})
    if study == "sensitivity":  # the worst cell: a mean over seeds, as the study has it
        digits = spec.get("worst_transformer", 2)
        for row in summary["rows"]:
            assert f"{row['worst']:.{digits}f} (n=3)" in values
        return
    per_seed = (summary["tables"][0]["per_seed"] if study == "standard" else
                summary["per_seed"]["sym 60%"] if study == "labelnoise" else
                summary.get("per_seed") or summary["beta_l1_per_seed"])
    metric = {"standard": "transformer", "labelnoise": "sym60", "transfer": "test",
              "sparse": "l1"}[study]
    digits = spec.get(metric, 2)
    for seeds in per_seed.values():  # every row's per-seed figures, in seed order
        line = ", ".join(f"{seeds[s]:.{digits}f}" for s in sorted(seeds))
        assert line in values, (line, values)
    claims = rendered["claims"]
    assert not re.search(r"no values of row|no results file", claims)


def test_transfer_pairs_finetuning_and_scratch_by_seed(tmp_path):
    _, summary, _, path = written_file("transfer", tmp_path)
    sgd, scratch = summary["per_seed"]["sgd"], summary["per_seed"]["scratch"]
    paired = results_files.load_result(path).seeds("finetune_minus_scratch", "SGD")
    assert paired == {str(s): pytest.approx(sgd[s] - scratch[s]) for s in sgd}


def test_no_results_file_outside_a_git_checkout(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(results_files, "current_commit", lambda where=None: None)
    *_, path = written_file("toy", tmp_path)
    assert path is None and not (tmp_path / "run" / "results.json").exists()
    assert "not run from a git checkout" in capsys.readouterr().out


def made_up_intervals(name: str, shift: float) -> dict:
    """The recovered file's recorded intervals, each moved by ``shift``."""
    return {k: {**v, "effect": v["effect"] + shift, "low": v["low"] + shift,
                "high": v["high"] + shift}
            for k, v in recovered(name)["figures"].items() if isinstance(v, dict)}


def test_depthwidth_results_replace_recovered_file(tmp_path):
    """Each tau of the study's tables (its interval as the table prints it) becomes the
    figure {arch}_{measure}_{depth|width|gap}."""
    from genlab.optim.studies.depthwidth import DepthWidthConfig
    from genlab.optim.studies.results import SHORT, TAU_KEYS, depthwidth_results

    figures = made_up_intervals("optim_depth_width", 0.01)
    measure = {short: m for m, short in SHORT.items()}
    column = {suffix: name for name, suffix in TAU_KEYS.items()}
    results = {}
    for key, fig in figures.items():
        arch, short, suffix = key.split("_", 2)
        res = results.setdefault(arch, {"trainings": fig["n"] + 2, "diverged": 2, "taus": {}})
        row = res["taus"].setdefault(short, {"measure": measure[short]})
        row[f"tau_{column[suffix]}"] = fig["effect"]
        row[f"tau_{column[suffix]}_interval"] = f"[{fig['low']:.2f}, {fig['high']:.2f}]"
    for res in results.values():
        res["taus"] = list(res["taus"].values())
    cfg = DepthWidthConfig()
    path = write_study_results("genlab optim depth-width", cfg, tmp_path / "run",
                               depthwidth_results({"results": results}, cfg))
    written = results_files.load_result(path).figures
    assert written == {k: {**v, "effect": pytest.approx(v["effect"]),
                           "low": pytest.approx(v["low"]), "high": pytest.approx(v["high"])}
                       for k, v in figures.items()}
    rendered = render_citing(path, "optim_depth_width", tmp_path)
    fig = figures["mlp_trsigma_depth"]
    assert f"{fig['effect']:+.2f} [{fig['low']:+.2f}, {fig['high']:+.2f}]" in rendered["claims"]


def test_correlate_runs_merge_into_the_recovered_files_place(tmp_path):
    """One run per architecture, merged with ``python -m genlab.core.results --merge``:
    every figure of the committed file (the claims cite them), with the runs' numbers."""
    from genlab.core.results.pages import main
    from genlab.optim.studies.correlate import CorrelateConfig
    from genlab.optim.studies.results import ARCH_KEYS, SHORT, arch_words, correlate_results

    committed = recovered("optim_correlate")["figures"]
    figures = made_up_intervals("optim_correlate", -0.01)
    measure = {short: m for m, short in SHORT.items()}
    first = {"": "trace_sigma", "s_": "curvature_nonuniformity", "random_": "random_sanity"}
    paths, expected = [], []
    for arch, key in ARCH_KEYS.items():
        rows = []
        for a, name in first.items():
            for b in ("lmax", "trh", "msharp", "avg"):
                plain, gran = figures[f"{key}_{a}{b}"], figures[f"{key}_g_{a}{b}"]
                rows.append({"a": name, "b": measure[b], "n": plain["n"],
                             "tau_diff": plain["effect"], "tau_lo_plain": plain["low"],
                             "tau_hi_plain": plain["high"], "granulated_diff": gran["effect"],
                             "granulated_lo_plain": gran["low"],
                             "granulated_hi_plain": gran["high"],
                             "cmi_a": committed[f"{key}_K_{SHORT[name]}"],
                             "cmi_b": committed[f"{key}_K_{b}"]})
        n = rows[0]["n"]
        summary = {"arch": arch, "models": n, "capped": 5, "trainings": n + 9,
                   "paired": {"gap_acc": rows}}
        expected.append(f"{arch_words(arch)} {n - 5} of {n + 9}")
        cfg = CorrelateConfig(arch=arch)
        paths.append(write_study_results("genlab optim correlate", cfg, tmp_path / arch,
                                         correlate_results(summary, cfg)))
    merged = tmp_path / "merged.json"
    assert main(["--merge", str(merged), "--title", "tau differences", "--",
                 *map(str, paths)]) == 0
    written = results_files.load_result(merged)
    assert written.command.count("genlab optim correlate") == 3
    assert set(written.figures) == set(committed)
    assert written.figures["converged"] == ", ".join(expected)
    assert {k: v for k, v in written.figures.items() if isinstance(v, dict)} == figures
    rendered = render_citing(merged, "optim_correlate", tmp_path)
    fig = figures["tf_g_random_lmax"]
    assert f"{fig['effect']:+.2f} [{fig['low']:+.2f}, {fig['high']:+.2f}]" in rendered["claims"]
    assert expected[0] in rendered["claims"]


def test_correlate_results_record_the_granulated_difference_and_k():
    """The primary result (granulated tau) and K reach the results file under their keys,
    with the row's own numbers; a row without an uncorrected interval records no figure."""
    from genlab.optim.studies.correlate import CorrelateConfig
    from genlab.optim.studies.results import correlate_results

    row = {"a": "trace_sigma", "b": "hessian_trace", "n": 140, "tau_diff": 0.05,
           "tau_lo_plain": -0.01, "tau_hi_plain": 0.11, "granulated_diff": 0.12,
           "granulated_lo_plain": 0.02, "granulated_hi_plain": 0.22, "cmi_a": 0.031,
           "cmi_b": 0.0123456}
    bare = {"a": "random_sanity", "b": "m_sharpness", "n": 140, "tau_diff": 0.0,
            "granulated_diff": 0.0, "cmi_a": None, "cmi_b": 0.2}
    summary = {"arch": "transformer", "models": 144, "capped": 4, "trainings": 144,
               "paired": {"gap_acc": [row, bare]}}
    figures = correlate_results(summary, CorrelateConfig(arch="transformer"))["figures"]
    assert figures["tf_g_trh"] == {"effect": 0.12, "low": 0.02, "high": 0.22, "n": 140,
                                   "test": "paired bootstrap over models"}
    assert figures["tf_trh"]["effect"] == 0.05
    assert (figures["tf_K_trsigma"], figures["tf_K_trh"], figures["tf_K_msharp"]) == (
        0.031, 0.0123, 0.2)
    assert not any(k.startswith(("tf_random", "tf_g_random")) for k in figures)
    assert figures["converged"] == "Transformer 140 of 144"


def test_merge_refuses_files_of_two_commits(tmp_path):
    for i, commit in enumerate(("abc1234", "def5678")):
        results_files.write_result(tmp_path / f"{i}.json", {
            "title": "t", "command": f"c{i}", "commit": commit, "figures": {f"k{i}": 1}})
    with pytest.raises(results_files.DataError, match="commits abc1234, def5678"):
        results_files.merge_results([tmp_path / "0.json", tmp_path / "1.json"],
                                    tmp_path / "m.json", title="t")
