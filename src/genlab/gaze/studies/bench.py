"""`genlab gaze bench`: MoEGaze against the baseline in the synthetic worlds.

The bench is a list of run specs (genlab.gaze.studies.runs), each a run folder under
``out/runs``; finished runs are skipped when it is rerun and interrupted ones resumed.
For every world (genlab.gaze.protocol.WORLDS) and seed:

* each source: baseline and MoEGaze on all of its training data and on 10% of it, each
  tested on the held-out source subjects and on *both* of the source's targets;
* reference rows: a baseline trained on another population of each target (the
  in-domain reference) and, in the appearance world, the oracle gate: MoEGaze routed by
  the true appearance cluster (one expert per cluster), judged on held-out source subjects
  against the baseline, before any target figure is read;
* the control world's two targets (label shift only, capture shift only) at 100%.

Every run of a seed shares initialisation of the shared parts and batch order, so
differences are paired by seed; intervals bootstrap over seeds and test subjects
(genlab.gaze.studies.stats). Nothing is selected on targets: every setting is fixed in advance.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from genlab.core.errors import ConfigError, require_positive
from genlab.core.runs import write_json
from genlab.core.sweep import RunSpec
from genlab.gaze.protocol import WORLDS, SyntheticCache
from genlab.gaze.studies.runs import as_seed_list, check_seeds, run_study, train_spec
from genlab.gaze.studies.tables import bench_tables, plot_main
from genlab.gaze.synth.domains import get_domain
from genlab.gaze.train import GazeTrainConfig

__all__ = ["BenchConfig", "bench_specs", "run_bench"]


@dataclass
class BenchConfig:
    """Sizes of the bench (defaults: the tables of docs/results.md).

    ``seeds``: the seeds of the compared runs, ``reference_seeds`` those of the
    trained-on-target references (lists; an int n, as before, means seeds 0..n-1).
    """

    worlds: list[str] = field(default_factory=lambda: list(WORLDS))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    reference_seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    steps: int = 300
    batch_size: int = 64
    train_count: int = 3000
    test_count: int = 1000
    size: list[int] = field(default_factory=lambda: [32, 48])
    width: int = 8
    small_fraction: float = 0.1
    data_seed: int = 0
    workers: int = 2
    n_boot: int = 2000
    device: str = "cpu"
    threads: int = 1  # torch threads of each run (0: torch's default)
    # MoEGaze's appearance sub-datasets and router input (its runs only; the oracle keeps
    # the defaults): genlab.gaze.models.subgroups
    grouping: str = "none"
    router_input: str = "style"

    def __post_init__(self) -> None:
        self.seeds = as_seed_list(self.seeds)
        self.reference_seeds = as_seed_list(self.reference_seeds)

    def validate(self) -> None:
        for w in self.worlds:
            WORLDS.canonical(w)
        check_seeds("seeds", self.seeds)
        check_seeds("reference_seeds", self.reference_seeds)
        for name in ("steps", "batch_size", "train_count",
                     "test_count", "width", "workers", "n_boot"):
            require_positive(name, getattr(self, name))
        require_positive("threads", self.threads, allow_zero=True)
        GazeTrainConfig(grouping=self.grouping, router_input=self.router_input).validate()
        if not 0 < self.small_fraction < 1:
            raise ConfigError(f"small_fraction must be in (0, 1), got {self.small_fraction}")

    @classmethod
    def quick(cls) -> BenchConfig:
        """The appearance world only, seeds 0 and 1, short runs: a smoke version in minutes."""
        return cls(worlds=["appearance"], seeds=[0, 1], reference_seeds=[0], steps=60,
                   train_count=800, test_count=300, workers=1, n_boot=500)

    def base(self) -> GazeTrainConfig:
        return GazeTrainConfig(
            steps=self.steps, batch_size=self.batch_size, train_count=self.train_count,
            test_count=self.test_count, size=list(self.size), width=self.width,
            data_seed=self.data_seed, device=self.device, threads=self.threads,
            eval_every=100,
        )


def sources_of(world: str) -> dict[str, list[str]]:
    """Each source of a world with the targets of its tasks (in task order)."""
    out: dict[str, list[str]] = {}
    for source, target in WORLDS.get(world).values():
        out.setdefault(source, []).append(target)
    return out


def clusters_of(domain: str) -> int:
    return len(get_domain(domain).clusters)


def bench_specs(cfg: BenchConfig, out: str | Path) -> list[RunSpec]:
    """Every run of the bench (seed-major, so a partial bench covers every task)."""
    cfg.validate()
    runs = Path(out) / "runs"
    base, specs = cfg.base(), []
    cache = SyntheticCache(Path(out) / "data")

    def add(name: str, **kw) -> None:
        specs.append(train_spec(name, replace(base, **kw), runs / name, cache=cache,
                                plots=False))

    for seed in sorted({*cfg.seeds, *cfg.reference_seeds}):
        for world in cfg.worlds:
            fractions = (1.0,) if world == "control" else (1.0, cfg.small_fraction)
            for source, targets in sources_of(world).items() if seed in cfg.seeds else ():
                for model in ("baseline", "moegaze"):
                    variant = ({"grouping": cfg.grouping, "router_input": cfg.router_input}
                               if model == "moegaze" else {})
                    for fr in fractions:
                        add(f"{world}__{source}__{model}__f{fr:g}__s{seed}", model=model,
                            source=source, targets=targets, fraction=fr, seed=seed,
                            **variant)
                k = clusters_of(source)
                if k:
                    add(f"{world}__{source}__oracle__f1__s{seed}", model="moegaze",
                        routing="oracle", experts=k, source=source, targets=targets, seed=seed)
            if seed in cfg.reference_seeds:
                for target in dict.fromkeys(t for _, t in WORLDS.get(world).values()):
                    add(f"{world}__{target}__reference__f1__s{seed}", model="baseline",
                        source=target, targets=[target], seed=seed)
    return specs


def run_bench(cfg: BenchConfig, out: str | Path, *, progress_bar: bool | None = None,
              executor: str = "local", address: str | None = None) -> dict:
    """Run (or resume) every spec of the bench; write bench.json, bench.md and bench_main.png."""
    out = Path(out)
    specs = bench_specs(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "bench_config.json", asdict(cfg))
    t0, cpu0 = time.perf_counter(), time.process_time()
    results = run_study(specs, workers=cfg.workers, progress_bar=progress_bar,
                        description="gaze bench", executor=executor, address=address)
    seconds = time.perf_counter() - t0
    tables = bench_tables(specs, results, cfg)
    write_json(out / "bench.json", {
        "config": asdict(cfg),
        "tables": {k: v for k, v in tables.items() if k != "markdown"},
        "runs": {s.name: {"folder": str(s.out), **_row(results[s.name])} for s in specs},
        "wall_seconds_this_invocation": seconds,
        "main_process_cpu_seconds": time.process_time() - cpu0,
        "train_cpu_seconds_all_runs": sum(r.get("train_cpu_seconds", 0.0)
                                          for r in results.values()),
    })
    (out / "bench.md").write_text(tables["markdown"])
    plot_main(tables, out / "bench_main.png")
    tables["seconds"] = seconds
    return tables


def _row(summary: dict) -> dict:
    keep = ("model", "source", "target_names", "seed", "fraction", "val_mean_deg",
            "constant_val_mean_deg", "target_mean_deg", "train_seconds", "train_cpu_seconds")
    return {k: summary.get(k) for k in keep}
