"""`genlab optim ...` commands: thin wrappers over genlab.optim.studies and the measures."""

from __future__ import annotations

from pathlib import Path

import typer
from typer import _click as click  # typer >= 0.26 carries its own click
from typer.core import TyperGroup

from genlab.cli import options
from genlab.cli.commands import config_command, lazy_app
from genlab.cli.optim_studies import aligned_table, study_run


class _Group(TyperGroup):
    """Adds a command for every registered study (genlab.optim.studies) when the commands
    are first listed or looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        _add_studies()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if _add_studies() and cmd_name in app.lazy_commands:
            return self.get_command(ctx, cmd_name)  # the lazy table now holds it
        return super().get_command(ctx, cmd_name)


app = lazy_app(_Group, no_args_is_help=True, rich_markup_mode=None)


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
    from genlab.optim.studies.train import train_digits

    summary = train_digits(cfg, out, resume=resume)
    _print_trained(summary, out)


config_command(app, "train", "genlab.optim.studies.train:TrainConfig", _train)
config_command(app, "predict", "genlab.prediction:OptimPredictConfig",
               options.print_predictions, run_folder=False)


def _measure(cfg, out: Path, resume: bool) -> None:
    """Every nonuniformity and sharpness measure of a trained model, in a new run folder
    (config.json; summary.json: scores, gaps and every measure)."""
    from genlab.optim.studies.train import measure_checkpoint

    summary = measure_checkpoint(cfg.checkpoint, out, config=cfg.train_config,
                                 measure=cfg.measure_config(), resume=resume,
                                 threads=cfg.threads, device=cfg.device)
    _print_trained(summary, out)


config_command(app, "measure", "genlab.optim.studies.train:MeasureRunConfig", _measure)

#: the package of the studies and its folder (read, not imported, to list them)
STUDIES = ("genlab.optim.studies", Path(__file__).resolve().parents[1] / "optim" / "studies")


def _add_studies() -> bool:
    """Once: a command generated from its config for every study module of
    genlab.optim.studies (found by reading the sources, so no torch is imported); True
    when this call added them."""
    if getattr(_add_studies, "done", False):
        return False
    _add_studies.done = True  # type: ignore[attr-defined]
    from genlab.core.registry import declared_names

    for name, (module, summary) in declared_names(STUDIES[1], STUDIES[0], "STUDY").items():
        config_command(app, name, f"{module}:STUDY.config", study_run(module, summary))
    return True
