"""`genlab gaze ...` commands: render, train, eval, predict, bench (thin over genlab.gaze)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from genlab.core.errors import ConfigError

app = typer.Typer(no_args_is_help=True)

RECON = (
    "MoEGaze's architecture is our reconstruction of the AAAI-26 abstract (no code or "
    "full text is public): cosine router over k-means prototypes, batched experts, "
    "Switch balance loss, subject-contrastive appearance loss."
)


def parse_size(text: str) -> list[int]:
    """'32x48' -> [32, 48] (height x width)."""
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError as exc:
        raise ConfigError(f"--size must look like HEIGHTxWIDTH (e.g. 32x48), got {text!r}") from exc
    if h < 8 or w < 8:
        raise ConfigError(f"--size sides must be >= 8 pixels, got {text!r}")
    return [h, w]


@app.command()
def render(
    out: Path = typer.Option(..., help="Folder for the PNG images and labels."),
    domain: str = typer.Option(
        "mixed", help="Synthetic domain: broad-e, broad-g, narrow-m, narrow-d, mixed."
    ),
    count: int = typer.Option(64, help="Number of images."),
    seed: int = typer.Option(0, help="Rendering seed."),
    size: str = typer.Option("64x96", help="Image size HEIGHTxWIDTH."),
):
    """Render synthetic eye images with exact gaze labels into a folder."""
    from genlab.core.errors import require_positive
    from genlab.gaze.synth import render_to_folder

    require_positive("count", count)
    info = render_to_folder(count, domain, seed, out, tuple(parse_size(size)))
    typer.echo(json.dumps(info, indent=2, default=str))
    typer.echo(f"rendered {count} images of {domain} into {out}")


@app.command(
    help="Train a gaze model (baseline or MoEGaze) under the cross-domain protocol "
    "or on real data. " + RECON
)
def train(
    out: Path = typer.Option(
        ..., help="Run folder (config.json, metrics.jsonl, checkpoint.pt, summary.json, plots)."
    ),
    model: str = typer.Option("moegaze", help="baseline or moegaze."),
    source: str = typer.Option("broad-e", help="Source (training) domain."),
    target: str = typer.Option("narrow-m", help="Target (test) domain, never trained on."),
    experts: int = typer.Option(4, help="Number of experts K (MoEGaze)."),
    routing: str = typer.Option("soft", help="soft, hard-train-soft-infer or hard."),
    balance: str = typer.Option("switch", help="switch, rebalance or none."),
    temperature: float = typer.Option(0.1, help="Router softmax temperature (> 0)."),
    width: int = typer.Option(16, help="Backbone base width (ResNet-18 uses 64)."),
    fraction: float = typer.Option(1.0, help="Share of the source training images, in (0, 1]."),
    epochs: int = typer.Option(8, help="Training epochs."),
    batch_size: int = typer.Option(64, help="Mini-batch size."),
    lr: float = typer.Option(2e-3, help="Adam learning rate."),
    train_count: int = typer.Option(
        3000, help="Source images rendered (before the subject hold-out)."
    ),
    test_count: int = typer.Option(1000, help="Target images rendered."),
    size: str = typer.Option("32x48", help="Input size HEIGHTxWIDTH."),
    data_seed: int = typer.Option(0, help="Seed of the rendered data."),
    seed: int = typer.Option(0, help="Seed of initialisation, batches and the fraction."),
    device: str = typer.Option("cpu", help="cpu, cuda or auto."),
    data_format: str = typer.Option("synthetic", help="synthetic, xgaze or gazehub."),
    train_path: list[str] = typer.Option(None, help="Real data: training file(s)."),
    test_path: list[str] = typer.Option(None, help="Real data: test file(s)."),
    image_root: str = typer.Option(
        None, help="GazeHub: folder the label files' paths are relative to."
    ),
    resume: bool = typer.Option(False, help="Continue a killed run in --out."),
):
    from genlab.gaze.protocol import load_task_data
    from genlab.gaze.train import GazeTrainConfig, train_gaze

    cfg = GazeTrainConfig(
        model=model,
        source=source,
        target=target,
        experts=experts,
        routing=routing,
        balance=balance,
        temperature=temperature,
        width=width,
        fraction=fraction,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        train_count=train_count,
        test_count=test_count,
        size=parse_size(size),
        data_seed=data_seed,
        seed=seed,
        device=device,
        data_format=data_format,
        train_path=list(train_path) if train_path else None,
        test_path=list(test_path) if test_path else None,
        image_root=image_root,
    )
    cfg.validate()
    data = load_task_data(cfg)
    _, summary = train_gaze(cfg, data, out, resume=resume)
    what = (
        f"{cfg.source}->{cfg.target}"
        if cfg.data_format == "synthetic"
        else f"{cfg.data_format} files"
    )
    typer.echo(
        f"{cfg.model} {what}: target mean angular error "
        f"{summary['target_mean_deg']:.2f} deg (median "
        f"{summary['target_median_deg']:.2f}); source val "
        f"{summary['val_mean_deg']:.2f} deg"
    )
    typer.echo(f"run folder: {out}")


@app.command(name="eval")
def eval_(
    checkpoint: Path = typer.Argument(..., help="Run folder or its checkpoint.pt."),
    out: Path = typer.Option(..., help="Folder for summary.json and gaze_arrows.png."),
    domain: str = typer.Option("narrow-m", help="Synthetic domain to evaluate on."),
    count: int = typer.Option(1000, help="Images rendered from the domain."),
    data_seed: int = typer.Option(1, help="Seed of the rendered images."),
    data_format: str = typer.Option("synthetic", help="synthetic, xgaze or gazehub."),
    test_path: list[str] = typer.Option(None, help="Real data: test file(s)."),
    image_root: str = typer.Option(None, help="GazeHub: image folder."),
    device: str = typer.Option("cpu", help="cpu, cuda or auto."),
):
    """Evaluate a trained run on a synthetic domain or on real data."""
    from genlab.gaze.evaluate import evaluate_run

    summary = evaluate_run(
        checkpoint,
        out,
        domain=domain,
        count=count,
        data_seed=data_seed,
        data_format=data_format,
        test_path=list(test_path) if test_path else None,
        image_root=image_root,
        device=device,
    )
    typer.echo(
        f"{summary['data']}: mean angular error {summary['mean_deg']:.2f} deg "
        f"(median {summary['median_deg']:.2f}) over {summary['images']} images"
    )
    typer.echo(f"results in {out}")


@app.command()
def predict(
    checkpoint: Path = typer.Argument(..., help="Run folder or its checkpoint.pt."),
    image: Path = typer.Argument(..., help="Image file (PNG/JPEG; colour or grey)."),
    out: Path = typer.Option(None, help="Write the image with the gaze arrow here (PNG)."),
):
    """Predict the gaze of one image; print pitch and yaw in degrees."""
    from genlab.gaze.predict import predict_file

    result = predict_file(checkpoint, image, out)
    typer.echo(f"pitch {result['pitch_deg']:+.2f} deg, yaw {result['yaw_deg']:+.2f} deg")
    if out is not None:
        typer.echo(f"arrow drawn in {out}")


@app.command()
def bench(
    out: Path = typer.Option(..., help="Folder for runs/, bench.json, bench.md and plots."),
    quick: bool = typer.Option(False, help="A tiny version (one task, one seed) in a minute."),
    seeds: int = typer.Option(3, help="Seeds per setting."),
    epochs: int = typer.Option(None, help="Override the training epochs."),
):
    """The MoEGaze results table: 4 tasks x seeds, 10% data, K and routing ablations.

    Resumable: every finished training is recorded; rerunning skips it.
    """
    from genlab.gaze.bench import BenchConfig, run_bench

    cfg = BenchConfig.quick() if quick else BenchConfig(seeds=seeds)
    if epochs is not None:
        cfg.epochs = epochs
    result = run_bench(cfg, out)
    typer.echo(result["markdown"])
    typer.echo(f"bench results in {out}")
