"""`genlab optim ...` commands: thin wrappers over genlab.optim.studies and the measures."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True)

OUT = typer.Option(..., "--out", help="Run folder to write (config.json, metrics.jsonl, "
                   "summary.json, plots).")
RESUME = typer.Option(False, "--resume", help="Continue the run already in --out.")


def _print_summary(summary: dict, out: Path, keys: list[str] | None = None) -> None:
    shown = {k: summary[k] for k in keys} if keys else summary
    typer.echo(json.dumps(shown, indent=2, default=str))
    typer.echo(f"outputs: {out}")


@app.command()
def toy(out: Path = OUT, resume: bool = RESUME,
        lr: float = typer.Option(0.6, help="Learning rate of SGD and GD."),
        x0: float = typer.Option(1.0001, help="Start, next to the nonuniform minimum x = 1."),
        iterations: int = typer.Option(1000, help="Steps per run."),
        seeds: int = typer.Option(20, help="SGD runs (seeds seed..seed+seeds-1)."),
        seed: int = typer.Option(0, help="First seed.")):
    """1-D two-minima toy: SGD escapes the minimum of high nonuniformity (x=1), GD stays."""
    from genlab.optim.studies.toy import ToyConfig, run_toy

    cfg = ToyConfig(lr=lr, x0=x0, iterations=iterations, seeds=seeds, seed=seed)
    summary = run_toy(cfg, out, resume=resume)
    _print_summary(summary, out, ["sgd_escape_fraction", "sgd_median_leave_iteration",
                                  "gd_escaped", "gd_final_x"])


@app.command()
def train(out: Path = OUT, resume: bool = RESUME,
          arch: str = typer.Option("mlp", help="mlp, cnn or transformer."),
          width: int = typer.Option(64, help="Hidden width / channels / embedding size."),
          depth: int = typer.Option(2, help="Hidden layers / conv blocks / attention blocks."),
          optimizer: str = typer.Option("sgd", help="sgd, sam, asam, cov, samgcm, "
                                        "csam_identity, csam, acsam_identity."),
          lr: float = typer.Option(0.05), momentum: float = typer.Option(0.9),
          weight_decay: float = typer.Option(0.0), batch_size: int = typer.Option(32),
          epochs: int = typer.Option(20),
          rho: float = typer.Option(0.05, help="Radius of SAM/ASAM/SAMGCM; both radii of CSAM."),
          lam: float = typer.Option(0.1, help="COV penalty weight."),
          xi: float = typer.Option(1e-6, help="SAMGCM covariance damping."),
          label_noise: float = typer.Option(0.0, help="Fraction of training labels flipped."),
          noise_kind: str = typer.Option("symmetric", help="symmetric or asymmetric "
                                         "(digits map 7->1, 4->9, 5->6, 3<->8)."),
          measure: bool = typer.Option(True, help="Compute every measure at the end."),
          measure_samples: int = typer.Option(512, help="Training samples the measures use."),
          measure_iterations: int = typer.Option(30, help="Power iterations (lambda_max, s)."),
          measure_probes: int = typer.Option(20, help="Hutchinson probes for tr H."),
          seed: int = typer.Option(0), device: str = typer.Option("cpu")):
    """Train a digits classifier with any optimiser; summary.json holds gaps and measures."""
    from genlab.optim.studies.train import TrainConfig, train_digits

    cfg = TrainConfig(arch=arch, width=width, depth=depth, optimizer=optimizer, lr=lr,
                      momentum=momentum, weight_decay=weight_decay, batch_size=batch_size,
                      epochs=epochs, rho=rho, lam=lam, xi=xi, label_noise=label_noise,
                      noise_kind=noise_kind, measure=measure, measure_samples=measure_samples,
                      measure_iterations=measure_iterations, measure_probes=measure_probes,
                      seed=seed, device=device)
    summary = train_digits(cfg, out, resume=resume)
    _print_summary(summary, out)


@app.command()
def measure(checkpoint: Path = typer.Argument(..., help="checkpoint.pt of an `optim train` "
                                              "run (or its folder)."),
            out: Path = OUT, resume: bool = RESUME,
            config: Path = typer.Option(None, help="config.json to rebuild the model "
                                        "(default: next to the checkpoint)."),
            samples: int = typer.Option(512, help="Training samples the measures use."),
            iterations: int = typer.Option(30, help="Power iterations (lambda_max, s)."),
            probes: int = typer.Option(20, help="Hutchinson probes for tr H."),
            bn_mode: str = typer.Option("eval", help="BatchNorm during lambda_max, tr H and "
                                        "sharpness: eval (running stats) or batch."),
            seed: int = typer.Option(0)):
    """Every nonuniformity and sharpness measure of a trained model."""
    from genlab.optim.measures import MeasureConfig
    from genlab.optim.studies.train import measure_checkpoint

    mcfg = MeasureConfig(n_samples=samples, power_iterations=iterations, trace_probes=probes,
                         bn_mode=bn_mode, seed=seed)
    summary = measure_checkpoint(checkpoint, out, config=config, measure=mcfg, resume=resume)
    _print_summary(summary, out)
