"""A bench's results file: every row's per-seed figures (results.json in its run folder), in
the layout of the files of docs/results (genlab.core.results.files), so that a rerun's file,
copied over a recovered one, regenerates the claims that cite it.

The metrics keep the names of those files: ``C10`` (and ``C100``, ``IN16``: the cell through
the space's accuracy table), ``p-free`` and ``skip`` (edges of the cell; in the MobileNet
space, whose blocks are either an op or ``zero``, one metric ``zero``), ``entropy``,
``params`` and ``macs`` (the space's reference network) and ``test`` (the retrained cell on
the proxy's test split). The rows are the bench's rows and ``random``; seeds are strings.

With ``--versus ROW`` the file's figures also hold the primary comparison (ROW minus its best
rival on CIFAR-10, paired by seed, uncorrected: ``versus_primary``, a recorded interval) and
the rival's name (``versus_best_rival``), which no claim could name before the run.
"""

from __future__ import annotations

from pathlib import Path

from genlab.core.results.files import write_run_results
from genlab.nas.methods import row_title

#: record key -> (metric, what it measures; {cell} is the space's cell in words)
METRICS = {
    "cifar10": ("C10", "CIFAR-10 test accuracy of the cell through the {table} table (%)"),
    "cifar100": ("C100", "CIFAR-100 test accuracy of the cell through the {table} table (%)"),
    "imagenet16": ("IN16", "ImageNet16-120 test accuracy of the cell through the {table} "
                   "table (%)"),
    "param_free_ops": ("p-free", "parameter-free edges of {cell}"),
    "skip_ops": ("skip", "skip edges of {cell}"),
    "mean_entropy": ("entropy", "mean final edge entropy of alpha"),
    "params_m": ("params", "parameters (M)"),
    "macs_m": ("macs", "multiply-adds (M)"),
    "test_acc": ("test", "test accuracy of the retrained cell on the proxy's test split (%)"),
}
#: the spaces whose architecture is a chain of blocks, each an op or ``zero``: one metric
ZERO_SPACES = {"mobilenet": ("zero", "`zero` blocks of the network")}


def cell_words(space: str) -> str:
    """The cell whose edges a bench counts, in words (as the recovered files say it)."""
    return "the cell (of 6)" if space == "nb201" else "the normal cell (of 8)"


def bench_values(records: list[dict], space: str, table: str | None) -> tuple[dict, dict]:
    """({metric: what it measures}, {metric: {row: {seed: value}}}) of a bench's records;
    a metric no record holds is left out."""
    keys = dict(METRICS)
    if space in ZERO_SPACES:
        del keys["skip_ops"]
        keys["param_free_ops"] = ZERO_SPACES[space]
    metrics, values = {}, {}
    for key, (metric, words) in keys.items():
        rows: dict[str, dict[str, float]] = {}
        for r in records:
            v = r.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                rows.setdefault(r["reg"], {})[str(r["seed"])] = v
        if rows:
            metrics[metric] = words.format(cell=cell_words(space), table=table or "accuracy")
            values[metric] = rows
    return metrics, values


def write_bench_results(result: dict, space, command: str, out: str | Path) -> Path | None:
    """results.json of a bench (``result``: bench.json's content) made by ``command``; None
    outside a git checkout."""
    metrics, values = bench_values(result["records"], space.name,
                                   space.table.upper() if space.table else None)
    data = {"title": f"genlab nas bench, {space.name} space: every seed's architecture "
                     f"({result.get('steps', '?')} search steps)",
            "command": command, "metrics": metrics, "values": values}
    figures = {}
    if result.get("settings"):  # a tuned bench, or one with --settings-from
        figures["settings"] = dict(result["settings"])
    primary = (result.get("versus") or {}).get("primary")
    if primary:
        figures |= primary_figures(primary, result["versus"]["level"])
    if figures:
        data["figures"] = figures
    return write_run_results(out, data)


def primary_figures(primary: dict, level: float) -> dict:
    """The primary comparison of ``--versus`` (genlab.nas.bench.versus.primary_row) as the
    results file's figures: the best rival's name (its paper's) and the recorded interval."""
    mde = next((v for k, v in primary.items() if k.startswith("MDE")), None)
    goal = next(f"{k}: {v}" for k, v in primary.items() if k.startswith("low > -"))
    return {"versus_best_rival": row_title(primary["rival"]), "versus_goal": goal,
            "versus_primary": {"effect": primary["effect"], "low": primary["low"],
                               "high": primary["high"], "n": primary["n"],
                               "test": f"sign-flip over seeds {primary['seeds']}, "
                                       f"{100 * level:.0f}%",
                               "mde": mde}}
