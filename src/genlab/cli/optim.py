"""`genlab optim ...` commands: thin wrappers over genlab.optim.studies and the measures."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer import _click as click  # typer >= 0.26 carries its own click
from typer.core import TyperGroup

from genlab.cli import optim_studies, options
from genlab.cli.commands import config_command, lazy_app
from genlab.cli.optim_studies import RESUME, THREADS, aligned_table
from genlab.core.registry import import_path

CHOICES = "{choices}"  # in a help text: replaced by the names of the option's registry


#: option -> the "module:attribute" of the names it takes (imported only when needed)
CHOICE_SOURCES = {"arch": "genlab.optim.studies.models:ARCHS",
                  "optimizer": "genlab.optim.optimizers.registry:OPTIMIZERS",
                  "noise_kind": "genlab.optim.studies.noise:NOISE_KINDS",
                  "bn_mode": "genlab.optim.measures.per_sample:BN_MODES"}


class _Group(TyperGroup):
    """Fills each CHOICES help text from its registry when a command is looked up, so the
    help lists every registered name while ``genlab`` starts without importing torch."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        for param in getattr(command, "params", ()):
            help_text = getattr(param, "help", None)
            if help_text and CHOICES in help_text:
                names = import_path(CHOICE_SOURCES[param.name])
                param.help = help_text.replace(CHOICES, " | ".join(names))
        return command


app = lazy_app(_Group, no_args_is_help=True, rich_markup_mode=None)

MEASURE_OUT = typer.Option(..., "--out", help="Run folder to write (config.json and "
                           "summary.json: scores, gaps and every measure).")
DEVICE = options.device_option("cpu")


def _print_trained(summary: dict, out: Path) -> None:
    """Scores (accuracies in percent) and gaps as a table, then the measures as a table."""
    from genlab.optim.measures import MEASURE_NAMES

    rows = [{"split": "train", "loss": summary["train_loss"], "accuracy (%)": summary["train_acc"]},
            {"split": "test", "loss": summary["test_loss"], "accuracy (%)": summary["test_acc"]},
            {"split": "gap", "loss": summary["gap_loss"], "accuracy (%)": summary["gap_acc"]},
            {"split": "constant predictor (test)", "loss": None,
             "accuracy (%)": summary["constant_test_acc"]}]
    typer.echo(aligned_table(rows, digits=4))
    m = summary.get("measures")
    if m:
        typer.echo(f"measures on {m['n_samples']} training samples (BatchNorm: {m['bn_mode']})")
        typer.echo(aligned_table([{"measure": k, "value": m[k]} for k in MEASURE_NAMES]))
    options.closing(out)


def _print_summary(summary: dict, out: Path, keys: list[str] | None = None) -> None:
    shown = {k: summary[k] for k in keys} if keys else summary
    typer.echo(json.dumps(shown, indent=2, default=str))
    options.closing(out)


def _toy(cfg, out: Path, resume: bool) -> None:
    """1-D two-minima toy: SGD escapes the minimum of high nonuniformity (x=1), GD stays."""
    from genlab.optim.studies.synthetic.toy import run_toy

    summary = run_toy(cfg, out, resume=resume)
    _print_summary(summary, out, ["sgd_escape_fraction", "sgd_median_leave_iteration",
                                  "gd_escaped", "gd_final_x", "cov_left_at", "cov_final_x"])


config_command(app, "toy", "genlab.optim.studies.synthetic.toy:ToyConfig", _toy)


def _train(cfg, out: Path, resume: bool) -> None:
    """Train a digits classifier with any optimiser; summary.json holds accuracies (percent),
    gaps, the constant predictor's test accuracy and every measure."""
    from genlab.optim.studies.train import train_digits

    summary = train_digits(cfg, out, resume=resume)
    _print_trained(summary, out)


config_command(app, "train", "genlab.optim.studies.train:TrainConfig", _train)


@app.command()
def measure(checkpoint: Path = typer.Argument(..., help="checkpoint.pt of an `optim train` "
                                              "run (or its folder)."),
            out: Path = MEASURE_OUT, resume: bool = RESUME,
            config: Path = typer.Option(None, help="config.json of the training, for its "
                                        "data (default: next to the checkpoint); the model "
                                        "comes from the checkpoint's model record."),
            samples: int = typer.Option(512, help="Training samples the measures use."),
            iterations: int = typer.Option(30, help="Power iterations (lambda_max, s)."),
            probes: int = typer.Option(20, help="Hutchinson probes for tr H."),
            bn_mode: str = typer.Option("eval", help="BatchNorm during lambda_max, tr H and "
                                        f"sharpness: {CHOICES} (eval: running statistics; "
                                        "batch: each chunk's)."),
            seed: int = typer.Option(0), device: str = DEVICE, threads: int = THREADS):
    """Every nonuniformity and sharpness measure of a trained model."""
    from genlab.optim.measures import MeasureConfig
    from genlab.optim.studies.train import measure_checkpoint

    mcfg = MeasureConfig(n_samples=samples, power_iterations=iterations, trace_probes=probes,
                         bn_mode=bn_mode, seed=seed)
    summary = measure_checkpoint(checkpoint, out, config=config, measure=mcfg, resume=resume,
                                 threads=threads, device=device)
    _print_trained(summary, out)


def _sparse(cfg, out: Path, resume: bool) -> None:
    """Sparse regression with a diagonal net: SGD vs SAM vs SAMGCM vs COV (official setup)."""
    from genlab.optim.studies.synthetic.sparse import run_sparse

    summary = run_sparse(cfg, out, resume=resume)
    rows = []
    for r in summary["table"]:
        row = {"optimizer": r["optimizer"]}
        for key, digits in (("train_loss", 4), ("test_loss", 4), ("beta_l1", 2),
                            ("support_size", 1)):
            row[key] = f"{r[key]:.{digits}f} ± {r[key + '_std']:.{digits}f}"
        row["support_recovered"] = f"{r['support_recovered']:.0%} of seeds"
        rows.append(row)
    typer.echo(aligned_table(rows))
    options.closing(out)


config_command(app, "sparse", "genlab.optim.studies.synthetic.sparse:SparseConfig", _sparse)
for _name, (_path, _run) in optim_studies.GENERATED.items():
    config_command(app, _name, _path, _run)
for _name, _command in optim_studies.COMMANDS.items():
    app.command(_name)(_command)
