"""`genlab gaze bench`: the MoEGaze results table on the synthetic cross-domain protocol.

Runs (each a run folder under ``out/runs``; a finished one has summary.json and is
skipped when the bench is rerun, a killed one is resumed):

* every task x seed: baseline and MoEGaze on all source data and on 10% of it;
* ablations on ``ablation_task``: number of experts K and the routing mode.

Data are rendered once per domain (``data_seed``) and shared by every run; the seed
changes initialisation, batch order and the 10% subsample.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from genlab.core.progress import progress
from genlab.core.report import figure, markdown_table
from genlab.core.runs import SUMMARY, read_json, write_json
from genlab.gaze.protocol import TASKS, synthetic_task, with_fraction
from genlab.gaze.train import GazeTrainConfig, train_gaze


@dataclass
class BenchConfig:
    """Sizes of the benchmark (defaults: the README table, ~25 minutes on 2 CPU cores)."""

    tasks: list[str] = field(default_factory=lambda: list(TASKS))
    seeds: int = 3
    epochs: int = 5
    train_count: int = 1000
    test_count: int = 400
    size: list[int] = field(default_factory=lambda: [32, 48])
    width: int = 8
    small_fraction: float = 0.1
    ablation_task: str = "E->M"
    ablation_experts: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    ablation_routings: list[str] = field(
        default_factory=lambda: ["soft", "hard-train-soft-infer", "hard"]
    )
    ablation_temperatures: list[float] = field(default_factory=lambda: [0.02, 0.1, 1.0])
    ablation_seeds: int = 3
    data_seed: int = 0
    device: str = "cpu"

    @classmethod
    def quick(cls) -> BenchConfig:
        """One task, one seed, no ablations: a smoke version in about a minute."""
        return cls(
            tasks=["E->M"],
            seeds=1,
            epochs=3,
            train_count=800,
            test_count=300,
            width=8,
            ablation_experts=[],
            ablation_routings=[],
            ablation_seeds=0,
        )

    def base(self) -> GazeTrainConfig:
        return GazeTrainConfig(
            epochs=self.epochs,
            train_count=self.train_count,
            test_count=self.test_count,
            size=list(self.size),
            width=self.width,
            data_seed=self.data_seed,
            device=self.device,
        )


def bench_runs(cfg: BenchConfig) -> list[tuple[str, str, GazeTrainConfig]]:
    """(run name, task, training config) of every training the bench needs, deduplicated."""
    base, runs = cfg.base(), {}

    def add(task: str, **kw):
        source, target = TASKS[task]
        c = replace(base, source=source, target=target, **kw)
        name = (
            f"{task.replace('->', '2')}_{c.model}_K{c.experts}_{c.routing}"
            f"_f{c.fraction:g}_s{c.seed}"
        )
        if c.temperature != base.temperature:
            name += f"_T{c.temperature:g}"
        runs.setdefault(name, (name, task, c))

    for seed in range(max(cfg.seeds, cfg.ablation_seeds)):  # seed-major: partial = all tasks
        for task in cfg.tasks if seed < cfg.seeds else []:
            for model in ("baseline", "moegaze"):
                for fraction in (1.0, cfg.small_fraction):
                    add(task, model=model, fraction=fraction, seed=seed)
        if seed < cfg.ablation_seeds:
            for k in cfg.ablation_experts:
                add(cfg.ablation_task, model="moegaze", experts=k, seed=seed)
            for routing in cfg.ablation_routings:
                add(cfg.ablation_task, model="moegaze", routing=routing, seed=seed)
            for temp in cfg.ablation_temperatures:
                add(cfg.ablation_task, model="moegaze", temperature=temp, seed=seed)
    return list(runs.values())


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _pm(values: list[float]) -> str:
    m, s = _mean_std(values)
    return "-" if m is None else f"{m:.2f} ± {s:.2f}"


def _select(rows, key: str = "target_mean_deg", **kw) -> list[float]:
    return [
        r[key] for r in rows if all(r.get(k) == v for k, v in kw.items()) and r.get(key) is not None
    ]


def _router_row(summary: dict) -> dict:
    """How sharply MoEGaze routes: largest mean router weight, busiest expert's share."""
    router = summary.get("router", {})
    if not router.get("source"):
        return {}
    return {
        "max_mean_weight_source": max(router["source"]["load"]),
        "busiest_top1_share_target": max(router["target"]["top1_share"]),
        "subject_purity_source": router["source"]["subject_purity"],
    }


def _router_cols(rows, **kw) -> dict:
    """Router-sharpness columns (mean over seeds) for the ablation tables."""
    out = {}
    for key, label in (
        ("max_mean_weight_source", "max mean weight (source)"),
        ("busiest_top1_share_target", "busiest expert share (target)"),
    ):
        vals = _select(rows, key=key, **kw)
        out[label] = statistics.fmean(vals) if vals else None
    return out


def tables(rows: list[dict], cfg: BenchConfig) -> dict:
    """Main, ablation-K and routing tables (Markdown) and the average improvement."""
    d = cfg.base()
    main, improvements = [], []
    for task in cfg.tasks:
        common = {
            "task": task,
            "experts": d.experts,
            "routing": d.routing,
            "temperature": d.temperature,
        }
        b = _select(rows, model="baseline", fraction=1.0, **common)
        m = _select(rows, model="moegaze", fraction=1.0, **common)
        m10 = _select(rows, model="moegaze", fraction=cfg.small_fraction, **common)
        b10 = _select(rows, model="baseline", fraction=cfg.small_fraction, **common)
        imp = (
            None
            if not (b and m)
            else 100 * (statistics.fmean(b) - statistics.fmean(m)) / statistics.fmean(b)
        )
        if imp is not None:
            improvements.append(imp)
        main.append(
            {
                "task": task,
                "baseline 100%": _pm(b),
                "MoEGaze 100%": _pm(m),
                "MoEGaze vs baseline": "-" if imp is None else f"{imp:+.1f}%",
                "MoEGaze 10%": _pm(m10),
                "baseline 10%": _pm(b10),
            }
        )
    avg = statistics.fmean(improvements) if improvements else None
    t = cfg.ablation_task
    default = {"experts": d.experts, "routing": d.routing, "temperature": d.temperature}

    def ablation(column: str, key: str, values) -> list[dict]:
        """One row per value of ``key``, the other MoEGaze settings at their defaults."""
        out = []
        for v in values:
            sel = {"task": t, "model": "moegaze", "fraction": 1.0, **default, key: v}
            out.append({column: v, "target error (deg)": _pm(_select(rows, **sel)),
                        **_router_cols(rows, **sel)})
        return out

    k_rows = ablation("K", "experts", cfg.ablation_experts)
    r_rows = ablation("routing", "routing", cfg.ablation_routings)
    t_rows = ablation("temperature", "temperature", cfg.ablation_temperatures)
    md = [
        "Mean angular error on the target domain (degrees, mean ± std over "
        f"{cfg.seeds} seeds; lower is better).\n",
        markdown_table(main),
    ]
    if avg is not None:
        md.append(
            f"\nAverage relative error reduction of MoEGaze over the baseline: "
            f"{avg:+.1f}% (the paper reports 27.6% on real data).\n"
        )
    if k_rows:
        md += [f"\nNumber of experts K on {t} (routing {d.routing}):\n", markdown_table(k_rows)]
    if r_rows:
        md += [f"\nRouting mode on {t} (K={d.experts}):\n", markdown_table(r_rows)]
    if t_rows:
        md += [
            f"\nRouter temperature on {t} (K={d.experts}, {d.routing}; explores the "
            "router's sharpness, not used to pick defaults):\n",
            markdown_table(t_rows),
        ]
    return {
        "main": main,
        "experts": k_rows,
        "routing": r_rows,
        "temperature": t_rows,
        "average_improvement_pct": avg,
        "markdown": "\n".join(md),
    }


def plot_main(rows: list[dict], cfg: BenchConfig):
    """Grouped bars: target error per task for baseline / MoEGaze at 100% and 10% data."""
    fig, axes = figure(width=7.0, height=3.4)
    ax, d = axes[0, 0], cfg.base()
    groups = [
        ("baseline", 1.0),
        ("moegaze", 1.0),
        ("baseline", cfg.small_fraction),
        ("moegaze", cfg.small_fraction),
    ]
    width = 0.8 / len(groups)
    for g, (model, frac) in enumerate(groups):
        stats = [
            _mean_std(
                _select(
                    rows,
                    task=t,
                    model=model,
                    fraction=frac,
                    experts=d.experts,
                    routing=d.routing,
                    temperature=d.temperature,
                )
            )
            for t in cfg.tasks
        ]
        xs = [i + (g - (len(groups) - 1) / 2) * width for i in range(len(cfg.tasks))]
        ax.bar(
            xs,
            [s[0] or 0 for s in stats],
            width,
            yerr=[s[1] or 0 for s in stats],
            label=f"{model} {frac:.0%}",
            capsize=2,
        )
    ax.set_xticks(range(len(cfg.tasks)), cfg.tasks)
    ax.set(ylabel="target mean angular error (deg)", title="cross-domain gaze error")
    ax.legend(fontsize=7)
    return fig


def run_bench(cfg: BenchConfig, out: str | Path, *, progress_bar: bool | None = None) -> dict:
    """Run (or resume) every training of the bench; write bench.json, bench.md and plots."""
    out = Path(out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    write_json(out / "bench_config.json", asdict(cfg))
    runs = bench_runs(cfg)
    tasks_data, rows = {}, []
    t0, cpu0 = time.perf_counter(), time.process_time()
    with progress(len(runs), "gaze bench", progress_bar) as tick:
        for name, task, c in runs:
            folder = out / "runs" / name
            if (folder / SUMMARY).exists():
                summary = read_json(folder / SUMMARY)
            else:
                if task not in tasks_data:
                    source, target = TASKS[task]
                    tasks_data[task] = synthetic_task(
                        source,
                        target,
                        train_count=cfg.train_count,
                        test_count=cfg.test_count,
                        size=cfg.size,
                        data_seed=cfg.data_seed,
                    )
                data = with_fraction(tasks_data[task], c.fraction, c.seed)
                _, summary = train_gaze(c, data, folder, resume=folder.exists(), progress_bar=False)
            rows.append(
                {
                    "name": name,
                    "task": task,
                    "model": c.model,
                    "experts": c.experts,
                    "routing": c.routing,
                    "temperature": c.temperature,
                    "fraction": c.fraction,
                    "seed": c.seed,
                    "target_mean_deg": summary["target_mean_deg"],
                    "target_median_deg": summary["target_median_deg"],
                    "val_mean_deg": summary["val_mean_deg"],
                    "train_seconds": summary.get("train_seconds"),
                    **_router_row(summary),
                }
            )
            write_json(out / "bench.json", {"config": asdict(cfg), "rows": rows})
            tick(1, last=f"{name} {summary['target_mean_deg']:.2f}deg")
    result = tables(rows, cfg)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    write_json(
        out / "bench.json",
        {
            "config": asdict(cfg),
            "rows": rows,
            "tables": {k: v for k, v in result.items() if k != "markdown"},
            "wall_seconds_this_invocation": seconds,
            "cpu_seconds_this_invocation": cpu,
            "train_seconds_all_runs": sum(r["train_seconds"] or 0 for r in rows),
        },
    )
    (out / "bench.md").write_text(result["markdown"])
    fig = plot_main(rows, cfg)
    fig.savefig(out / "bench_main.png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    result["seconds"] = seconds
    return result
