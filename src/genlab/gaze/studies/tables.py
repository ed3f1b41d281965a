"""Tables and the summary plot of the gaze bench (see genlab.gaze.studies.bench).

Per world: the main table (every task: constant predictor = source training mean, the
target-trained reference, baseline and MoEGaze at 100% and 10% of the source data, the
seed-paired differences with 95% bootstrap intervals), the held-out source table with
the oracle gate, per-cluster errors and the router's selectivity for the true cluster,
and the average relative reduction over the world's tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from genlab.core.options import seed_text
from genlab.core.report import figure, markdown_table
from genlab.core.stats import Estimate, Verdict, holm, judge, not_testable, paired_difference
from genlab.core.stats.family import BETTER
from genlab.gaze.protocol import WORLDS
from genlab.gaze.studies.sizing import Pilot, pilot_of
from genlab.gaze.studies.stats import Cell, Draws, cell_summary, fmt_ci, interval, paired

PAPER_REDUCTION_PCT = 27.6
#: the paired test of every verdict (over seeds, of the per-seed image-weighted mean
#: difference): the test whose power genlab.gaze.studies.sizing computes
TEST = "t"
NO_GATE = "the oracle gate does not clear 0 in this world"


def seed_values(cell: Cell) -> list[float]:
    """Each seed's image-weighted mean error over the cell's subjects."""
    return (cell.m @ cell.n / cell.n.sum()).tolist()


def by_seed(runs: Sequence[BenchRun], cell: Cell | None) -> dict[str, float] | None:
    """{seed: the seed's mean error} of a cell made from ``runs`` (in seed order)."""
    if cell is None:
        return None
    return dict(zip((str(r.seed) for r in runs), seed_values(cell), strict=True))


def estimate(a: Cell | None, b: Cell | None) -> Estimate | None:
    """b - a paired by seed (each seed's mean over the same subjects), or None without
    two seeds of both."""
    if a is None or b is None or a.m.shape != b.m.shape or a.m.shape[0] < 2:
        return None
    return paired_difference(seed_values(b), seed_values(a), test=TEST)


def family(estimates: dict[str, Estimate | None], untestable: dict[str, str] | None = None
           ) -> dict[str, Verdict | None]:
    """Verdicts of a table's family (lower error is better): Holm over the members that can
    be judged; ``untestable`` {member: reason} are "not testable", missing ones None."""
    untestable = untestable or {}
    out: dict[str, Verdict | None] = {k: None for k in estimates}
    for k, reason in untestable.items():
        if k in out:
            out[k] = not_testable(reason, test=f"paired {TEST}")
    judged = {k: e for k, e in estimates.items() if e is not None and k not in untestable}
    if len(judged) == 1:
        (k, e), = judged.items()
        out[k] = judge(e, higher_is_better=False)
    elif judged:
        out |= dict(zip(judged, holm(list(judged.values()), higher_is_better=False),
                        strict=True))
    return out


def verdict_text(v: Verdict | None) -> str:
    return "-" if v is None else v.line()


def verdict_record(v: Verdict | None) -> dict | None:
    """A verdict as the JSON and results files hold it (a recorded interval)."""
    if v is None:
        return None
    if v.kind == "not testable":
        return {"kind": v.kind, "reason": v.reason}
    return {"effect": v.effect, "low": v.low, "high": v.high, "n": v.n,
            "test": f"{v.test}, {v.correction}" if v.correction else v.test,
            "p": v.p, "p_corrected": v.p_corrected, "kind": v.kind}


def room_pct(baseline: float | None, reference: float | None) -> float | None:
    """A world's room: (baseline - trained-on-target) in % of the baseline."""
    if baseline is None or reference is None:
        return None
    return 100.0 * (baseline - reference) / baseline


def room_text(room: float | None) -> str:
    if room is None:
        return "-"
    short = room < PAPER_REDUCTION_PCT
    return f"{room:.1f}" + (" (not testable in this world)" if short else "")


@dataclass
class BenchRun:
    """One finished bench run and what it was (parsed from its spec name)."""

    world: str
    source: str
    kind: str  # baseline, moegaze, oracle or reference
    fraction: float
    seed: int
    summary: dict
    share: str = "images"  # what ``fraction`` keeps: images (every subject) or subjects


def parse_runs(specs, results: dict[str, dict]) -> list[BenchRun]:
    """Bench runs from spec names ``world__source__kind__f<fraction>__s<seed>`` (a share
    of the images) or ``...__p<fraction>__...`` (a share of the subjects, "people")."""
    runs = []
    for spec in specs:
        world, source, kind, frac, seed = spec.name.split("__")
        runs.append(BenchRun(f"{world} world", source, kind, float(frac[1:]), int(seed[1:]),
                             results[spec.name], "subjects" if frac[0] == "p" else "images"))
    return runs


def _pick(runs: Sequence[BenchRun], share: str = "images", **kw) -> list[BenchRun]:
    return sorted((r for r in runs if r.share == share
                   and all(getattr(r, k) == v for k, v in kw.items())), key=lambda r: r.seed)


def _cell(runs: Sequence[BenchRun], where: str, what: str = "model") -> Cell | None:
    """Per-subject errors of ``runs`` on a target name or "val"; ``what`` "constant" reads
    the constant predictor's errors instead of the model's."""
    if not runs:
        return None
    per = []
    for r in runs:
        res = r.summary["val"] if where == "val" else r.summary["targets"][where]
        per.append((res["constant"] if what == "constant" else res)["per_subject"])
    return Cell.from_runs(per, f"{runs[0].world}/{runs[0].source}/{runs[0].kind} on {where}")


class Bootstrap:
    """Bootstrap draws per (number of seeds, test set); equal seed draws across test sets."""

    def __init__(self, n_boot: int):
        self.n_boot, self.streams, self.cache = n_boot, {}, {}

    def draws(self, cell: Cell, where: str) -> Draws:
        stream = self.streams.setdefault(where, len(self.streams))
        key = (cell.m.shape, where)
        if key not in self.cache:
            self.cache[key] = Draws.make(cell.m.shape[0], cell.m.shape[1], self.n_boot,
                                         stream=stream)
        return self.cache[key]

    def value(self, cell: Cell | None, where: str) -> str:
        if cell is None:
            return "-"
        s = cell_summary(cell, self.draws(cell, where))
        return fmt_ci(s["value"], s["ci"])

    def paired(self, a: Cell | None, b: Cell | None, where: str) -> dict | None:
        if a is None or b is None or a.m.shape != b.m.shape:
            return None
        return paired(a, b, self.draws(a, where))


Tasks = dict[str, tuple[str, str]]  # task name -> (source, target)


def main_rows(world: str, tasks: Tasks, runs: list[BenchRun], boot: Bootstrap, small: float,
              gates: dict[str, Verdict | None] | None = None, scale: int = 1,
              pilots: list[Pilot] | None = None):
    """One row per task of the world, plus the data for averages and plots.

    MoEGaze - baseline is judged (paired t over seeds, Holm over the world's tasks) only
    where its source's oracle gate (``gates``: source -> verdict) is "better"; a source
    with a gate that is not is "not testable". Each task's room is printed beside the
    paper's claim; ``pilots`` collects each comparison's variances for the sizing.
    """
    rows, data = [], []
    gates = gates or {}
    moe_estimates, untestable = {}, {}
    for task, (source, target) in tasks.items():
        lists = _task_runs(runs, world, source, target, small)
        cells = _task_cells(lists, target)
        d = boot.paired(cells["baseline"], cells["moegaze"], target)
        d10 = boot.paired(cells["baseline"], cells["moegaze10"], target)
        moe_estimates[task] = estimate(cells["baseline"], cells["moegaze"])
        if gates.get(source) is not None and gates[source].kind != BETTER:
            gate = verdict_text(gates[source])
            untestable[task] = f"{NO_GATE} ({source}: oracle - baseline {gate})"
        if pilots is not None:
            p = pilot_of(f"{world} {task}: MoEGaze - baseline", cells["baseline"],
                         cells["moegaze"], scale=scale)
            pilots += [p] if p else []
        room = room_pct(cells["baseline"] and cells["baseline"].value,
                        cells["reference"] and cells["reference"].value)
        rows.append(_task_row(task, cells, boot, target, d, d10, room))
        d10s = None
        if "moegaze10_subjects" in cells:
            d10s = boot.paired(cells["baseline"], cells["moegaze10_subjects"], target)
            rows[-1] |= _subject_share_columns(cells, boot, target, d10s)
        data.append({"task": task, "source": source, "target": target, "paired": d,
                     "paired_10_vs_100": d10, "paired_10_subjects_vs_100": d10s,
                     "room_pct": room, "seeds": {k: by_seed(lists[k], c)
                                                 for k, c in cells.items()},
                     "verdict_10_vs_100": verdict_record(family(
                         {"x": estimate(cells["baseline"], cells["moegaze10"])})["x"]),
                     **{k: (c.value if c is not None else None) for k, c in cells.items()}})
    verdicts = family(moe_estimates, untestable)
    for row, item in zip(rows, data, strict=True):
        v = verdicts[item["task"]]
        row["verdict (paired t over seeds, Holm over tasks)"] = verdict_text(v)
        item["verdict"] = verdict_record(v)
    return rows, data


def _task_runs(runs: list[BenchRun], world: str, source: str, target: str,
               small: float) -> dict[str, list[BenchRun]]:
    """The runs behind each cell of a task's row (the constant predictor is read from the
    baseline's runs; the "subjects" lists are the runs on a share of the subjects)."""
    sel = dict(world=world, source=source)
    base, moe = _pick(runs, kind="baseline", fraction=1.0, **sel), _pick(
        runs, kind="moegaze", fraction=1.0, **sel)
    base10, moe10 = _pick(runs, kind="baseline", fraction=small, **sel), _pick(
        runs, kind="moegaze", fraction=small, **sel)
    ref = _pick(runs, kind="reference", world=world, source=target)
    people = {k: _pick(runs, "subjects", kind=k, **sel) for k in ("baseline", "moegaze")}
    return {"constant": base, "reference": ref, "baseline": base, "moegaze": moe,
            "baseline10": base10, "moegaze10": moe10,
            "baseline10_subjects": people["baseline"],
            "moegaze10_subjects": people["moegaze"]}


def _task_cells(lists: dict[str, list[BenchRun]], target: str) -> dict[str, Cell | None]:
    """A task's cells on its target; the subject-share cells only where such runs exist
    (the other reading of "10%": a share of the subjects)."""
    cells = {"constant": _cell(lists["constant"], target, "constant"),
             "reference": _cell(lists["reference"], target),
             "baseline": _cell(lists["baseline"], target),
             "moegaze": _cell(lists["moegaze"], target),
             "baseline10": _cell(lists["baseline10"], target),
             "moegaze10": _cell(lists["moegaze10"], target)}
    if lists["baseline10_subjects"] or lists["moegaze10_subjects"]:
        cells |= {"baseline10_subjects": _cell(lists["baseline10_subjects"], target),
                  "moegaze10_subjects": _cell(lists["moegaze10_subjects"], target)}
    return cells


def _task_row(task: str, cells: dict[str, Cell | None], boot: Bootstrap, target: str,
              d: dict | None, d10: dict | None, room: float | None) -> dict:
    """A task's row of the main table (before its verdict)."""
    return {
        "task": task,
        "constant (source mean)": boot.value(cells["constant"], target),
        "trained on target": boot.value(cells["reference"], target),
        f"room % (paper {PAPER_REDUCTION_PCT})": room_text(room),
        "baseline 100%": boot.value(cells["baseline"], target),
        "MoEGaze 100%": boot.value(cells["moegaze"], target),
        "MoEGaze - baseline": fmt_ci(d and d["diff"], d and d["diff_ci"], sign=True),
        "reduction %": fmt_ci(d and d["rel_pct"], d and d["rel_ci"], 1, sign=True),
        "baseline 10%": boot.value(cells["baseline10"], target),
        "MoEGaze 10%": boot.value(cells["moegaze10"], target),
        "MoEGaze 10% - baseline 100%": fmt_ci(d10 and d10["diff"], d10 and d10["diff_ci"],
                                              sign=True),
    }


def _subject_share_columns(cells: dict[str, Cell | None], boot: Bootstrap, target: str,
                           d10s: dict | None) -> dict:
    """The row's columns of the runs on a share of the subjects."""
    return {
        "baseline 10% subjects": boot.value(cells["baseline10_subjects"], target),
        "MoEGaze 10% subjects": boot.value(cells["moegaze10_subjects"], target),
        "MoEGaze 10% subjects - baseline 100%": fmt_ci(
            d10s and d10s["diff"], d10s and d10s["diff_ci"], sign=True)}


def source_rows(world: str, tasks: Tasks, runs: list[BenchRun], boot: Bootstrap,
                pilots: list[Pilot] | None = None):
    """Held-out source subjects: constant, baseline, MoEGaze, the oracle gate (judged by a
    paired t over seeds, Holm over the world's sources); the gates by source."""
    rows, data, gate_estimates, moe_estimates = [], [], {}, {}
    for source in _sources(tasks):
        sel = dict(world=world, source=source, fraction=1.0)
        base, moe = _pick(runs, kind="baseline", **sel), _pick(runs, kind="moegaze", **sel)
        oracle = _pick(runs, kind="oracle", **sel)
        c_const, c_base = _cell(base, "val", "constant"), _cell(base, "val")
        c_moe, c_oracle = _cell(moe, "val"), _cell(oracle, "val")
        key = f"val:{source}"
        d_moe, d_or = boot.paired(c_base, c_moe, key), boot.paired(c_base, c_oracle, key)
        ratio = (c_base.value / c_const.value) if c_base and c_const else None
        if c_oracle is not None:
            gate_estimates[source] = estimate(c_base, c_oracle)
        moe_estimates[source] = estimate(c_base, c_moe)
        for name, other in (("oracle - baseline (gate)", c_oracle),
                            ("MoEGaze - baseline", c_moe)):
            p = pilot_of(f"{world} {source} held-out: {name}", c_base, other,
                         fixed_subjects=c_base.subjects if c_base else ())
            if pilots is not None and p:
                pilots.append(p)
        rows.append({
            "source": source,
            "constant (source mean)": boot.value(c_const, key),
            "baseline": boot.value(c_base, key),
            "baseline / constant": "-" if ratio is None else f"{ratio:.2f}",
            "MoEGaze": boot.value(c_moe, key),
            "MoEGaze - baseline": fmt_ci(d_moe and d_moe["diff"], d_moe and d_moe["diff_ci"],
                                         sign=True),
            "oracle routing": boot.value(c_oracle, key),
            "oracle - baseline (gate)": fmt_ci(d_or and d_or["diff"], d_or and d_or["diff_ci"],
                                               sign=True),
        })
        data.append({"source": source, "constant": c_const and c_const.value,
                     "baseline": c_base and c_base.value, "baseline_over_constant": ratio,
                     "moegaze": c_moe and c_moe.value, "oracle": c_oracle and c_oracle.value,
                     "paired_moegaze": d_moe, "paired_oracle": d_or,
                     "seeds": {"constant": by_seed(base, c_const),
                               "baseline": by_seed(base, c_base), "moegaze": by_seed(moe, c_moe),
                               "oracle": by_seed(oracle, c_oracle)}})
    gates = family(gate_estimates)
    moe = family(moe_estimates)
    for row, item in zip(rows, data, strict=True):
        g = gates.get(item["source"])
        row["gate verdict"] = verdict_text(g) if item["source"] in gates else "-"
        row["MoEGaze verdict"] = verdict_text(moe[item["source"]])
        item["gate"], item["verdict_moegaze"] = verdict_record(g), verdict_record(
            moe[item["source"]])
    return rows, data, gates


def cluster_rows(world: str, tasks: Tasks, runs: list[BenchRun]) -> list[dict]:
    """Mean error per appearance cluster (over seeds), per test set and model, at 100%."""
    rows = []
    for source, targets in _sources(tasks).items():
        for where in ("val", *targets):
            for kind in ("baseline", "moegaze", "oracle"):
                sel = _pick(runs, world=world, source=source, kind=kind, fraction=1.0)
                per = [(r.summary["val"] if where == "val" else r.summary["targets"][where])
                       ["per_cluster"] for r in sel]
                if not per or not per[0]:
                    continue
                row = {"source": source, "tested on": "held-out source" if where == "val"
                       else where, "model": kind}
                for c in sorted(per[0], key=int):
                    row[f"cluster {c}"] = float(np.mean([p[c][0] for p in per if c in p]))
                rows.append(row)
    return rows


def router_rows(world: str, tasks: Tasks, runs: list[BenchRun]) -> list[dict]:
    """How MoEGaze (100%) routes: sharpness, subject purity, selectivity for the cluster."""
    rows = []
    for source, targets in _sources(tasks).items():
        sel = _pick(runs, world=world, source=source, kind="moegaze", fraction=1.0)
        for where in ("val", *targets):
            stats = [(r.summary["val"] if where == "val" else r.summary["targets"][where])
                     ["router"] for r in sel]
            if not stats:
                continue
            row = {"source": source, "tested on": "held-out source" if where == "val"
                   else where}
            for key in ("mean_max_weight", "subject_purity", "cluster_purity",
                        "expert_cluster_nmi"):
                vals = [s[key] for s in stats if key in s]
                row[key] = float(np.mean(vals)) if vals else None
            row["busiest expert share"] = float(np.mean([max(s["top1_share"]) for s in stats]))
            rows.append(row)
    return rows


def _sources(tasks: Tasks) -> dict[str, list[str]]:
    """Each source with the targets of its tasks (in task order)."""
    out: dict[str, list[str]] = {}
    for s, t in tasks.values():
        out.setdefault(s, []).append(t)
    return out


def average_reduction(data: list[dict]) -> dict | None:
    """Mean relative reduction over tasks, bootstrapped jointly (shared seed draws)."""
    reps = [d["paired"]["replicates_rel"] for d in data if d["paired"] is not None]
    if not reps:
        return None
    mean = float(np.mean([d["paired"]["rel_pct"] for d in data if d["paired"] is not None]))
    return {"rel_pct": mean, "rel_ci": interval(np.mean(reps, axis=0)), "tasks": len(reps)}


def study_tables(runs: list[BenchRun], worlds: dict[str, Tasks], *, n_boot: int,
                 small_fraction: float, header: str, label=str, scale: int = 1) -> dict:
    """Every table of a study as Markdown plus the numbers behind them.

    ``label`` turns a source or target key into the name shown in tables.
    """
    boot = Bootstrap(n_boot)
    out, md, pilots = {"worlds": {}}, [header], []
    for world, tasks in worlds.items():
        srows, sdata, gates = source_rows(world, tasks, runs, boot, pilots)
        rows, data = main_rows(world, tasks, runs, boot, small_fraction, gates, scale, pilots)
        avg = average_reduction(data)
        rooms = [d["room_pct"] for d in data if d["room_pct"] is not None]
        if avg is not None:
            avg["rooms_pct"] = rooms
            avg["claim"] = claim_verdict(avg, rooms)
        for d in (*data, *sdata):  # bootstrap replicates stay out of the JSON
            for v in d.values():
                if isinstance(v, dict):
                    v.pop("replicates_rel", None)
        crows, rrows = cluster_rows(world, tasks, runs), router_rows(world, tasks, runs)
        for r in (*srows, *crows, *rrows):
            r["source"] = label(r["source"])
        for r in (*crows, *rrows):
            r["tested on"] = label(r["tested on"])
        out["worlds"][world] = {"main": data, "source": sdata, "average_reduction": avg,
                                "clusters": crows, "router": rrows}
        md += [f"\n### {world}: target error\n", markdown_table(rows)]
        if avg is not None:
            room = (f"room {min(rooms):.1f}% to {max(rooms):.1f}% (baseline - trained on "
                    "target, in % of the baseline)" if rooms else "room not measured (no "
                    "trained-on-target runs)")
            md.append(f"\nAverage relative reduction of MoEGaze over the baseline on the "
                      f"{avg['tasks']} tasks: {fmt_ci(avg['rel_pct'], avg['rel_ci'], 1, True)}%"
                      f"; {room}, beside the paper's {PAPER_REDUCTION_PCT}% on real data: "
                      f"{avg['claim']}.\n")
        md += [f"\n### {world}: held-out source subjects\n", markdown_table(srows)]
        if crows:
            md += [f"\n### {world}: error per appearance cluster (mean over seeds)\n",
                   markdown_table(crows, digits=2)]
        if rrows:
            md += [f"\n### {world}: MoEGaze's router (mean over seeds)\n",
                   markdown_table(rrows, digits=3)]
    out["pilot"] = pilots
    out["markdown"] = "\n".join(md)
    return out


def claim_verdict(avg: dict, rooms: list[float]) -> str:
    """The paper's average reduction in a world: not testable where every task's room is
    below it, else where the claim lies against the interval."""
    if rooms and max(rooms) < PAPER_REDUCTION_PCT:
        return (f"not testable in this world (room {max(rooms):.1f}% at most, below "
                f"{PAPER_REDUCTION_PCT}%)")
    low, high = avg["rel_ci"]
    where = ("above the interval" if PAPER_REDUCTION_PCT > high else "below the interval"
             if PAPER_REDUCTION_PCT < low else "inside the interval")
    return f"the claimed {PAPER_REDUCTION_PCT}% lies {where}"


def bench_tables(specs, results: dict[str, dict], cfg) -> dict:
    """The synthetic bench's tables (one section per world)."""
    header = (f"Angular error in degrees: mean over {len(cfg.seeds)} seeds "
              f"({seed_text(cfg.seeds)}) of the image-weighted "
              "mean, [95% bootstrap interval over seeds and test subjects]. Differences are "
              "paired by seed (shared initialisation and batch order); negative = MoEGaze "
              f"better. {cfg.steps} steps of batch {cfg.batch_size} for every run, 10% runs "
              "included.\n")
    return study_tables(parse_runs(specs, results),
                        {f"{w} world": WORLDS.get(w) for w in cfg.worlds},
                        n_boot=cfg.n_boot, small_fraction=cfg.small_fraction, header=header,
                        scale=max(1, getattr(cfg, "target_scale", 1)))


def plot_main(tables: dict, path: Path) -> None:
    """Per world and task: bars for baseline/MoEGaze at 100%/10%, markers for references."""
    worlds = tables["worlds"]
    fig, axes = figure(ncols=len(worlds), width=5.0, height=3.4)
    groups = [("baseline", "baseline 100%"), ("moegaze", "MoEGaze 100%"),
              ("baseline10", "baseline 10%"), ("moegaze10", "MoEGaze 10%")]
    for ax, (world, t) in zip(axes[0], worlds.items(), strict=True):
        tasks = [d["task"] for d in t["main"]]
        width = 0.8 / len(groups)
        for g, (key, label) in enumerate(groups):
            xs = [i + (g - 1.5) * width for i in range(len(tasks))]
            ax.bar(xs, [d[key] or 0 for d in t["main"]], width, label=label)
        ax.scatter(range(len(tasks)), [d["constant"] for d in t["main"]], marker="_", s=400,
                   color="k", label="constant", zorder=3)
        ax.scatter(range(len(tasks)), [d["reference"] or np.nan for d in t["main"]],
                   marker="*", color="k", label="trained on target", zorder=3)
        ax.set_xticks(range(len(tasks)), tasks)
        ax.set(ylabel="target mean angular error (deg)", title=world)
    axes[0, 0].legend(fontsize=7)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


__all__ = ["bench_tables", "plot_main"]
