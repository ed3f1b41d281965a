"""The NAS section of `genlab demo`: none vs beta vs BER on digits at a reduced budget, with
DARTS's and BER's search curves side by side and BER's forces and node batch entropies."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

from genlab.core.report import Code, Report, mean_std
from genlab.nas.bench import RANDOM, BenchConfig, run_bench
from genlab.nas.bench.report import CONSTANT, TABLE_COLUMNS
from genlab.nas.search import SearchConfig
from genlab.nas.spaces import get_space

DEMO_STEPS = 600
REG_TITLES = {"none": "DARTS", "beta": "beta-DARTS", "ber": "BER", RANDOM: "a random cell"}
ACC_LABELS = {"cifar10": "NB201 CIFAR-10 accuracy", "test_acc": "digits test accuracy"}


def _accuracy_columns(result: dict) -> dict[str, str]:
    """Record key -> column of the accuracies shown: the benchmark table's, then digits'."""
    space = get_space(result.get("space", "nb201"))
    cols = {key: f"{col} (%)" for key, col in TABLE_COLUMNS.items()} if space.table else {}
    cols["test_acc"] = "digits test (%)"
    records = result.get("records") or []
    if any(r.get(k) is not None for r in records for k in cols):  # the ones with figures first
        cols = dict(sorted(cols.items(),
                           key=lambda kv: all(r.get(kv[0]) is None for r in records)))
    return cols


def acc_label(result: dict) -> str:
    """The name of the accuracy the readings compare (the first accuracy column)."""
    key = next(iter(_accuracy_columns(result)))
    return ACC_LABELS.get(key, key)


def _regs(result: dict) -> list[str]:
    regs = list(result.get("per_reg") or {})
    return regs or list(dict.fromkeys(r["reg"] for r in result["records"]))


def reg_rows(result: dict) -> list[dict]:
    """Per regulariser: each figure's mean over its runs (± std over seeds when n >= 2)."""
    accs = _accuracy_columns(result)
    rows = []
    for reg in _regs(result):
        rs = [r for r in result["records"] if r["reg"] == reg]
        row = {"reg": reg, "runs": len(rs)}
        row.update({col: mean_std([r.get(key) for r in rs], 2) for key, col in accs.items()})
        for key, col, digits in (("param_free_ops", "p-free ops", 1), ("skip_ops", "skip ops", 1),
                                 ("mean_entropy", "entropy", 3),
                                 ("force_ratio", "force ratio", 3),
                                 ("search_seconds", "search s", 0)):
            row[col] = mean_std([r.get(key) for r in rs], digits)
        if len(rs) > 1:
            row["agreement"] = (result.get("per_reg") or {}).get(reg, {}).get("agreement")
        rows.append(row)
    if result.get("constant_test_acc") is not None:
        rows.append({"reg": CONSTANT, "runs": "-",
                     "digits test (%)": f"{result['constant_test_acc']:.2f}"})
    return rows


def run_rows(result: dict) -> list[dict]:
    """One row per run: the derived cell's genotype (code), its op counts and accuracies."""
    accs = _accuracy_columns(result)
    rows = []
    for r in result["records"]:
        row = {"reg": r["reg"], "seed": r["seed"], "genotype": Code(r["genotype"]),
               "p-free": r.get("param_free_ops"), "skip": r.get("skip_ops"),
               "entropy": r.get("mean_entropy")}
        row.update({col: r.get(key) for key, col in accs.items()})
        rows.append(row)
    return rows


def reg_means(result: dict) -> dict[str, dict]:
    """Per regulariser: runs, mean parameter-free ops and mean accuracy (first column shown)."""
    key = next(iter(_accuracy_columns(result)))
    out = {}
    for reg in _regs(result):
        rs = [r for r in result["records"] if r["reg"] == reg]
        pf = [r["param_free_ops"] for r in rs if r.get("param_free_ops") is not None]
        acc = [r[key] for r in rs if r.get(key) is not None]
        out[reg] = {"runs": len(rs), "p_free": statistics.fmean(pf) if pf else None,
                    "acc": statistics.fmean(acc) if acc else None}
    return out


def _num(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def reg_reading(means: dict[str, dict], acc_label: str) -> str:
    """The reading of the per-regulariser table: ber against none, from the table's means."""
    if "ber" not in means or "none" not in means:
        return "The table has no ber and none rows to compare."
    ber, none = means["ber"], means["none"]
    parts = []
    if ber["p_free"] is not None and none["p_free"] is not None:
        b, n = _num(ber["p_free"]), _num(none["p_free"])
        if ber["p_free"] < none["p_free"]:
            parts.append(f"ber keeps {b} parameter-free ops vs {n} for none (fewer: less "
                         "collapse)")
        elif ber["p_free"] == none["p_free"]:
            parts.append(f"ber and none keep the same number of parameter-free ops ({b})")
        else:
            parts.append(f"ber keeps {b} parameter-free ops vs {n} for none: more, so on this "
                         "count it does not reduce the collapse here")
    if ber["acc"] is not None and none["acc"] is not None:
        word = "above" if ber["acc"] > none["acc"] else "not above"
        others = [f"{reg} {m['acc']:.2f}%" for reg, m in means.items()
                  if reg not in ("ber", "none") and m["acc"] is not None]
        parts.append(f"its {acc_label} is {ber['acc']:.2f}%, {word} none's {none['acc']:.2f}%"
                     + (f" ({', '.join(others)})" if others else ""))
    runs = min(m["runs"] for m in means.values())
    tail = (" With one seed per row no difference here is tested." if runs < 2
            else f" Means over at least {runs} seeds; the std is in the table.")
    return ("; ".join(parts) + "." if parts else "No figures to compare.") + tail


def run_reading(result: dict) -> str:
    """The reading of the per-run table: the best cell and the majority-class sanity row."""
    key, col = next(iter(_accuracy_columns(result).items()))
    scored = [r for r in result["records"] if r.get(key) is not None]
    if not scored:
        return "No run has an accuracy yet."
    best = max(scored, key=lambda r: r[key])
    text = (f"Highest {ACC_LABELS.get(key, col)}: {best['reg']} seed {best['seed']} "
            f"({best[key]:.2f}%)")
    const = result.get("constant_test_acc")
    tested = [r for r in result["records"] if r.get("test_acc") is not None]
    if const is not None and tested:
        below = [f"{r['reg']} seed {r['seed']}" for r in tested if r["test_acc"] <= const]
        text += (f"; every retrained cell beats the majority class on digits ({const:.2f}%)"
                 if not below else
                 f"; not above the majority class on digits ({const:.2f}%): {', '.join(below)}")
    return text + "."


def heading(space_name: str, regs: list[str], seeds: int, steps: int) -> str:
    """What the section measured: space, methods, seeds and search steps."""
    space = get_space(space_name).description.split(":")[0].removesuffix(" cell")
    names = [REG_TITLES.get(r, r) for r in regs]
    methods = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    seed_text = "one seed" if seeds == 1 else f"{seeds} seeds"
    return f"{space} space on digits: {methods}, {seed_text}, {steps} search steps"


def demo_section(out_dir: Path, report: Report, *, quick: bool = True,
                 nb201_table: str | None = None, progress_bar=None) -> dict:
    """Search with none, beta and ber (seed 0), retrain briefly, add table and plots to report."""
    out_dir = Path(out_dir)
    full_steps = get_space(SearchConfig().space).proxy.steps
    steps = DEMO_STEPS if quick else full_steps
    cfg = BenchConfig(regs=["none", "beta", "ber"], seeds=[0],
                      search=replace(SearchConfig(), steps=steps, hessian_points=3,
                                     nb201_table=nb201_table),
                      retrain_epochs=8 if quick else 30)
    result = run_bench(cfg, out_dir, resume=(out_dir / "config.json").exists(),
                       progress_bar=progress_bar)
    rel = out_dir.name
    report.heading(heading(cfg.search.space, cfg.regs, len(cfg.seeds), steps))
    report.text(
        f"First-order search with three regularisers on the alpha step, {steps} steps each "
        f"(the full default budget is {full_steps}), then {cfg.retrain_epochs} epochs of "
        "retraining of each derived cell on digits; 'random' is a random cell of the space, "
        "retrained the same way. 'p-free' counts parameter-free ops in the derived cell "
        "(DARTS's known failure, collapse, fills the cell with them); entropy is the mean edge "
        "entropy (log 5 = 1.609 is uniform). "
        + ("CIFAR accuracies come from the NB201 table, which judges and never selects."
           if nb201_table else "Pass `--nb201-table` to judge the cells by their CIFAR accuracy.")
    )
    report.text("Per regulariser (a cell is mean ± std over seeds where there are two or more):")
    report.table(reg_rows(result))
    report.reading(reg_reading(reg_means(result), acc_label(result)))
    report.text("Per run (a long genotype wraps after a `+`, which separates the cell's nodes):")
    report.table(run_rows(result), digits=2)
    report.reading(run_reading(result))
    report.image(f"{rel}/bench.png",
                 "entropy and parameter-free ops during search, per regulariser")
    runs = {r["reg"]: f"{rel}/search/{r.get('search_folder', r['run'])}"
            for r in result["records"]}
    for reg, title in (("none", "DARTS (none)"), ("ber", "BER")):
        report.image(f"{runs[reg]}/search_curves.png",
                     f"{title}: entropy, parameter-free ops, Hessian eigenvalue")
    for reg, title in (("none", "DARTS (none)"), ("ber", "BER")):
        report.image(f"{runs[reg]}/arch_weights.png", f"{title}: softmax(alpha) per edge")
    report.image(f"{runs['ber']}/forces.png", "BER: forces on alpha (CE vs regulariser)")
    report.image(f"{runs['ber']}/node_entropy.png", "BER: batch entropy of the cells' nodes")
    return result
