"""`genlab gaze ...`: render, train, eval, predict, bench, paper (thin over genlab.gaze)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from genlab.core.errors import ConfigError

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None)

RECON = (
    "MoEGaze's architecture is our reconstruction of the AAAI-26 abstract (no code or "
    "full text is public): cosine router over k-means prototypes, batched experts, "
    "Switch balance loss, subject-contrastive appearance loss."
)
DATA_HELP = ("a synthetic domain (broad-e, broad-g, narrow-m, narrow-d, app-e, app-g, app-m, "
             "app-d, ctrl-s, ctrl-label, ctrl-capture, mixed) or a real data set as NAME:ROOT "
             "(xgaze, gaze360, mpii, eyediap; see docs/moegaze.md)")


def parse_size(text: str) -> list[int]:
    """'32x48' -> [32, 48] (height x width)."""
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError as exc:
        raise ConfigError(f"--size must look like HEIGHTxWIDTH (e.g. 32x48), got {text!r}") from exc
    if h < 8 or w < 8:
        raise ConfigError(f"--size sides must be >= 8 pixels, got {text!r}")
    return [h, w]


def parse_list(text: str, kind=str, option: str = "") -> list:
    """'a,b' -> [a, b] converted by ``kind``."""
    try:
        return [kind(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise ConfigError(f"{option} must be a comma-separated list, got {text!r}") from exc


@app.command()
def render(
    out: Path = typer.Option(..., help="Folder for the h5 files, sample grid and summary."),
    domain: str = typer.Option("mixed", help="Synthetic domain (see `genlab gaze train`)."),
    count: int = typer.Option(64, help="Number of images."),
    seed: int = typer.Option(0, help="Rendering seed."),
    size: str = typer.Option("64x96", help="Image size HEIGHTxWIDTH."),
    png: int = typer.Option(0, help="Also write the first N images as single-eye PNG files "
                            "(eyes/eye_0000.png ..., labels in eyes.csv) that gaze predict "
                            "takes."),
):
    """Render synthetic eye images with exact gaze labels into a folder."""
    from genlab.core.errors import require_positive
    from genlab.gaze.synth.dataset import render_to_folder

    require_positive("count", count)
    info = render_to_folder(count, domain, seed, out, tuple(parse_size(size)), png=png)
    typer.echo(json.dumps(info, indent=2, default=str))
    typer.echo(f"rendered {count} images of {domain} into {out}")


@app.command(help="Train a gaze model (baseline or MoEGaze) on a source and test it on "
             "held-out source subjects and on every target. " + RECON)
def train(
    out: Path = typer.Option(..., help="Run folder (config.json, metrics.jsonl, "
                             "checkpoint.pt, summary.json, plots)."),
    model: str = typer.Option("moegaze", help="baseline or moegaze."),
    source: str = typer.Option("broad-e", help="Training data: " + DATA_HELP + "."),
    target: list[str] = typer.Option(None, help="Test data, never trained on (repeat for "
                                     "several; default narrow-m)."),
    experts: int = typer.Option(4, help="Number of experts K (MoEGaze)."),
    routing: str = typer.Option("soft", help="soft, hard-train-soft-infer, hard or oracle "
                                "(the true appearance cluster; appearance world only)."),
    balance: str = typer.Option("switch", help="switch, rebalance or none."),
    temperature: float = typer.Option(0.1, help="Router softmax temperature (> 0)."),
    width: int = typer.Option(8, help="Backbone base width (ResNet-18: 64)."),
    stem: str = typer.Option("small", help="small (3x3 stride 2) or imagenet (ResNet-18's)."),
    input_norm: str = typer.Option("half", help="half (x - 0.5) or imagenet (mean/std)."),
    pretrained: Path = typer.Option(None, help="torchvision-layout ResNet state-dict file "
                                    "for the backbone (needs --width 64 --stem imagenet)."),
    group_router_at: float = typer.Option(0.0, help="MoEGaze: at this share of the steps "
                                          "group the training subjects by residuals and "
                                          "train the router on the groups (0: never)."),
    fraction: float = typer.Option(1.0, help="Share of the source training images, in (0, 1]."),
    steps: int = typer.Option(400, help="Optimiser steps (the same for any --fraction)."),
    warmup_steps: int = typer.Option(30, help="Linear LR warm-up steps (then cosine to 0)."),
    eval_every: int = typer.Option(100, help="Checkpoint and validation interval in steps."),
    batch_size: int = typer.Option(64, help="Mini-batch size."),
    lr: float = typer.Option(3e-3, help="AdamW learning rate."),
    train_count: int = typer.Option(3000, help="Synthetic source images rendered (before "
                                    "the subject hold-out)."),
    test_count: int = typer.Option(1000, help="Synthetic target images rendered."),
    size: str = typer.Option("32x48", help="Input size HEIGHTxWIDTH."),
    data_seed: int = typer.Option(0, help="Seed of the rendered data and the subject split."),
    seed: int = typer.Option(0, help="Seed of initialisation, batches and the fraction."),
    device: str = typer.Option("cpu", help="cpu, cuda or auto."),
    threads: int = typer.Option(1, help="torch CPU threads (0: torch's default); recorded."),
    workers: int = typer.Option(0, help="DataLoader workers for real data."),
    amp: str = typer.Option("off", help="off | bf16 | fp16: autocast of forward and loss; "
                                        "fp16 adds a GradScaler (its state in the checkpoint)."),
    channels_last: bool = typer.Option(False, help="NHWC layout of model and inputs."),
    resume: bool = typer.Option(False, help="Continue a killed run in --out."),
):
    from genlab.gaze.protocol import load_task_data
    from genlab.gaze.train import GazeTrainConfig, train_gaze

    cfg = GazeTrainConfig(
        model=model, source=source, targets=list(target) if target else ["narrow-m"],
        experts=experts, routing=routing, balance=balance, temperature=temperature,
        width=width, stem=stem, input_norm=input_norm,
        pretrained=str(pretrained) if pretrained else None, group_router_at=group_router_at,
        fraction=fraction, steps=steps,
        warmup_steps=warmup_steps, eval_every=eval_every, batch_size=batch_size, lr=lr,
        train_count=train_count, test_count=test_count, size=parse_size(size),
        data_seed=data_seed, seed=seed, device=device, threads=threads, workers=workers,
        amp=amp, channels_last=channels_last,
    )
    cfg.validate()
    data = load_task_data(cfg)
    _, summary = train_gaze(cfg, data, out, resume=resume)
    typer.echo(f"{cfg.model} trained on {cfg.source}: held-out source subjects "
               f"{summary['val_mean_deg']:.2f} deg (constant predictor "
               f"{summary['constant_val_mean_deg']:.2f})")
    for name, res in summary["targets"].items():
        if res is None:
            typer.echo(f"  {name}: unlabelled, no error")
            continue
        typer.echo(f"  target {name}: mean angular error {res['mean_deg']:.2f} deg (median "
                   f"{res['median_deg']:.2f}; constant predictor "
                   f"{res['constant']['mean_deg']:.2f})")
    typer.echo(f"run folder: {out}")


@app.command(name="eval")
def eval_(
    checkpoint: Path = typer.Argument(..., help="Run folder or its checkpoint.pt."),
    out: Path = typer.Option(..., help="Folder for summary.json, predictions.csv, arrows."),
    data: str = typer.Option("narrow-m", help="Data to evaluate on: " + DATA_HELP + "; "
                             "unlabelled files (ETH-XGaze test) get predictions only."),
    count: int = typer.Option(1000, help="Images rendered from a synthetic domain."),
    data_seed: int = typer.Option(1, help="Seed of the rendered images."),
    device: str = typer.Option("cpu", help="cpu, cuda or auto."),
    workers: int = typer.Option(0, help="DataLoader workers for real data."),
):
    """Evaluate a trained run on a synthetic domain or on real data."""
    from genlab.gaze.evaluate import evaluate_run

    summary = evaluate_run(checkpoint, out, data=data, count=count, data_seed=data_seed,
                           device=device, workers=workers)
    if summary["labelled"]:
        typer.echo(f"{summary['data']}: mean angular error {summary['mean_deg']:.2f} deg "
                   f"(median {summary['median_deg']:.2f}) over {summary['images']} images")
    else:
        typer.echo(f"{summary['data']}: unlabelled, wrote predictions of "
                   f"{summary['images']} images")
    typer.echo(f"results in {out}")


@app.command()
def predict(
    checkpoint: Path = typer.Argument(..., help="Run folder of gaze train or its checkpoint.pt."),
    images: list[Path] = typer.Argument(..., help="Image files (PNG/JPEG; colour or grey), "
                                        "each one eye of about the run's input shape "
                                        "(gaze render --png N writes such files); several "
                                        "are predicted as one batch."),
    out: Path = typer.Option(None, help="Write a picture of the images with their predicted "
                             "gaze arrows (scaled up, with a legend) here: a .png or .jpg "
                             "name."),
):
    """Predict the gaze of images; print pitch and yaw in degrees, one line per image."""
    from genlab.gaze.predict import predict_images

    for result in predict_images(checkpoint, images, out):
        typer.echo(f"{result['image']}: pitch {result['pitch_deg']:+.2f} deg, "
                   f"yaw {result['yaw_deg']:+.2f} deg")
    if out is not None:
        typer.echo(f"picture: {out}")


@app.command()
def bench(
    out: Path = typer.Option(..., help="Folder for runs/, data/, bench.json, bench.md, plot."),
    quick: bool = typer.Option(False, help="The appearance world, 2 seeds, short runs."),
    worlds: str = typer.Option(None, help="Comma-separated worlds (realistic, appearance, "
                               "control; default all)."),
    seeds: int = typer.Option(None, help="Seeds per setting (default 5)."),
    steps: int = typer.Option(None, help="Optimiser steps per run (default 300)."),
    workers: int = typer.Option(None, help="Runs trained at the same time (processes)."),
    executor: str = typer.Option("local", help="local (this machine: in this process with "
                                 "one worker, else a process pool) | inline | ray."),
    address: str = typer.Option(None, help="HOST:PORT of a Ray cluster (--executor ray; "
                                "default a local Ray instance)."),
):
    """MoEGaze vs the baseline in the synthetic worlds, with references and intervals.

    Resumable: every finished training is recorded; rerunning skips it.
    """
    from genlab.gaze.studies.bench import BenchConfig, run_bench

    cfg = BenchConfig.quick() if quick else BenchConfig()
    for name, value in (("seeds", seeds), ("steps", steps), ("workers", workers)):
        if value is not None:
            setattr(cfg, name, value)
    if worlds:
        cfg.worlds = parse_list(worlds, option="--worlds")
    result = run_bench(cfg, out, executor=executor, address=address)
    typer.echo(result["markdown"])
    typer.echo(f"bench results in {out} ({result['seconds']:.0f} s this invocation)")


@app.command()
def paper(
    out: Path = typer.Option(..., help="Folder for runs/, paper.json and paper.md."),
    xgaze: Path = typer.Option(None, help="ETH-XGaze root (train/subject*.h5)."),
    gaze360: Path = typer.Option(None, help="Gaze360 in GazeHub layout (Label/, Image/)."),
    mpii: Path = typer.Option(None, help="MPIIFaceGaze in GazeHub layout (Label/p*.label)."),
    eyediap: Path = typer.Option(None, help="EyeDiap in GazeHub layout (Label/*.label)."),
    pretrained: Path = typer.Option(None, help="torchvision-layout ResNet-18 state-dict file."),
    models: str = typer.Option("baseline,moegaze", help="Models to train."),
    fractions: str = typer.Option("1,0.1", help="Shares of the source data."),
    seeds: int = typer.Option(3, help="Seeds per setting."),
    reference_seeds: int = typer.Option(1, help="Seeds of the trained-on-target reference "
                                        "(0: none)."),
    steps: int = typer.Option(20000, help="Optimiser steps per run."),
    batch_size: int = typer.Option(64, help="Mini-batch size."),
    lr: float = typer.Option(1e-4, help="AdamW learning rate."),
    size: str = typer.Option("224x224", help="Face size HEIGHTxWIDTH."),
    width: int = typer.Option(64, help="Backbone width (64: ResNet-18)."),
    eval_every: int = typer.Option(1000, help="Checkpoint and validation interval in steps."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
    workers: int = typer.Option(4, help="DataLoader worker processes."),
):
    """The paper's protocol on real data: E/G -> M/D, baseline and MoEGaze, 100% and 10%.

    Reads the data sets from your disk (nothing is downloaded); resumable.
    """
    from genlab.gaze.studies.paper import PaperConfig, run_paper

    cfg = PaperConfig(
        xgaze=str(xgaze) if xgaze else None, gaze360=str(gaze360) if gaze360 else None,
        mpii=str(mpii) if mpii else None, eyediap=str(eyediap) if eyediap else None,
        pretrained=str(pretrained) if pretrained else None,
        models=parse_list(models, option="--models"),
        fractions=parse_list(fractions, float, "--fractions"), seeds=seeds,
        reference_seeds=reference_seeds, steps=steps, batch_size=batch_size, lr=lr,
        size=parse_size(size), width=width, eval_every=eval_every, device=device,
        workers=workers,
    )
    result = run_paper(cfg, out)
    typer.echo(result["markdown"])
    typer.echo(f"paper results in {out}")
