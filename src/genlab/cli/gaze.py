"""`genlab gaze ...`: render, train, eval, predict, and a command per study of
genlab.gaze.studies (bench, audit, paper); thin over genlab.gaze."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from genlab.cli import options
from genlab.cli.commands import config_command
from genlab.cli.studies import studies_app

app = studies_app("genlab.gaze.studies", no_args_is_help=True, rich_markup_mode=None)

RECON = (
    "MoEGaze's architecture is our reconstruction of the AAAI-26 abstract (no code or "
    "full text is public): cosine router over k-means prototypes, batched experts, "
    "Switch balance loss, subject-contrastive appearance loss."
)


def _render(cfg, out: Path) -> None:
    """Render synthetic eye images with exact gaze labels into a folder."""
    info = cfg.render(out)
    typer.echo(json.dumps(info, indent=2, default=str))
    typer.echo(f"rendered {cfg.count} images of {cfg.domain}")
    options.closing(out)


config_command(app, "render", "genlab.gaze.synth.dataset:RenderConfig", _render, resume=False)


def _train(cfg, out: Path, resume: bool) -> None:
    from genlab.gaze.train import train_gaze

    # the data are loaded (and checked) before the folder is touched; a resume of a
    # finished run skips them and rewrites nothing
    _, summary = train_gaze(cfg, None, out, resume=resume)
    typer.echo(f"{cfg.model} trained on {cfg.source}: held-out source subjects "
               f"{summary['val_mean_deg']:.2f} deg (constant predictor "
               f"{summary['constant_val_mean_deg']:.2f})")
    router = summary["router"]["source"]
    if "expert_cluster_nmi" in router:
        typer.echo(f"  router on held-out source subjects: expert-cluster NMI "
                   f"{router['expert_cluster_nmi']:.3f}, cluster purity "
                   f"{router['cluster_purity']:.3f}")
    for name, res in summary["targets"].items():
        if res is None:
            typer.echo(f"  {name}: unlabelled, no error")
            continue
        typer.echo(f"  target {name}: mean angular error {res['mean_deg']:.2f} deg (median "
                   f"{res['median_deg']:.2f}; constant predictor "
                   f"{res['constant']['mean_deg']:.2f})")
    options.closing(out)


config_command(app, "train", "genlab.gaze.config:GazeTrainConfig", _train,
               help="Train a gaze model (baseline or MoEGaze) on a source and test it on "
                    "held-out source subjects and on every target. " + RECON)


def _eval(cfg, out: Path) -> None:
    """Evaluate a trained run on a synthetic domain or on real data."""
    summary = cfg.run(out)
    if summary["labelled"]:
        typer.echo(f"{summary['data']}: mean angular error {summary['mean_deg']:.2f} deg "
                   f"(median {summary['median_deg']:.2f}) over {summary['images']} images")
    else:
        typer.echo(f"{summary['data']}: unlabelled, wrote predictions of "
                   f"{summary['images']} images")
    options.closing(out)


config_command(app, "eval", "genlab.gaze.evaluate:EvalConfig", _eval, resume=False)


def _predict(cfg) -> None:
    """Predict the gaze of images; print pitch and yaw in degrees, one line per image."""
    for result in cfg.run():
        typer.echo(f"{result['image']}: pitch {result['pitch_deg']:+.2f} deg, "
                   f"yaw {result['yaw_deg']:+.2f} deg")
    if cfg.out is not None:
        options.closing(cfg.out)


config_command(app, "predict", "genlab.gaze.predict:PredictConfig", _predict, run_folder=False)
