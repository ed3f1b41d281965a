"""A bench's tables and figure: per-row aggregation, bench.md and tuning.md in Markdown,
bench.png (genlab.nas.bench writes them from its records)."""

from __future__ import annotations

import itertools
import statistics

from genlab.core.report import figure, markdown_table, mean_std_text
from genlab.nas.bench.tuning import SCORE
from genlab.nas.bench.versus import versus_markdown
from genlab.nas.methods.reported import reported_rows
from genlab.nas.spaces import get_space

METRICS = ("cifar10", "cifar100", "imagenet16", "param_free_ops", "skip_ops", "mean_entropy",
           "params_m", "macs_m", "test_acc", "hessian_eig", "force_ratio", "search_seconds",
           "cpu_seconds")
TABLE_COLUMNS = {"cifar10": "C10", "cifar100": "C100", "imagenet16": "IN16"}
SIZE_COLUMNS = {"params_m": "params M", "macs_m": "MACs M"}  # spaces with a reference network
CONSTANT = "constant (majority class)"  # the sanity row of every table


def tuning_markdown(table: list[dict]) -> str:
    """The tuning table: every row's settings, mean ± std validation accuracy over the
    selection seeds, the worst count of parameter-free edges, eligibility and the choice
    (the sanity row, which has no cell, shows "-" for the cell's columns)."""
    rows = [{"row": r["row"], "setting": r["setting"],
             "val acc": mean_std_text(r[f"{SCORE}_mean"], r[f"{SCORE}_std"], r["seeds"], 2),
             "max p-free": "-" if r["max_param_free"] is None else r["max_param_free"],
             "eligible": {True: "yes", False: "no", None: "-"}[r["eligible"]],
             "chosen": "**chosen**" if r["chosen"] else "", "note": r["note"]} for r in table]
    return ("### Tuning (selection seeds; validation accuracy of the retrained cell)\n\n"
            + markdown_table(rows, digits=2))


def cell_agreement(genotypes: list[str], space=None) -> float | None:
    """Mean fraction of decisions on which two derived architectures agree, over seed pairs."""
    space = space or get_space("nb201")
    cells = [space.choices(space.parse(g)) for g in genotypes]
    pairs = list(itertools.combinations(cells, 2))
    if not pairs:
        return None
    same = [sum(x == y for x, y in zip(a, b, strict=True)) / len(a) for a, b in pairs]
    return sum(same) / len(same)


def aggregate(records: list[dict], regs: list[str], space=None) -> dict:
    """Per regulariser: mean and std of every metric, agreement across seeds."""
    out = {}
    for reg in regs:
        rows = [r for r in records if r["reg"] == reg]
        agg = {"runs": len(rows),
               "agreement": cell_agreement([r["genotype"] for r in rows], space)}
        for m in METRICS:
            vals = [r[m] for r in rows if r.get(m) is not None]
            if vals:
                agg[f"{m}_mean"] = statistics.fmean(vals)
                agg[f"{m}_std"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
        out[reg] = agg
    return out


def bench_rows(result: dict) -> tuple[list[dict], list[dict]]:
    """Rows of the per-regulariser summary table and of the per-run table."""
    space = get_space(result.get("space", "nb201"))
    table_cols = TABLE_COLUMNS if space.table else {}
    size_cols = SIZE_COLUMNS if space.reference else {}
    test = held_out_column(result)
    runs = []
    for r in result["records"]:
        row = {"reg": r["reg"], "seed": r["seed"],
               "genotype": "`" + r["genotype"].replace("|", "\\|") + "`",  # escaped pipes
               "p-free": r["param_free_ops"], "skip": r.get("skip_ops"),
               "entropy": r.get("mean_entropy")}
        row.update({col: r.get(key) for key, col in {**table_cols, **size_cols}.items()})
        row[test] = r.get("test_acc")
        runs.append(row)
    summ = []
    for reg, a in result["per_reg"].items():
        def pm(m, d=2, a=a):
            if m + "_mean" not in a:
                return "-"  # one run prints its value; two or more mean ± std (n=N)
            return mean_std_text(a[m + "_mean"], a.get(m + "_std"), a["runs"], d)

        row = {"reg": reg, "runs": a["runs"]}  # "reg": the row (a method or a regulariser)
        if "settings" in result:  # a tuned bench: each row's chosen setting
            row["setting"] = result["settings"].get(reg, "-")
        row.update({col: pm(key) for key, col in table_cols.items()})
        row.update({"p-free ops": pm("param_free_ops", 1), "skip ops": pm("skip_ops", 1),
                    "entropy": pm("mean_entropy", 3)})
        row.update({col: pm(key) for key, col in size_cols.items()})
        row.update({"agreement": a["agreement"],
                    "force ratio": pm("force_ratio", 3),
                    test: pm("test_acc"), "search s": pm("search_seconds", 0),
                    "CPU s": pm("cpu_seconds", 0)})
        summ.append(row)
    if "constant_test_acc" in result:
        summ.append({"reg": CONSTANT, "runs": "-",
                     test: f"{result['constant_test_acc']:.2f}"})
    return summ, runs


def held_out_column(result: dict) -> str:
    """The retrained cells' test-accuracy column, named by the bench's data set (``folder``
    for a user's folder; benches recorded before the name was kept searched digits)."""
    return f"{result.get('dataset', 'digits').split(':')[0]} test"


def bench_markdown(result: dict) -> str:
    """Per-row summary table (with the cited reference rows of the space, apart), the tuning
    table where the bench tuned, and the per-run table, in Markdown."""
    summ, runs = bench_rows(result)
    cited = reported_rows(result.get("space", "nb201"))
    steps = f", {result['steps']} search steps each" if result.get("steps") else ""
    text = (f"### Per method or regulariser (mean ± std over seeds where there are two or "
            f"more{steps})\n\n" + markdown_table(summ, digits=2))
    if cited:
        text += ("\n### Reported by the authors (CIFAR-10 searches on GPUs; not comparable to "
                 "the proxy rows above; source in the last column)\n\n"
                 + markdown_table(cited, digits=2))
    if result.get("standing"):
        rank = result["standing"]
        interval = "" if rank.get("low") is None else (
            f" [{rank['low']:.2f}, {rank['high']:.2f}] ({100 * rank['level']:.0f}% bootstrap "
            f"over seeds, at least {rank['seeds']} a row)")
        text += (f"\nKendall's tau-b between the rows' proxy C10 means and their reported C10 "
                 f"(the rows with both, n = {len(rank['rows'])}): {rank['tau']:.2f}"
                 f"{interval}\n")
    text += cost_markdown(result["records"])
    if result.get("space", "nb201") == "nb201":
        text += collapse_markdown(result["records"])
    if result.get("random_cells"):
        text += random_cells_markdown(result["random_cells"])
    if result.get("versus"):
        text += versus_markdown(result["versus"]["rows"], result["versus"]["row"],
                                result["versus"].get("primary"))
    if result.get("tuning"):
        text += "\n" + tuning_markdown(result["tuning"])
    return text + "\n### Per run\n\n" + markdown_table(runs, digits=2)


def cost_markdown(records: list[dict]) -> str:
    """The bench's compute: the CPU-hours of the jobs run whole by this bench (search and
    retraining; a resumed job's are partial and left out), and apart those of the records
    ``--records-from`` gave (``from_records``), where they ran."""
    here = [r for r in records if not r.get("from_records")]
    given = [r["cpu_seconds"] for r in records
             if r.get("from_records") and r.get("cpu_seconds") is not None]
    cpu = [r["cpu_seconds"] for r in here if r.get("cpu_seconds") is not None]
    text = ""
    if cpu:
        text = (f"\nCompute: {sum(cpu) / 3600:.2f} CPU-hours over the {len(cpu)} of "
                f"{len(here)} jobs run here measured whole (a resumed job's are partial and "
                f"left out; {sum(cpu) / len(cpu):.0f} CPU-s a job).\n")
    if given:
        read = (f"the {len(records) - len(here)} jobs read from --records-from took "
                f"{sum(given) / 3600:.2f} CPU-hours where they ran ({len(given)} measured "
                "whole)")
        text += (f"\nNot counted above: {read}.\n" if cpu else
                 f"\nCompute: none of the jobs ran here; {read}.\n")
    return text


# An NB201 cell "collapses" with at least this many of its 6 edges parameter-free (none,
# skip_connect, avg_pool_3x3): DARTS' published first-order cell has 6 (skip on every edge);
# docs/nas_proxy.md's stage-2 criterion is 4 of 6 in at least 3 of 5 seeds.
COLLAPSED_PFREE = 4


def collapse_markdown(records: list[dict]) -> str:
    """The line that counts, per row, the seeds whose cell collapsed (NB201)."""
    rows: dict[str, list[int]] = {}
    for r in records:
        rows.setdefault(r["reg"], []).append(r["param_free_ops"])
    counts = ", ".join(f"{row} {sum(p >= COLLAPSED_PFREE for p in pfree)} of {len(pfree)}"
                       for row, pfree in rows.items())
    return (f"\nSeeds whose cell has at least {COLLAPSED_PFREE} of its 6 edges parameter-free "
            f"(none, skip, pool; DARTS' published cell has 6): {counts}.\n")


def random_cells_markdown(chance: dict) -> str:
    """The random-cell line of the report: the exact distribution and each row's share."""
    shares = ", ".join(f"{row} {100 * share:.1f}%" for row, share in chance["at_least_row"].items())
    return (f"\nA random cell of the space (the table's exact distribution over its "
            f"{chance['cells']:,} cells): CIFAR-10 mean {chance['mean']:.2f}, median "
            f"{chance['median']:.2f}, 10th-90th percentile {chance['q10']:.2f}-"
            f"{chance['q90']:.2f}. Random cells at least as accurate as each row's mean: "
            f"{shares}.\n")


def plot_bench(records: list[dict], regs: list[str], space=None):
    """Entropy and parameter-free-op curves per regulariser, and an accuracy per run."""
    fig, axes = figure(ncols=3, width=4.2, height=3.2)
    palette = ["tab:red", "tab:blue", "tab:green", "tab:purple", "tab:orange"]
    colors = {reg: palette[i % len(palette)] for i, reg in enumerate(regs)}
    searched = [r for r in records if r.get("curve_steps")]
    for r in searched:
        c = colors.get(r["reg"], "k")
        axes[0, 0].plot(r["curve_steps"], r["entropy_curve"], c=c, alpha=0.7,
                        label=r["reg"] if r["seed"] == searched[0]["seed"] else None)
        axes[0, 1].plot(r["curve_steps"], r["param_free_curve"], c=c, alpha=0.7)
    axes[0, 0].set_title("mean edge entropy")
    if searched:  # records read from a runs.csv carry no curves
        axes[0, 0].legend(fontsize=8)
    axes[0, 1].set_title("parameter-free ops in argmax")
    for ax in axes[0, :2]:
        ax.set_xlabel("step")
    ax = axes[0, 2]
    key, title = ("cifar10", "NB201 CIFAR-10 test acc. (%) of the derived cell") \
        if space is not None and space.table else ("test_acc", "retrained test acc. (%, digits)")
    if all(r.get(key) is None for r in records):  # no NB201 table given: digits accuracy
        key, title = ("test_acc", "retrained test acc. (%, digits)")
    shown = sorted({r["reg"] for r in records}, key=lambda g: regs.index(g) if g in regs else 99)
    for i, reg in enumerate(shown):
        vals = [r.get(key) for r in records if r["reg"] == reg and r.get(key) is not None]
        ax.scatter([i] * len(vals), vals, c=colors.get(reg, "k"))
    ax.set_xticks(range(len(shown)), shown)
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
