"""The optim studies' results files: each study's figures as results.json in its run folder,
in the layout (file metrics, rows, seeds, figures) of its file of docs/results
(genlab.core.results.files), so that a rerun's file, copied over the recovered one
(docs/results/optim_NAME.json), regenerates the claims that cite it.

Rows carry the names the pages use (``ROW_NAMES``: ``csam`` -> ``CSAM (K-FAC)``); per-seed
values wherever the study keeps them (summary.json's ``per_seed``), else the figure as the
study computes it (the sensitivity's worst cell is a mean over seeds: a summary without its
seeds, as in the recovered file). Each ``*_results`` function maps a study's summary (and
config) to the file's content; :func:`write_study_results` writes it.
"""

from __future__ import annotations

import math
from pathlib import Path

from genlab.core.options import command_line
from genlab.core.results.files import NO_CHECKOUT, write_run_results

#: an optimiser's registry name -> its row in the pages' tables
ROW_NAMES = {"sgd": "SGD", "sam": "SAM", "asam": "ASAM", "cov": "COV",
             "csam_identity": "CSAM_Identity", "acsam_identity": "ACSAM_Identity",
             "csam": "CSAM (K-FAC)", "samgcm": "SAMGCM", "scratch": "SGD from scratch"}


def row_name(name: str) -> str:
    return ROW_NAMES.get(name, name)


def seed_values(per_seed: dict) -> dict:
    """{optimiser: {seed: value}} -> {row: {"seed": value}} (rows renamed, seeds as strings,
    optimisers with no finite value left out)."""
    return {row_name(o): {str(s): float(v) for s, v in seeds.items()}
            for o, seeds in per_seed.items() if seeds}


def arch_words(arch: str) -> str:
    """mlp -> MLP, transformer -> Transformer (as the pages write them)."""
    return arch.upper() if arch in ("mlp", "cnn") else arch.capitalize()


def standard_results(summary: dict, cfg) -> dict:
    """`optim standard`: test accuracy per architecture (metric = the architecture)."""
    return {"title": "Standard training, every optimiser tuned alike: clean test accuracy "
                     f"(%), seeds {', '.join(map(str, cfg.seeds))}",
            "metrics": {t["arch"]: f"{arch_words(t['arch'])} test accuracy (%)"
                        for t in summary["tables"]},
            "values": {t["arch"]: seed_values(t["per_seed"]) for t in summary["tables"]}}


def setting_metric(setting: str) -> str:
    """A label-noise setting (``sym 60%``) -> its metric (``sym60``)."""
    return setting.replace(" ", "").removesuffix("%")


def labelnoise_results(summary: dict, cfg) -> dict:
    """`optim labelnoise`: clean test accuracy per noise setting (metric ``sym60``, ...)."""
    per_seed = summary["per_seed"]
    return {"title": f"Label noise on digits ({cfg.arch.upper()}): clean test accuracy (%), "
                     f"seeds {', '.join(map(str, cfg.seeds))}",
            "metrics": {setting_metric(s): f"clean test accuracy (%) after training with "
                                           f"{s.split()[1]} "
                                           f"{'symmetric' if s.startswith('sym') else 'asymmetric'}"
                                           " label noise" for s in summary["settings"]},
            "values": {setting_metric(s): seed_values(per_seed[s])
                       for s in summary["settings"]}}


def transfer_results(summary: dict, cfg) -> dict:
    """`optim transfer`: target test accuracy, and fine-tuned SGD minus SGD from scratch
    paired by seed (the sanity criterion)."""
    per_seed = summary["per_seed"]
    sgd, scratch = per_seed.get("sgd", {}), per_seed.get("scratch", {})
    paired = {str(s): float(sgd[s]) - float(scratch[s]) for s in sgd if s in scratch}
    values = {"test": seed_values(per_seed)}
    if paired:
        values["finetune_minus_scratch"] = {"SGD": paired}
    return {"title": "Transfer learning: target test accuracy (%), seeds "
                     f"{', '.join(map(str, cfg.seeds))}",
            "metrics": {"test": "target test accuracy (%)",
                        "finetune_minus_scratch": "fine-tuned SGD minus SGD from scratch, "
                        "target test accuracy (points), paired by seed (the sanity "
                        "criterion)"},
            "values": values}


def sensitivity_results(summary: dict, cfg) -> dict:
    """`optim sensitivity`: each optimiser's worst grid cell (the grid's cells are means
    over the seeds, so the figure has no seeds of its own: a summary with n the seeds); its
    per-seed spread (best minus worst) as values."""
    metric = f"worst_{cfg.arch}"
    worst = {}
    for r in summary["rows"]:
        name = r["optimizer"]
        if name.startswith("sgd (the 3 shared"):
            name = "SGD (the 3 shared lr)"
        worst[row_name(name)] = [float(r["worst"]), None, len(cfg.seeds)]
    return {"title": f"Hyper-parameter sensitivity: the worst cell of each optimiser's grid "
                     f"({cfg.arch}), test accuracy (%), mean over seeds "
                     f"{', '.join(map(str, cfg.seeds))}",
            "metrics": {metric: f"the {cfg.arch}'s worst grid cell, test accuracy (%), mean "
                                "over the seeds",
                        "spread": "best minus worst grid cell of each seed (points)"},
            "summaries": {metric: worst},
            "values": {"spread": seed_values(summary.get("spread_per_seed", {}))}}


def sparse_results(summary: dict, cfg) -> dict:
    """`optim sparse`: ‖beta‖₁ per seed (diverged runs left out); the test loss as mean ±
    std (the study keeps no per-seed test loss in its summary)."""
    summaries = {"test_loss": {row_name(r["optimizer"]): [r["test_loss"],
                                                          r.get("test_loss_std"), r["seeds"]]
                               for r in summary["table"]}}
    return {"title": "Sparse regression (diagonal net): ‖beta‖₁ and test loss, seeds "
                     f"{', '.join(map(str, cfg.seeds))}",
            "metrics": {"l1": "‖beta‖₁ of the solution", "test_loss": "test loss"},
            "values": {"l1": seed_values(summary["beta_l1_per_seed"])},
            "summaries": summaries}


def toy_results(summary: dict, cfg) -> dict:
    """`optim toy`: how many SGD seeds left the nonuniform minimum (GD's run beside)."""
    leaves = summary["sgd_leave_iterations"]
    return {"title": "The 1-D toy: SGD against GD at two minima of equal sharpness",
            "figures": {"left_nonuniform": {"successes": sum(x is not None for x in leaves),
                                            "trials": len(leaves)},
                        "gd_left": bool(summary["gd_left"])}}


#: a measure -> its short name in the results files' keys
SHORT = {"trace_sigma": "trsigma", "curvature_nonuniformity": "s",
         "hessian_top_eigenvalue": "lmax", "hessian_trace": "trh", "m_sharpness": "msharp",
         "average_sharpness": "avg", "random_sanity": "random"}
#: depth-width's tau columns -> the key's last part (the gap: the accuracy gap)
TAU_KEYS = {"depth": "depth", "width": "width", "gap_acc": "gap", "gap_loss": "gap_loss"}


def interval_of(text: str) -> tuple[float, float] | None:
    """'[-0.71, -0.39]' (a tau table's interval, as the study prints it) -> (low, high);
    None where either end is not a finite number."""
    try:
        low, high = (float(x) for x in text.strip("[]").split(","))
    except (AttributeError, ValueError):
        return None
    return (low, high) if math.isfinite(low) and math.isfinite(high) else None


def depthwidth_results(summary: dict, cfg) -> dict:
    """`optim depth-width`: each measure's Kendall tau with depth, width and the gaps, with
    its 95 % bootstrap interval over the models ({arch}_{measure}_{depth|width|gap|gap_loss};
    the interval's ends as the study's table prints them, to 2 decimals)."""
    figures = {}
    for arch, res in summary["results"].items():
        n = res["trainings"] - res["diverged"]
        for row in res["taus"]:
            short = SHORT.get(row["measure"], row["measure"])
            for name, suffix in TAU_KEYS.items():
                bounds = interval_of(row.get(f"tau_{name}_interval"))
                tau = row.get(f"tau_{name}")
                if bounds is None or tau is None or not math.isfinite(tau):
                    continue
                figures[f"{arch}_{short}_{suffix}"] = {
                    "effect": round(float(tau), 4), "low": bounds[0], "high": bounds[1],
                    "n": n, "test": "bootstrap over models"}
    return {"title": "Depth and width against the measures, and the measures against the gap "
                     "(Kendall tau, 95 % bootstrap intervals over the models)",
            "figures": figures}


#: an architecture -> its prefix in the correlation file's keys
ARCH_KEYS = {"mlp": "mlp", "cnn": "cnn", "transformer": "tf"}


def correlate_results(summary: dict, cfg) -> dict:
    """`optim correlate` (one architecture): tau(a) - tau(b) against the accuracy gap,
    paired over the models, with its uncorrected 95 % interval: the granulated tau (the
    primary result) as ``{arch}_g_{b}``, the plain tau as ``{arch}_{b}``, for a = tr Sigma;
    the curvature nonuniformity's and the random measure's rows carry ``s_`` and ``random_``
    before ``b`` (b: lmax, trh, msharp, avg). ``{arch}_K_{measure}``: Jiang et al.'s K of each
    measure of those rows. ``converged``: the models that reached the stopping loss (all
    models without the rule) of the trainings, ``models``: those counted (every one that did
    not diverge). The three architectures' files are merged into one with
    ``python -m genlab.core.results --merge``."""
    arch, key = summary["arch"], ARCH_KEYS.get(summary["arch"], summary["arch"])
    words = arch_words(arch)
    figures: dict = {
        "converged": f"{words} {summary['models'] - summary['capped']} of "
                     f"{summary['trainings']}",
        "models": f"{words} {summary['models']} of {summary['trainings']}"}
    first = {"trace_sigma": "", "curvature_nonuniformity": "s_", "random_sanity": "random_"}
    for row in summary["paired"].get("gap_acc", []):
        if row["a"] not in first or row["b"] not in SHORT:
            continue
        name = f"{first[row['a']]}{SHORT[row['b']]}"
        for prefix, kind in (("", "tau"), ("g_", "granulated")):
            if f"{kind}_lo_plain" in row:
                figures[f"{key}_{prefix}{name}"] = {
                    "effect": row[f"{kind}_diff"], "low": row[f"{kind}_lo_plain"],
                    "high": row[f"{kind}_hi_plain"], "n": row["n"],
                    "test": "paired bootstrap over models"}
        for measure, k in ((row["a"], row.get("cmi_a")), (row["b"], row.get("cmi_b"))):
            if k is not None:
                figures[f"{key}_K_{SHORT[measure]}"] = round(float(k), 4)
    return {"title": "tau(tr Sigma) - tau(sharpness measure) against the accuracy gap, "
                     "granulated (g_) and plain (95 % paired bootstrap intervals over the "
                     "models), and each measure's K",
            "figures": figures}


def write_study_results(command: str, cfg, out: str | Path, data: dict) -> Path | None:
    """Write ``data`` (a ``*_results`` function's) as out/results.json with ``command``'s
    line for ``cfg``; print where, or that no file was written outside a git checkout."""
    written = write_run_results(out, {**data, "command": command_line(command, cfg, out)})
    print(f"results file: {written}" if written else NO_CHECKOUT)
    return written
