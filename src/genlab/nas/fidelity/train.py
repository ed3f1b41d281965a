"""`genlab nas fidelity`: retrain a draw of NB201 cells on a proxy; tau against the table.

Each drawn cell (genlab.nas.fidelity.draw) is trained from scratch on the proxy with
genlab.nas.retrain at the budget the options give (``eval_on="val"``: fit the train half,
score the val half; the test split is never read), once per seed of ``--seeds``; with
``--repeat K`` only the first K cells (in the interleaved order below) get the seeds after
the first, the rest one training (the protocol's rule for a proxy above 30 CPU-s a cell).
Every training is one run of genlab.core.sweep (its own folder under trainings/: reused when
finished, resumed when started); as each ends, its row (cell, seed, validation accuracy,
parameters, CPU seconds of the training's process) is appended to cells.csv, the file the
results are computed from: ``--resume`` skips every training already in cells.csv, so a
copy of a run's config.json and cells.csv in a new folder continues it.

Order: the cells of the two parts of the draw interleaved in proportion (one few-parameter-
free cell after every three uniform ones for the protocol's 150 + 50), each cell's seeds
back to back, so a run cut short holds complete cells of both parts.

The report (genlab.nas.fidelity.report, written as fidelity.md, taus.json and fidelity.png
when the NB201 table is given): tau of the proxy's accuracy against CIFAR-10 (and CIFAR-100,
ImageNet16-120) over all cells and each part, with bootstrap intervals; the seed-to-seed tau
(the proxy's noise ceiling); sanity rows: a random score, the parameter count of the proxy's
networks, the constant predictor (the majority class's accuracy, and how many cells beat
it), and NB201's CIFAR-100 column (the ceiling a stand-in can hope for); with ``--scores``
(a `genlab nas score` scores.csv over the same cells) each zero-cost proxy's tau and the
paired difference proxy minus it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option, option_like
from genlab.core.report import figure, markdown_table
from genlab.core.runs import RunDir
from genlab.core.storage.files import atomic_write_bytes, write_json
from genlab.core.storage.rows import append_row, read_rows, start_from
from genlab.core.sweep import FAILED, RunSpec, run_sweep
from genlab.nas.fidelity.draw import FEW_GROUP, UNIFORM_GROUP, CellsOptions, DrawnCell
from genlab.nas.fidelity.report import paired_row, tau_row
from genlab.nas.retrain import RetrainConfig, retrain
from genlab.nas.spaces import resolve_table

CELLS = "cells.csv"
FIELDS = ["index", "arch", "group", "param_free", "seed", "val_acc", "constant_acc", "params",
          "cpu_seconds"]
RESUME_FREE = ("nb201_table", "scores", "executor", "workers", "threads", "train", "cells_from")


@dataclass
class FidelityConfig(CellsOptions):
    """Options of `genlab nas fidelity`: the cells, the proxy (data, network, budget), seeds."""

    dataset: str = option_like(RetrainConfig, "dataset")
    data_root: str | None = option_like(RetrainConfig, "data_root")
    size: int | None = option_like(RetrainConfig, "size")
    channels: int | None = option_like(RetrainConfig, "channels")
    cells: int | None = option_like(RetrainConfig, "cells")
    epochs: int | None = option_like(RetrainConfig, "epochs")
    batch_size: int = option_like(RetrainConfig, "batch_size")
    lr: float | None = option_like(RetrainConfig, "lr")
    weight_decay: float | None = option_like(RetrainConfig, "weight_decay")
    augment: bool = option_like(RetrainConfig, "augment")
    seeds: list[int] = option(factory=lambda: [0, 1], parse="seeds",
                              help="Retraining seeds of every cell (their mean is its score).")
    repeat: int | None = option(None, help="Only the first K cells get the seeds after the "
                                "first (default: every cell).", ge=0)
    nb201_table: str | None = option(None, help="NB201 accuracy CSV (default: "
                                     "$GENLAB_NB201_TABLE): the report; without it, the "
                                     "trainings only.")
    scores: str | None = option(None, help="scores.csv of `genlab nas score` over the same "
                                "cells: the zero-cost proxies' rows in the report.")
    executor: str = option("process", help="process: --workers processes; inline: in this "
                           "process.", choices=("process", "inline"))
    workers: int = option(1, help="Trainings run at the same time.", gt=0)
    threads: int = option(1, help="torch CPU threads of each training.", gt=0)
    train: bool = option(True, help="--no-train: only the report of what cells.csv holds "
                         "(a partial run, or a copy of one; nothing is trained).")
    cells_from: str | None = option(None, help="Begin --out's cells.csv as a copy of this "
                                    "file (another run's, or one committed beside a page): "
                                    "its trainings are reported, and the rest trained in "
                                    "--out unless --no-train; the file is not touched.")

    def validate(self) -> None:
        check_options(self)
        if not self.seeds:
            raise ConfigError("--seeds names no seed")
        cells = self.selected_cells()
        self.retrain_config(cells[0], self.seeds[0]).validate()

    def retrain_config(self, cell: DrawnCell, seed: int) -> RetrainConfig:
        return RetrainConfig(arch=cell.arch, dataset=self.dataset, data_root=self.data_root,
                             size=self.size, channels=self.channels, cells=self.cells,
                             epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                             weight_decay=self.weight_decay, augment=self.augment, seed=seed,
                             eval_on="val", threads=self.threads)

    def resolved(self) -> FidelityConfig:
        """Every None budget option filled as the retraining fills it (the space's recipe)."""
        done = self.retrain_config(self.selected_cells()[0], self.seeds[0]).resolved()
        return replace(self, **{k: getattr(done, k) for k in (
            "size", "channels", "cells", "epochs", "lr", "weight_decay")})


def interleaved(cells: list[DrawnCell]) -> list[DrawnCell]:
    """The draw's parts interleaved in proportion (module docstring); given cells in order."""
    uniform = [c for c in cells if c.group == UNIFORM_GROUP]
    few = [c for c in cells if c.group == FEW_GROUP]
    if not uniform or not few:
        return list(cells)
    out, f = [], 0
    for k, cell in enumerate(uniform, start=1):
        out.append(cell)
        while f < len(few) and (f + 1) * len(uniform) <= k * len(few):
            out.append(few[f])
            f += 1
    return out + few[f:]


def planned(cfg: FidelityConfig) -> list[tuple[DrawnCell, int]]:
    """(cell, seed) of every training, in run order."""
    repeat = len(cfg.selected_cells()) if cfg.repeat is None else cfg.repeat
    return [(cell, seed) for k, cell in enumerate(interleaved(cfg.selected_cells()))
            for seed in (cfg.seeds if k < repeat else cfg.seeds[:1])]


def train_cell(cfg: RetrainConfig, out, *, resume: bool = False, progress_bar=None) -> dict:
    """One training (a sweep target): its summary with the CPU seconds of this process."""
    start = time.process_time()
    summary = retrain(cfg, out, resume=resume, progress_bar=progress_bar)
    return {**summary, "cpu_seconds": time.process_time() - start, "resumed": resume}


def run_fidelity(cfg: FidelityConfig, out, *, resume: bool = False, progress_bar=None) -> dict:
    """Every planned training not yet in cells.csv, then the report (module docstring)."""
    cfg.validate()
    cfg = cfg.resolved()
    table = resolve_table(cfg.nb201_table)
    run = RunDir(out, asdict(cfg), resume=resume, resume_free=RESUME_FREE)
    path = run.file(CELLS)
    start_from(path, cfg.cells_from, FIELDS)
    done = {(r["arch"], int(r["seed"])) for r in read_rows(path, FIELDS)}
    jobs = {f"cell{cell.index:05d}-s{seed}": (cell, seed) for cell, seed in planned(cfg)
            if (cell.arch, seed) not in done and cfg.train}
    specs = [RunSpec(name, f"{__name__}:train_cell", cfg.retrain_config(cell, seed),
                     run.file("trainings") / name) for name, (cell, seed) in jobs.items()]

    def record(outcome) -> None:
        if outcome.status == FAILED:
            return
        cell, seed = jobs[outcome.name]
        s = outcome.summary
        append_row(path, FIELDS, {
            "index": cell.index, "arch": cell.arch, "group": cell.group,
            "param_free": cell.param_free, "seed": seed, "val_acc": repr(s["val_acc"]),
            "constant_acc": repr(s["constant_val_acc"]), "params": s["params"],
            "cpu_seconds": "" if s.get("resumed", True) else f"{s['cpu_seconds']:.2f}"})

    outcomes = run_sweep(specs, executor=cfg.executor, workers=cfg.workers,
                         threads=cfg.threads, progress_bar=progress_bar,
                         description="fidelity trainings", on_outcome=record,
                         status=run.file("sweep.json"))
    failed = [o for o in outcomes if o.status == FAILED]
    rows = read_rows(path, FIELDS)
    result = {"trainings": len(rows), "planned": len(planned(cfg)), "failed": len(failed),
              **cost(rows)}
    if failed:
        result["first_failure"] = f"{failed[0].name}: {failed[0].error}"
    if table is not None and rows:
        report = fidelity_report(rows, table, cfg.scores)
        result.update(report)
        write_json(run.file("taus.json"), report)
        atomic_write_bytes(run.file("fidelity.md"), fidelity_markdown(cfg, result).encode())
        run.save_figure(plot_fidelity(per_cell(rows, table), cfg.dataset), "fidelity.png")
    run.write_summary(result)
    run.close()
    return result


def cost(rows: list[dict]) -> dict:
    """CPU seconds per training (those measured whole: a resumed training's are partial)."""
    cpu = [float(r["cpu_seconds"]) for r in rows if r["cpu_seconds"]]
    return {"cpu_seconds_per_training": statistics.fmean(cpu) if cpu else None,
            "cpu_hours": sum(cpu) / 3600 if cpu else None}


def per_cell(rows: list[dict], table) -> list[dict]:
    """One record per cell: its accuracies by seed, their mean, and its NB201 accuracies."""
    cells: dict[str, dict] = {}
    for r in rows:
        c = cells.setdefault(r["arch"], {"arch": r["arch"], "group": r["group"],
                                         "param_free": int(r["param_free"]),
                                         "params": int(r["params"]), "accs": {},
                                         "constant": float(r["constant_acc"]),
                                         **table.lookup(r["arch"])})
        c["accs"][int(r["seed"])] = float(r["val_acc"])
    for c in cells.values():
        c["acc"] = statistics.fmean(c["accs"].values())
    return list(cells.values())


def fidelity_report(rows: list[dict], table, scores: str | None = None) -> dict:
    """The taus (module docstring): ``tau`` rows and ``paired`` differences, per cell group."""
    cells = per_cell(rows, table)
    seeds = sorted({s for c in cells for s in c["accs"]})
    full = [c for c in cells if len(c["accs"]) == len(seeds)]
    first = seeds[0]
    # a proxy whose cells do not all have every seed is scored by its first seed
    key = "acc" if len(full) == len(cells) else "first"
    for c in cells:
        c["first"] = c["accs"].get(first, c["acc"])
    zero = _zero_cost_scores(scores, cells)
    taus, paired = [], []
    for group in ("all", UNIFORM_GROUP, FEW_GROUP):
        chosen = [c for c in cells if group == "all" or c["group"] == group]
        if len(chosen) < 4:
            continue
        c10 = [c["cifar10"] for c in chosen]
        proxy = [c[key] for c in chosen]
        label = "proxy (mean of seeds)" if key == "acc" else f"proxy (seed {first})"
        rows_ = [tau_row(label, proxy, c10),
                 tau_row("proxy vs CIFAR-100", proxy, [c["cifar100"] for c in chosen]),
                 tau_row("proxy vs ImageNet16-120", proxy, [c["imagenet16"] for c in chosen])]
        both = [c for c in chosen if len(c["accs"]) >= 2]
        if len(both) >= 4:
            a, b = seeds[0], seeds[1]
            rows_.append(tau_row(f"noise ceiling: seed {a} vs seed {b}",
                                 [c["accs"][a] for c in both], [c["accs"][b] for c in both]))
        rand = np.random.default_rng(2).random(len(chosen))
        rows_ += [tau_row("sanity: random score", rand, c10),
                  tau_row("sanity: parameter count (proxy network)",
                          [c["params"] for c in chosen], c10),
                  tau_row("ceiling: NB201 CIFAR-100", [c["cifar100"] for c in chosen], c10)]
        rivals = {"parameter count": [c["params"] for c in chosen]}
        for name, values in zero.items():
            x = [values[c["arch"]] for c in chosen]
            rows_.append(tau_row(f"zero-cost: {name}", x, c10))
            rivals[name] = x
        for name, x in rivals.items():
            paired.append({"group": group, **paired_row(f"proxy - {name}", proxy, x, c10)})
        taus += [{"group": group, **r} for r in rows_]
    constant = statistics.fmean(c["constant"] for c in cells)
    return {"taus": taus, "paired": paired, "cells": len(cells), "seeds": seeds,
            "scored_by": key, "constant_acc": constant,
            "cells_above_constant": sum(c[key] > constant + 1e-4 for c in cells)}


def _zero_cost_scores(scores: str | None, cells: list[dict]) -> dict[str, dict[str, float]]:
    """proxy name -> {arch: score} from a scores.csv covering every cell (none without it)."""
    if not scores:
        return {}
    rows = read_rows(Path(scores))
    if not rows:
        raise ConfigError(f"--scores {scores}: no scores (run `genlab nas score` first)")
    by_arch = {r["arch"]: r for r in rows}
    missing = [c["arch"] for c in cells if c["arch"] not in by_arch]
    if missing:
        raise ConfigError(f"--scores {scores} lacks {len(missing)} of the cells, e.g. "
                          f"{missing[0]}: score the same draw")
    names = [k for k in rows[0] if k not in ("index", "arch", "group", "param_free", "seconds")]
    return {n: {a: float(r[n]) for a, r in by_arch.items()} for n in names}


def fidelity_markdown(cfg: FidelityConfig, result: dict) -> str:
    cpu, hours = result.get("cpu_seconds_per_training"), result.get("cpu_hours")
    head = (f"Proxy: `{cfg.dataset}` at {cfg.size}x{cfg.size}, C={cfg.channels}, "
            f"N={cfg.cells}, {cfg.epochs} epochs, batch {cfg.batch_size}, augment "
            f"{'on' if cfg.augment else 'off'}; {result['cells']} cells, "
            f"{result['trainings']} of {result['planned']} trainings, seeds {result['seeds']}; "
            f"CPU per training {'-' if cpu is None else f'{cpu:.1f}'} s, "
            f"{'-' if hours is None else f'{hours:.2f}'} CPU-hours in all (the trainings "
            f"measured whole). Constant predictor "
            f"{result['constant_acc']:.2f}%: {result['cells_above_constant']} of "
            f"{result['cells']} cells above it.\n\n")
    return (head + markdown_table(result["taus"], digits=3) + "\n"
            + markdown_table(result["paired"], digits=3))


def plot_fidelity(cells: list[dict], proxy: str):
    """Proxy accuracy against NB201 CIFAR-10 (colour: parameter-free edges), seed vs seed."""
    fig, axes = figure(ncols=2, width=4.6, height=3.8)
    ax = axes[0, 0]
    sc = ax.scatter([c["cifar10"] for c in cells], [c["acc"] for c in cells],
                    c=[c["param_free"] for c in cells], cmap="viridis", s=14)
    fig.colorbar(sc, ax=ax, label="parameter-free edges")
    ax.set_xlabel("NB201 CIFAR-10 test accuracy (%)")
    ax.set_ylabel(f"{proxy} val accuracy (%)")
    ax.set_title("proxy vs target ranking")
    ax = axes[0, 1]
    both = [c for c in cells if len(c["accs"]) >= 2]
    seeds = sorted({s for c in both for s in c["accs"]})[:2]
    if both:
        ax.scatter([c["accs"][seeds[0]] for c in both], [c["accs"][seeds[1]] for c in both],
                   s=14)
        ax.set_xlabel(f"seed {seeds[0]} (%)")
        ax.set_ylabel(f"seed {seeds[1]} (%)")
    ax.set_title("the proxy's own noise")
    fig.tight_layout()
    return fig
