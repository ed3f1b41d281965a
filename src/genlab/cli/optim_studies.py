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


def _standard(cfg, out: Path, resume: bool) -> None:
    """Standard training: each optimiser tuned on validation data, test accuracy over seeds."""
    from genlab.optim.studies.standard import COLUMNS, run_standard

    summary = run_standard(cfg, out, resume=resume)
    _show(out, *((f"{t['arch']}: test accuracy (%) over seeds {_seeds(cfg.seeds)}",
                  t["rows"] + t["sanity"], COLUMNS) for t in summary["tables"]))


def _seeds(seeds: list[int]) -> str:
    return ",".join(map(str, seeds))


def _transfer(cfg, out: Path, resume: bool) -> None:
    """Transfer learning: pretrain on jittered digits 0-4, fine-tune on few jittered 5-9
    (every learning rate and radius searched on validation data)."""
    from genlab.optim.studies.transfer import COLUMNS, run_transfer

    summary = run_transfer(cfg, out, resume=resume)
    _show(out, (f"target test accuracy (%) over seeds {_seeds(cfg.seeds)}",
                summary["rows"] + summary["sanity"], COLUMNS))


def _sensitivity(cfg, out: Path, resume: bool) -> None:
    """Hyper-parameter sensitivity: accuracy over each optimiser's lr x radius grid."""
    from genlab.optim.studies.sensitivity import COLUMNS, run_sensitivity

    summary = run_sensitivity(cfg, out, resume=resume)
    _show(out, ("test accuracy (%) over the grid's cells (share_within_1pt: a fraction of "
                "the cells)", summary["rows"] + summary["sanity"], COLUMNS), digits=2)


def _labelnoise(cfg, out: Path, resume: bool) -> None:
    """Clean test accuracy of each tuned optimiser under label noise."""
    from genlab.optim.studies.labelnoise import run_labelnoise

    summary = run_labelnoise(cfg, out, resume=resume)
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


#: command name -> (config path, run function): generated from their configs by cli/optim.py
GENERATED = {"standard": ("genlab.optim.studies.standard:StandardConfig", _standard),
             "transfer": ("genlab.optim.studies.transfer:TransferConfig", _transfer),
             "sensitivity": ("genlab.optim.studies.sensitivity:SensitivityConfig", _sensitivity),
             "labelnoise": ("genlab.optim.studies.labelnoise:LabelNoiseConfig", _labelnoise)}
#: command name -> function with hand-written options, registered by cli/optim.py
COMMANDS = {"depth-width": depth_width, "correlate": correlate}
