"""`genlab nas bench`: several regularisers x seeds, each searched then retrained; one table.

Every search and retraining is its own run folder under ``out/search`` and
``out/retrain``; finished runs are reused and unfinished ones resumed, so a killed
bench continues where it stopped. Results: bench.json (one record per run plus
per-regulariser mean and std), bench.md (Markdown table) and bench.png.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from genlab.core.errors import ConfigError, require_positive
from genlab.core.report import figure, markdown_table
from genlab.core.runs import CONFIG, SUMMARY, RunDir, atomic_write_bytes, read_json, write_json
from genlab.nas.retrain import RetrainConfig, retrain
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import NB201_EDGES

METRICS = ("cifar10", "cifar100", "imagenet16", "param_free_ops", "mean_entropy", "test_acc",
           "hessian_eig", "search_seconds")


@dataclass
class BenchConfig:
    """Regularisers x seeds, the shared search template and the retraining budget."""

    regs: list[str] = field(default_factory=lambda: ["none", "beta", "ber"])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    search: SearchConfig = field(default_factory=SearchConfig)
    retrain_epochs: int = 30
    retrain_channels: int = 16
    retrain_cells: int = 1


def finished_or_run(run_fn, cfg, folder: Path, **kwargs) -> dict:
    """The summary of a finished run folder, else ``run_fn(cfg, folder, resume=...)``."""
    if (folder / SUMMARY).exists():
        return read_json(folder / SUMMARY)
    return run_fn(cfg, folder, resume=(folder / CONFIG).exists(), **kwargs)


def run_bench(cfg: BenchConfig, out, *, resume: bool = False, progress_bar=None) -> dict:
    """Search and retrain every (regulariser, seed); write bench.json, bench.md, bench.png."""
    if not cfg.regs or not cfg.seeds:
        raise ConfigError("bench needs at least one regulariser and one seed")
    require_positive("retrain-epochs", cfg.retrain_epochs, allow_zero=True)
    run = RunDir(out, asdict(cfg), resume=resume)
    records = []
    for reg, seed in itertools.product(cfg.regs, cfg.seeds):
        name = f"{reg}-s{seed}"
        scfg = replace(cfg.search, reg=reg, seed=seed)
        summary = finished_or_run(run_search, scfg, run.path / "search" / name,
                                  progress_bar=progress_bar)
        record = {"run": name, "reg": reg, "seed": seed, "genotype": summary["genotype"],
                  "param_free_ops": summary["param_free_ops"],
                  "mean_entropy": summary["mean_entropy"], "hessian_eig": summary["hessian_eig"],
                  "search_seconds": summary["search_seconds"],
                  "param_free_curve": summary["param_free_curve"],
                  "entropy_curve": summary["entropy_curve"], "curve_steps": summary["curve_steps"]}
        record.update(summary.get("nb201", {}))
        if cfg.retrain_epochs > 0:
            rcfg = RetrainConfig(arch=summary["genotype"], dataset=scfg.dataset,
                                 data_root=scfg.data_root, size=scfg.size,
                                 channels=cfg.retrain_channels, cells=cfg.retrain_cells,
                                 epochs=cfg.retrain_epochs, seed=seed, device=scfg.device)
            rsum = finished_or_run(retrain, rcfg, run.path / "retrain" / name,
                                   progress_bar=progress_bar)
            record["test_acc"] = rsum["test_acc"]
            record["params"] = rsum["params"]
        records.append(record)
        run.log({k: v for k, v in record.items() if not k.endswith(("_curve", "_steps"))})

    result = {"records": records, "per_reg": aggregate(records, cfg.regs)}
    write_json(run.file("bench.json"), result)
    atomic_write_bytes(run.file("bench.md"), bench_markdown(result).encode())
    run.save_figure(plot_bench(records, cfg.regs), "bench.png")
    run.write_summary(result["per_reg"])
    return result


def cell_agreement(genotypes: list[str]) -> float | None:
    """Mean fraction of the 6 edges on which two derived cells agree, over all seed pairs."""
    from genlab.nas.genotype import Genotype

    cells = [Genotype.from_string(g).edges() for g in genotypes]
    pairs = list(itertools.combinations(cells, 2))
    if not pairs:
        return None
    same = [sum(a[e] == b[e] for e in NB201_EDGES) / len(NB201_EDGES) for a, b in pairs]
    return sum(same) / len(same)


def aggregate(records: list[dict], regs: list[str]) -> dict:
    """Per regulariser: mean and std of every metric, cell agreement across seeds."""
    out = {}
    for reg in regs:
        rows = [r for r in records if r["reg"] == reg]
        agg = {"runs": len(rows), "agreement": cell_agreement([r["genotype"] for r in rows])}
        for m in METRICS:
            vals = [r[m] for r in rows if r.get(m) is not None]
            if vals:
                agg[f"{m}_mean"] = statistics.fmean(vals)
                agg[f"{m}_std"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
        out[reg] = agg
    return out


def bench_rows(result: dict) -> tuple[list[dict], list[dict]]:
    """Rows of the per-regulariser summary table and of the per-run table."""
    runs = [{"reg": r["reg"], "seed": r["seed"],
             "genotype": "`" + r["genotype"].replace("|", "\\|") + "`",  # pipes escaped for tables
             "p-free": r["param_free_ops"], "entropy": r["mean_entropy"],
             "C10": r.get("cifar10"), "C100": r.get("cifar100"), "IN16": r.get("imagenet16"),
             "digits test": r.get("test_acc")} for r in result["records"]]
    summ = []
    for reg, a in result["per_reg"].items():
        def pm(m, d=2, a=a):
            return f"{a[m + '_mean']:.{d}f} ± {a[m + '_std']:.{d}f}" if m + "_mean" in a else "-"

        summ.append({"reg": reg, "runs": a["runs"], "C10": pm("cifar10"), "C100": pm("cifar100"),
                     "IN16": pm("imagenet16"), "p-free ops": pm("param_free_ops", 1),
                     "entropy": pm("mean_entropy", 3), "agreement": a["agreement"],
                     "digits test": pm("test_acc"), "search s": pm("search_seconds", 0)})
    return summ, runs


def bench_markdown(result: dict) -> str:
    """Per-regulariser summary table and per-run table, in Markdown."""
    summ, runs = bench_rows(result)
    return ("### Per regulariser (mean ± std over seeds)\n\n" + markdown_table(summ, digits=2)
            + "\n### Per run\n\n" + markdown_table(runs, digits=2))


def plot_bench(records: list[dict], regs: list[str]):
    """Entropy and parameter-free-op curves per regulariser, and CIFAR-10 accuracy per run."""
    fig, axes = figure(ncols=3, width=4.2, height=3.2)
    palette = ["tab:red", "tab:blue", "tab:green", "tab:purple", "tab:orange"]
    colors = {reg: palette[i % len(palette)] for i, reg in enumerate(regs)}
    for r in records:
        c = colors.get(r["reg"], "k")
        axes[0, 0].plot(r["curve_steps"], r["entropy_curve"], c=c, alpha=0.7,
                        label=r["reg"] if r["seed"] == records[0]["seed"] else None)
        axes[0, 1].plot(r["curve_steps"], r["param_free_curve"], c=c, alpha=0.7)
    axes[0, 0].set_title("mean edge entropy")
    axes[0, 0].legend(fontsize=8)
    axes[0, 1].set_title("parameter-free ops in argmax")
    for ax in axes[0, :2]:
        ax.set_xlabel("step")
    ax = axes[0, 2]
    for i, reg in enumerate(regs):
        vals = [r.get("cifar10") for r in records if r["reg"] == reg and r.get("cifar10")]
        ax.scatter([i] * len(vals), vals, c=colors.get(reg, "k"))
    ax.set_xticks(range(len(regs)), regs)
    ax.set_title("NB201 CIFAR-10 test acc. of the derived cell")
    fig.tight_layout()
    return fig
