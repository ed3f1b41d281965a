"""`genlab optim` study commands: standard, transfer, sensitivity, labelnoise, depth-width,
correlate. Thin wrappers over genlab.optim.studies; each prints its table and its folder.

Studies that compare optimisers share their trainings through a store folder (``--store``,
default ``trainings`` next to ``--out``): the hyper-parameter search runs once for all.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer

from genlab.cli import options
from genlab.core.errors import ConfigError

OUT = typer.Option(..., "--out", help="Run folder to write (config.json, metrics.jsonl, "
                   "summary.json, plots).")
RESUME = options.resume_option()
THREADS = options.threads_option(1)
STORE = typer.Option(None, "--store", help="Folder of the trainings, shared by the studies "
                     "(default: 'trainings' next to --out).")
OPTIMIZERS = typer.Option("sgd,sam,asam,cov,csam_identity,acsam_identity,csam",
                          help="Comma-separated optimisers (sgd is the baseline).")
EPOCHS = typer.Option(None, help="Epochs (default per architecture: cnn 30, transformer 40).")
WIDTH = typer.Option(None, help="Width (default per architecture: 32).")
DEPTH = typer.Option(None, help="Depth (default per architecture: 2).")
GRID = typer.Option("full", help="Search grid: full (9 trainings per optimiser) or tiny "
                    "(2; smoke tests only).")
SEEDS_0 = "Seed 0 is the search training (reused)."


def aligned_table(rows: Sequence[dict], columns: Sequence[str] | None = None,
                  digits: int = 5) -> str:
    """Rows as plain columns for a terminal: a header, numbers right-aligned, a missing
    cell as '-'."""
    from genlab.core.report import fmt

    columns = list(columns or rows[0])
    cells = [[fmt(row.get(c), digits) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row.get(c), (int, float)) or row.get(c) is None for row in rows)
               for c in columns]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths]), *map(line, cells)])


def floats(text: str, name: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise ConfigError(f"--{name}: expected comma-separated numbers, got {text!r}") from exc


def ints(text: str, name: str) -> list[int]:
    values = floats(text, name)
    if any(v != int(v) for v in values):
        raise ConfigError(f"--{name}: expected comma-separated integers, got {text!r}")
    return [int(v) for v in values]


def names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _show(out: Path, *tables: tuple[str, Sequence[dict], Sequence[str] | None],
          digits: int = 1) -> None:
    """Each (title, rows, columns) as an aligned table (table.md keeps the Markdown), then
    the closing line."""
    for title, rows, columns in tables:
        if title:
            typer.echo(title)
        typer.echo(aligned_table(rows, columns, digits=digits) if rows else "(no rows)")
    options.closing(out)


def standard(out: Path = OUT, resume: bool = RESUME, store: Path = STORE,
             archs: str = typer.Option("cnn,transformer", help="Architectures."),
             optimizers: str = OPTIMIZERS, seeds: str = options.seeds_option("0-2", SEEDS_0),
             epochs: int = EPOCHS, width: int = WIDTH, depth: int = DEPTH, grid: str = GRID,
             threads: int = THREADS):
    """Standard training: each optimiser tuned on validation data, test accuracy over seeds."""
    from genlab.optim.studies.standard import COLUMNS, StandardConfig, run_standard

    cfg = StandardConfig(archs=names(archs), optimizers=names(optimizers),
                         seeds=options.parse_seeds(seeds), epochs=epochs, width=width,
                         depth=depth, grid=grid, threads=threads)
    summary = run_standard(cfg, out, store=store, resume=resume)
    _show(out, *((f"{t['arch']}: test accuracy (%) over seeds {_seeds(cfg.seeds)}",
                  t["rows"] + t["sanity"], COLUMNS) for t in summary["tables"]))


def _seeds(seeds: list[int]) -> str:
    return ",".join(map(str, seeds))


def transfer(out: Path = OUT, resume: bool = RESUME, store: Path = STORE,
             arch: str = typer.Option("cnn"),
             source: str = typer.Option("digits0-4", help="Pretraining task."),
             target: str = typer.Option("digits5-9", help="Fine-tuning task."),
             per_class: int = typer.Option(10, help="Fine-tuning images per class."),
             translate: int = typer.Option(
                 2, help="Jitter of both domains: every image shifted by up to this many "
                         "pixels per axis (0: plain digits, where pretraining does not help)."),
             source_copies: int = typer.Option(
                 8, help="Shifted copies of the source's images for pretraining."),
             val_copies: int = typer.Option(
                 4, help="Shifted copies of the target's validation images that score the "
                         "fine-tuning and scratch searches."),
             target_steps: int = typer.Option(
                 300, help="Optimiser steps of every fine-tuning (and scratch) training."),
             optimizers: str = OPTIMIZERS, seeds: str = options.seeds_option("0-4"),
             epochs: int = EPOCHS, width: int = WIDTH, depth: int = DEPTH, grid: str = GRID,
             threads: int = THREADS):
    """Transfer learning: pretrain on jittered digits 0-4, fine-tune on few jittered 5-9
    (every learning rate and radius searched on validation data)."""
    from genlab.optim.studies.transfer import COLUMNS, TransferConfig, run_transfer

    cfg = TransferConfig(arch=arch, source=source, target=target, per_class=per_class,
                         translate=translate, source_copies=source_copies,
                         val_copies=val_copies,
                         target_steps=target_steps,
                         optimizers=names(optimizers), seeds=options.parse_seeds(seeds),
                         epochs=epochs, width=width, depth=depth, grid=grid, threads=threads)
    summary = run_transfer(cfg, out, store=store, resume=resume)
    _show(out, (f"target test accuracy (%) over seeds {_seeds(cfg.seeds)}",
                summary["rows"] + summary["sanity"], COLUMNS))


def sensitivity(out: Path = OUT, resume: bool = RESUME, store: Path = STORE,
                arch: str = typer.Option("transformer"), optimizers: str = OPTIMIZERS,
                seeds: str = options.seeds_option("0-2", SEEDS_0), epochs: int = EPOCHS,
                width: int = WIDTH, depth: int = DEPTH, grid: str = GRID,
                threads: int = THREADS):
    """Hyper-parameter sensitivity: accuracy over each optimiser's lr x radius grid."""
    from genlab.optim.studies.sensitivity import COLUMNS, SensitivityConfig, run_sensitivity

    cfg = SensitivityConfig(arch=arch, optimizers=names(optimizers),
                            seeds=options.parse_seeds(seeds), epochs=epochs, width=width,
                            depth=depth, grid=grid, threads=threads)
    summary = run_sensitivity(cfg, out, store=store, resume=resume)
    _show(out, ("test accuracy (%) over the grid's cells (share_within_1pt: a fraction of "
                "the cells)", summary["rows"] + summary["sanity"], COLUMNS), digits=2)


def labelnoise(out: Path = OUT, resume: bool = RESUME, store: Path = STORE,
               rates: str = typer.Option("0.2,0.4,0.6", help="Symmetric noise rates."),
               asymmetric_rates: str = typer.Option("0.4", help="Rates of the asymmetric "
                                                    "map 7->1, 4->9, 5->6, 3<->8 ('' for "
                                                    "none)."),
               optimizers: str = OPTIMIZERS, seeds: str = options.seeds_option("0-2"),
               arch: str = typer.Option("cnn"), epochs: int = EPOCHS, width: int = WIDTH,
               depth: int = DEPTH, grid: str = GRID, threads: int = THREADS):
    """Clean test accuracy of each tuned optimiser under label noise."""
    from genlab.optim.studies.labelnoise import LabelNoiseConfig, run_labelnoise

    cfg = LabelNoiseConfig(rates=floats(rates, "rates"),
                           asymmetric_rates=floats(asymmetric_rates, "asymmetric-rates"),
                           optimizers=names(optimizers), seeds=options.parse_seeds(seeds),
                           arch=arch, epochs=epochs, width=width, depth=depth, grid=grid,
                           threads=threads)
    summary = run_labelnoise(cfg, out, store=store, resume=resume)
    _show(out, (f"clean test accuracy (%) over seeds {_seeds(cfg.seeds)}", summary["table"],
                ["optimizer", *summary["settings"], "train_acc_noisy"]))


def depth_width(out: Path = OUT, resume: bool = RESUME, store: Path = STORE,
                archs: str = typer.Option("mlp,cnn"), seeds: str = options.seeds_option("0-2"),
                epochs: int = typer.Option(30), batch_size: int = typer.Option(64),
                mlp_depths: str = typer.Option("1,2,3,4"),
                mlp_widths: str = typer.Option("16,32,64,128"),
                cnn_depths: str = typer.Option("1,2,3"),
                cnn_widths: str = typer.Option("8,16,32"),
                mlp_lr: float = typer.Option(0.05), cnn_lr: float = typer.Option(0.05),
                measure_samples: int = typer.Option(256),
                measure_iterations: int = typer.Option(20), threads: int = THREADS):
    """tr Sigma, s and lambda_max against depth and width (SGD), with the gaps."""
    from genlab.optim.studies.depthwidth import (
        CELL_COLUMNS,
        DepthWidthConfig,
        run_depthwidth,
    )

    cfg = DepthWidthConfig(
        archs=names(archs), seeds=options.parse_seeds(seeds), epochs=epochs,
        batch_size=batch_size,
        depths={"mlp": ints(mlp_depths, "mlp-depths"), "cnn": ints(cnn_depths, "cnn-depths")},
        widths={"mlp": ints(mlp_widths, "mlp-widths"), "cnn": ints(cnn_widths, "cnn-widths")},
        lrs={"mlp": mlp_lr, "cnn": cnn_lr}, measure_samples=measure_samples,
        measure_iterations=measure_iterations, threads=threads)
    summary = run_depthwidth(cfg, out, store=store, resume=resume)
    tables = []
    for arch, res in summary["results"].items():
        tables.append((f"{arch}: means over seeds (accuracies and gap_acc in percent)",
                       res["cells"], CELL_COLUMNS))
        tables.append((f"{arch}: Kendall tau", res["taus"], None))
    _show(out, *tables, digits=4)


def correlate(out: Path = OUT, resume: bool = RESUME,
              arch: str = typer.Option("mlp", help="mlp, cnn or transformer."),
              lrs: str = typer.Option(None, help="Default per architecture: mlp and cnn "
                                      "0.02,0.1; transformer 0.03,0.1."),
              batch_sizes: str = typer.Option(None, help="Default: mlp 16,128; transformer "
                                              "32,64."),
              widths: str = typer.Option(None, help="Default: mlp 32,128; transformer 24,32."),
              depths: str = typer.Option(None, help="Default: 1,2."),
              optimizers: str = typer.Option(None, help="Default: sgd,sam."),
              epochs: int = typer.Option(None, help="Default: mlp 15; transformer 40."),
              schedule: str = typer.Option(None, help="Learning rate: constant or cosine (to "
                                           "0). Default: mlp constant; transformer cosine."),
              weight_decay: float = typer.Option(None, help="Default: mlp 0; transformer "
                                                 "5e-4."),
              measure_samples: int = typer.Option(256),
              measure_iterations: int = typer.Option(15, help="Power iterations (lambda_max, s)."),
              measure_probes: int = typer.Option(10, help="Hutchinson probes for tr H."),
              min_train_acc: float = typer.Option(99.0, help="Training accuracy (percent) of "
                                                  "the 'converged' subset also tabulated."),
              seed: int = typer.Option(0), threads: int = THREADS):
    """Grid of digits trainings; Kendall tau (plain, granulated) of each measure vs the gap."""
    from genlab.optim.studies.correlate import TABLE_COLUMNS, CorrelateConfig, run_correlate

    def given(text, parse, name):
        return None if text is None else parse(text, name)

    cfg = CorrelateConfig.for_arch(
        arch, lrs=given(lrs, floats, "lrs"), batch_sizes=given(batch_sizes, ints, "batch-sizes"),
        widths=given(widths, ints, "widths"), depths=given(depths, ints, "depths"),
        optimizers=None if optimizers is None else names(optimizers), epochs=epochs,
        schedule=schedule, weight_decay=weight_decay, measure_samples=measure_samples,
        measure_iterations=measure_iterations, measure_probes=measure_probes,
        min_train_acc=min_train_acc, seed=seed, threads=threads)
    summary = run_correlate(cfg, out, resume=resume)
    typer.echo(f"training accuracy {summary['train_acc_min']:.2f}%-"
               f"{summary['train_acc_max']:.2f}% over {summary['trainings']} trainings")
    tables = [(f"Kendall tau against {gap} ({summary['trainings']} trainings)", rows,
               TABLE_COLUMNS) for gap, rows in summary["tau"].items()]
    tables += [(f"Kendall tau against {gap}, {summary['converged']} converged trainings "
                f"(train accuracy >= {cfg.min_train_acc:g}%)", rows, TABLE_COLUMNS)
               for gap, rows in summary["tau_converged"].items()]
    _show(out, *tables, digits=2)


#: command name -> function, registered on the `genlab optim` app by cli/optim.py
COMMANDS = {"standard": standard, "transfer": transfer, "sensitivity": sensitivity,
            "labelnoise": labelnoise, "depth-width": depth_width, "correlate": correlate}
