"""`genlab gaze ...`: render, train, eval, predict, bench, paper (thin over genlab.gaze)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from genlab.cli import options
from genlab.cli.commands import config_command, lazy_app

app = lazy_app(no_args_is_help=True, rich_markup_mode=None)

RECON = (
    "MoEGaze's architecture is our reconstruction of the AAAI-26 abstract (no code or "
    "full text is public): cosine router over k-means prototypes, batched experts, "
    "Switch balance loss, subject-contrastive appearance loss."
)
STUDY_RESUME_HELP = ("Accepted for the convention's sake, changes nothing: a rerun in the "
                     "same --out always resumes (finished runs are read back, interrupted "
                     "ones continued).")


def _models() -> str:
    from genlab.gaze.models.registry import MODELS

    return " | ".join(MODELS.choices())


def _worlds() -> str:
    from genlab.gaze.protocol import WORLDS

    return ", ".join(WORLDS.choices())


# option -> its help text from the registries, made when help is shown (they import torch,
# which the CLI does not import at start-up): the options of the two hand-written commands
REGISTRY_HELP = {
    "models": lambda: f"Comma-separated models to train, of: {_models()}.",
    "worlds": lambda: f"Comma-separated worlds, of: {_worlds()} (default all).",
}


RegistryHelp = options.registry_help_command(REGISTRY_HELP)


def _size(text: str) -> list[int]:
    return list(options.parse_size(text, minimum=8))


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


@app.command()
def predict(
    checkpoint: Path = typer.Argument(..., help="Run folder of gaze train or its checkpoint.pt."),
    images: list[Path] = typer.Argument(..., help="Image files (PNG/JPEG; colour or grey), "
                                        "each one eye of about the run's input shape "
                                        "(gaze render --png N writes such files); several "
                                        "are predicted as one batch."),
    out: Path = typer.Option(None, help="Write a picture of the images with their predicted "
                             "gaze arrows (scaled up, with a legend) here: a .png or .jpg "
                             "name (then the last line is `outputs in` it; without --out "
                             "nothing is written)."),
    device: str = options.device_option(),
):
    """Predict the gaze of images; print pitch and yaw in degrees, one line per image."""
    from genlab.gaze.predict import predict_images

    for result in predict_images(checkpoint, images, out, device=device):
        typer.echo(f"{result['image']}: pitch {result['pitch_deg']:+.2f} deg, "
                   f"yaw {result['yaw_deg']:+.2f} deg")
    if out is not None:
        options.closing(out)


def _seeds_or_none(text: str | None, option: str, *, allow_empty: bool = False):
    if text is None:
        return None
    if allow_empty and not text.strip():
        return []
    return options.parse_seeds(text, option)


@app.command(cls=RegistryHelp)
def bench(
    out: Path = typer.Option(..., help="Folder for runs/, data/, bench.json, bench.md, plot."),
    quick: bool = typer.Option(False, "--quick", help="The appearance world, seeds 0,1 "
                               "(reference 0), short runs."),
    worlds: str = typer.Option(None, help="Comma-separated worlds."),
    seeds: str = options.seeds_option(None, "Default 0-4 (--quick: 0,1)."),
    reference_seeds: str = typer.Option(None, "--reference-seeds", help="Seeds of the "
                                        "trained-on-target references, a list or a range "
                                        "(default 0-2; --quick: 0)."),
    steps: int = typer.Option(None, help="Optimiser steps per run (default 300)."),
    workers: int = typer.Option(None, help="Runs trained at the same time (processes)."),
    executor: str = typer.Option("local", help="local (this machine: in this process with "
                                 "one worker, else a process pool) | inline | ray."),
    address: str = typer.Option(None, help="HOST:PORT of a Ray cluster (--executor ray; "
                                "default a local Ray instance)."),
    grouping: str = typer.Option("none", help="MoEGaze's runs: appearance sub-datasets "
                                 "(none | colour | crossfit, as gaze train --grouping)."),
    router_input: str = typer.Option("style", help="MoEGaze's runs: router input (style | "
                                     "encoder, as gaze train --router-input)."),
    device: str = options.device_option(),
    threads: int = options.threads_option(),
    resume: bool = typer.Option(False, "--resume", help=STUDY_RESUME_HELP),
):
    """MoEGaze vs the baseline in the synthetic worlds, with references and intervals.

    Resumable by rerunning the same command: every finished training is recorded and
    read back, an interrupted one continued (--resume is accepted and changes nothing).
    """
    from genlab.gaze.studies.bench import BenchConfig, run_bench

    del resume  # a rerun always resumes
    cfg = BenchConfig.quick() if quick else BenchConfig()
    values = {"seeds": _seeds_or_none(seeds, "--seeds"),
              "reference_seeds": _seeds_or_none(reference_seeds, "--reference-seeds"),
              "steps": steps, "workers": workers}
    for name, value in values.items():
        if value is not None:
            setattr(cfg, name, value)
    cfg.device, cfg.threads = device, threads
    cfg.grouping, cfg.router_input = grouping, router_input
    if worlds:
        cfg.worlds = options.parse_list(worlds, option="--worlds")
    result = run_bench(cfg, out, executor=executor, address=address)
    typer.echo(result["markdown"])
    typer.echo(f"{result['seconds']:.0f} s this invocation")
    options.closing(out)


@app.command(cls=RegistryHelp)
def paper(
    out: Path = typer.Option(..., help="Folder for runs/, paper.json and paper.md."),
    xgaze: Path = typer.Option(None, help="ETH-XGaze root (train/subject*.h5)."),
    gaze360: Path = typer.Option(None, help="Gaze360 in GazeHub layout (Label/, Image/)."),
    mpii: Path = typer.Option(None, help="MPIIFaceGaze in GazeHub layout (Label/p*.label)."),
    eyediap: Path = typer.Option(None, help="EyeDiap in GazeHub layout (Label/*.label)."),
    pretrained: Path = typer.Option(None, help="torchvision-layout ResNet-18 state-dict file."),
    models: str = typer.Option("baseline,moegaze", help="Models to train."),
    fractions: str = typer.Option("1,0.1", help="Shares of the source data."),
    seeds: str = options.seeds_option("0-2"),
    reference_seeds: str = typer.Option("0", "--reference-seeds", help="Seeds of the "
                                        "trained-on-target reference, a list or a range "
                                        "(\"\": none)."),
    steps: int = typer.Option(20000, help="Optimiser steps per run."),
    batch_size: int = typer.Option(64, help="Mini-batch size."),
    lr: float = typer.Option(1e-4, help="AdamW learning rate."),
    size: str = options.size_option("224", "of the faces, >= 8 pixels a side"),
    width: int = typer.Option(64, help="Backbone width (64: ResNet-18)."),
    eval_every: int = typer.Option(1000, help="Checkpoint and validation interval in steps."),
    device: str = options.device_option("auto"),
    threads: int = options.threads_option(0),
    workers: int = typer.Option(4, help="DataLoader worker processes."),
    resume: bool = typer.Option(False, "--resume", help=STUDY_RESUME_HELP),
):
    """The paper's protocol on real data: E/G -> M/D, baseline and MoEGaze, 100% and 10%.

    Reads the data sets from your disk (nothing is downloaded). Resumable by rerunning the
    same command: finished runs are read back, an interrupted one continued (--resume is
    accepted and changes nothing).
    """
    from genlab.gaze.studies.paper import PaperConfig, run_paper

    del resume  # a rerun always resumes
    cfg = PaperConfig(
        xgaze=str(xgaze) if xgaze else None, gaze360=str(gaze360) if gaze360 else None,
        mpii=str(mpii) if mpii else None, eyediap=str(eyediap) if eyediap else None,
        pretrained=str(pretrained) if pretrained else None,
        models=options.parse_list(models, option="--models"),
        fractions=options.parse_list(fractions, float, "--fractions"),
        seeds=options.parse_seeds(seeds),
        reference_seeds=_seeds_or_none(reference_seeds, "--reference-seeds",
                                       allow_empty=True),
        steps=steps, batch_size=batch_size, lr=lr,
        size=_size(size), width=width, eval_every=eval_every, device=device,
        threads=threads, workers=workers,
    )
    result = run_paper(cfg, out)
    typer.echo(result["markdown"])
    options.closing(out)
