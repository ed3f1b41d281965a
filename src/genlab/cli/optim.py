"""`genlab optim ...` commands: thin wrappers over genlab.optim.training (train,
measure) and genlab.optim.studies."""

from __future__ import annotations

from pathlib import Path

import typer

from genlab.cli import options
from genlab.cli.commands import config_command
from genlab.cli.studies import aligned_table, studies_app

app = studies_app("genlab.optim.studies", no_args_is_help=True, rich_markup_mode=None)


def _print_trained(summary: dict, out: Path) -> None:
    """Scores (accuracies in percent) and gaps as a table, then the measures as a table."""
    from genlab.optim.measures import measure_names

    rows = [{"split": "train", "loss": summary["train_loss"], "accuracy (%)": summary["train_acc"]},
            {"split": "test", "loss": summary["test_loss"], "accuracy (%)": summary["test_acc"]},
            {"split": "gap", "loss": summary["gap_loss"], "accuracy (%)": summary["gap_acc"]},
            {"split": "constant predictor (test)", "loss": None,
             "accuracy (%)": summary["constant_test_acc"]}]
    typer.echo(aligned_table(rows, digits=4))
    m = summary.get("measures")
    if m:
        typer.echo(f"measures on {m['n_samples']} training samples (BatchNorm: {m['bn_mode']})")
        typer.echo(aligned_table([{"measure": k, "value": m[k]} for k in measure_names()]))
    options.closing(out)


def _train(cfg, out: Path, resume: bool) -> None:
    """Train a classifier (the digits or your images, folder:PATH) with any optimiser;
    summary.json holds accuracies (percent), gaps, the constant predictor's test accuracy and
    every measure."""
    from genlab.optim.training.train import train_digits

    summary = train_digits(cfg, out, resume=resume)
    _print_trained(summary, out)


config_command(app, "train", "genlab.optim.training.train:TrainConfig", _train)
config_command(app, "predict", "genlab.prediction:OptimPredictConfig",
               options.print_predictions, run_folder=False)


def _measure(cfg, out: Path, resume: bool) -> None:
    """Every nonuniformity and sharpness measure of a trained model, in a new run folder
    (config.json; summary.json: scores, gaps and every measure)."""
    from genlab.optim.training.train import measure_checkpoint

    summary = measure_checkpoint(cfg.checkpoint, out, config=cfg.train_config,
                                 measure=cfg.measure_config(), resume=resume,
                                 threads=cfg.threads, device=cfg.device)
    _print_trained(summary, out)


config_command(app, "measure", "genlab.optim.training.train:MeasureRunConfig", _measure)

