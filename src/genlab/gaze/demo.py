"""The MoEGaze section of `genlab demo`: baseline vs MoEGaze in the appearance world.

Task E->M of the appearance-routing world (app-e -> app-m, where eye clusters that are
rare in the source are common in the target), a few seeds per model, every run paired
by seed. The report shows the constant predictor, both models on held-out source
subjects and on the target, the seed-paired difference with its 95% bootstrap interval and
its verdict through genlab.core.stats (the gaze bench's test: a paired t over seeds of each
seed's image-weighted mean error, Holm over the table's two rows), arrows on target images
and the training curves. Finished runs are reused.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from genlab.core.report import Report
from genlab.core.stats import Verdict
from genlab.core.stats.family import BETTER, NOT_TESTABLE, UNDECIDED, WORSE
from genlab.core.sweep import RunSpec
from genlab.gaze.protocol import WORLDS, SyntheticCache
from genlab.gaze.studies.runs import run_study, train_spec
from genlab.gaze.studies.stats import Cell, Draws, cell_summary, fmt_ci, paired
from genlab.gaze.studies.tables import TEST, estimate, family, verdict_record, verdict_text
from genlab.gaze.train import GazeTrainConfig

CURVE_POINTS = 10  # held-out evaluations per run: the points of loss_curves.png
#: the table's verdict column: MoEGaze - baseline judged through genlab.core.stats
VERDICT = f"verdict (paired {TEST} over seeds, Holm over the 2 rows)"
ONE_SEED = "one seed: a paired test over seeds needs two"
#: what each verdict class says of MoEGaze's error against the baseline's
WORDS = {BETTER: "lower here", WORSE: "higher here: at this budget it does not beat it",
         UNDECIDED: "undecided"}


def demo_specs(out_dir: Path, quick: bool) -> list[RunSpec]:
    source, target = WORLDS.get("appearance")["E->M"]
    steps = 150 if quick else 300
    base = GazeTrainConfig(source=source, targets=[target], steps=steps,
                           eval_every=max(1, steps // CURVE_POINTS),
                           train_count=2000 if quick else 3000,
                           test_count=600 if quick else 1000)
    cache = SyntheticCache(out_dir / "data")
    return [train_spec(f"{model}_s{seed}", replace(base, model=model, seed=seed),
                       out_dir / f"{model}_s{seed}", cache=cache)
            for seed in range(3 if quick else 5) for model in ("baseline", "moegaze")]


def verdicts(pairs: dict[str, tuple[Cell, Cell]]) -> dict[str, Verdict | None]:
    """MoEGaze - baseline per row (``pairs``: row -> (baseline, MoEGaze) cells), paired by
    seed: each seed's image-weighted mean error over the row's subjects, a paired t test,
    Holm over the rows, lower error better (genlab.gaze.studies.tables.family, the gaze
    bench's); a row with one seed is "not testable"."""
    estimates = {k: estimate(b, m) for k, (b, m) in pairs.items()}
    return family(estimates, {k: ONE_SEED for k, e in estimates.items() if e is None})


def _versus(diff: float, v: Verdict | None) -> str:
    """One row's seed-paired MoEGaze - baseline difference, in words, and its verdict."""
    d = round(diff, 2)
    where = (f"{-d:.2f} deg below the baseline's" if d < 0 else
             f"{d:.2f} deg above the baseline's" if d > 0 else
             "equal to the baseline's to 0.01 deg")
    if v is None:
        return f"{where} (no verdict)"
    if v.kind == NOT_TESTABLE:
        return f"{where}; {v.line()}"
    detail = v.line().removesuffix(v.label).rstrip()  # the class is said in words
    return f"{where}: {WORDS.get(v.kind, v.label)} ({detail})"


def reading(numbers: list[dict], quick: bool = True) -> str:
    """The table's reading: per row, MoEGaze against the baseline, then the constant row.

    ``numbers`` holds per row "label", "constant", "baseline", "moegaze", "diff" (the
    figures the table prints) and "verdict" (MoEGaze - baseline's Verdict, or None).
    """
    run = "In this quick run" if quick else "In this run"
    parts = [f"on {n['label']} MoEGaze's error is {_versus(n['diff'], n['verdict'])}"
             for n in numbers]
    text = f"{run} " + "; ".join(parts) + "."
    above = [n["label"] for n in numbers
             if max(n["baseline"], n["moegaze"]) >= n["constant"]]
    if above:
        text += (" Not below the constant predictor (the source mean) on: "
                 + ", ".join(above) + ".")
    else:
        worst = min(n["constant"] - max(n["baseline"], n["moegaze"]) for n in numbers)
        text += (f" Both models are at least {worst:.2f} deg below the constant predictor "
                 "on every row.")
    return text


def demo_section(out_dir: Path, report: Report, *, quick: bool = True) -> dict:
    """Train the demo's runs (or reuse them) and add table and figures to ``report``."""
    out_dir = Path(out_dir)
    specs = demo_specs(out_dir, quick)
    results = run_study(specs, description="gaze demo")
    target = specs[0].config.targets[0]

    def cell(model: str, where: str, what: str = "model") -> Cell:
        per = []
        for s in specs:
            if s.config.model == model:
                res = results[s.name]["val"] if where == "val" else results[s.name][
                    "targets"][where]
                per.append((res["constant"] if what == "constant" else res)["per_subject"])
        return Cell.from_runs(per, f"demo {model} on {where}")

    rows, diffs, numbers = [], {}, []
    wheres = (("val", "held-out source subjects"), (target, f"target {target}"))
    cells = {where: (cell("baseline", where), cell("moegaze", where)) for where, _ in wheres}
    judged = verdicts(cells)
    for where, label in wheres:
        (b, m), c = cells[where], cell("baseline", where, "constant")
        draws = Draws.make(*b.m.shape, n_boot=2000)
        d = paired(b, m, draws)
        diffs[where] = {k: v for k, v in d.items() if k != "replicates_rel"}
        rows.append({
            "tested on": label,
            "constant (source mean)": fmt_ci(c.value, cell_summary(c, draws)["ci"]),
            "baseline": fmt_ci(b.value, cell_summary(b, draws)["ci"]),
            "MoEGaze": fmt_ci(m.value, cell_summary(m, draws)["ci"]),
            "MoEGaze - baseline": fmt_ci(d["diff"], d["diff_ci"], sign=True),
            VERDICT: verdict_text(judged[where]),
        })
        numbers.append({"label": label, "constant": c.value, "baseline": b.value,
                        "moegaze": m.value, "diff": d["diff"], "diff_ci": d["diff_ci"],
                        "verdict": judged[where]})
    seeds = len(specs) // 2
    rel = lambda p: os.path.relpath(p, out_dir.parent)  # noqa: E731
    report.heading(f"Gaze error of the baseline and MoEGaze, trained on {specs[0].config.source}, "
                   f"tested on held-out source subjects and on {target}: "
                   f"{'one seed' if seeds == 1 else f'{seeds} seeds'}, "
                   f"{specs[0].config.steps} steps per run")
    report.text(
        f"Task E->M of the appearance world: train on {specs[0].config.source} (eye clusters "
        f"mixed 55/25/15/5%), test on held-out source subjects and on {target} (10/20/30/40%); "
        "each cluster has its own kappa and iris gain. Mean angular error in degrees over "
        f"{seeds} seeds [95% bootstrap interval over seeds and subjects]; the difference is "
        f"paired by seed. {specs[0].config.steps} steps per run. MoEGaze's router, experts "
        "and losses are our reconstruction of the AAAI-26 abstract. Full tables: "
        "`genlab gaze bench --out runs/gaze_bench`."
    )
    report.table(rows)
    report.reading(reading(numbers, quick))
    moe = out_dir / "moegaze_s0"
    report.image(rel(moe / "gaze_arrows.png"),
                 f"MoEGaze on {target}: labels green, predictions red")
    report.image(rel(moe / "loss_curves.png"), "training losses and held-out source error")
    report.image(rel(moe / "router_assignment.png"), "share of images per expert")
    return {"rows": rows, "paired": diffs, "numbers": numbers,
            "verdicts": {k: verdict_record(v) for k, v in judged.items()}}
