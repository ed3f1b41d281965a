"""`genlab nas detect`: a searched cell as a detection backbone (genlab.nas.transfer)."""

from __future__ import annotations

from pathlib import Path

import typer

from genlab.cli import options

DATA_HELP = ("voc:ROOT (VOCdevkit: VOC2007 + VOC2012 trainval -> VOC2007 test, 11-point mAP) | "
             "coco:ROOT (train2017 -> val2017, COCOeval) | synthetic[:N] (embedded shapes).")
PROTOCOL = "mmdetection RetinaNet 1x"


def detect(
    genotype: str = typer.Argument(None, help="Genotype text of --space (not for the ResNet "
                                              "rows)."),
    out: Path = typer.Option(..., help="Run folder."),
    space: str = typer.Option("darts", help="Search space of GENOTYPE: darts (and its "
                                            "family) | mobilenet."),
    data: str = typer.Option("synthetic", help=DATA_HELP),
    detector: str = typer.Option("retinanet", help="retinanet | fasterrcnn (torchvision)."),
    backbone: str = typer.Option("searched", help="searched | resnet18 | resnet50 (torchvision"
                                                  ", weights=None: the reference rows)."),
    backbone_weights: Path = typer.Option(None, help="A `genlab nas train` run folder or "
                                                     "checkpoint for the searched backbone."),
    channels: int = typer.Option(None, "--channels", "-C", help="Backbone width (DARTS "
                                                                "ImageNet: 48)."),
    cells: int = typer.Option(None, "--cells", "-N", help="Backbone depth (DARTS: 14)."),
    fpn_channels: int = typer.Option(256, help="FPN and head width."),
    head_norm: str = typer.Option("none", help="RetinaNet head: none (torchvision v1) | gn "
                                               "(GroupNorm, torchvision v2; from scratch)."),
    epochs: int = typer.Option(12, help=f"Epochs ({PROTOCOL}: 12)."),
    batch_size: int = typer.Option(16, help="Global batch (over every torchrun process)."),
    lr: float = typer.Option(None, help="SGD lr (default 0.01 x batch-size / 16)."),
    weight_decay: float = typer.Option(1e-4),
    lr_steps: str = typer.Option(None, help="Epochs after which lr /= 10 (default 8,11 of 12, "
                                            "scaled with --epochs)."),
    warmup: int = typer.Option(500, help="Linear warm-up iterations (from 0.001 x lr)."),
    grad_clip: float = typer.Option(35.0, help="Gradient-norm clip, 0 = off."),
    min_size: int = typer.Option(None, help="Shorter side after resizing (800; synthetic 64)."),
    max_size: int = typer.Option(None, help="Longest side cap (1333; synthetic 64)."),
    flip: bool = typer.Option(True, help="Random horizontal flips in training."),
    max_steps: int = typer.Option(None, help="Stop after N iterations (then evaluate)."),
    checkpoint_steps: int = typer.Option(None, help="Checkpoint every N iterations (default: "
                                                    "every epoch)."),
    workers: int = typer.Option(0, help="DataLoader worker processes."),
    seed: int = typer.Option(0),
    device: str = options.device_option(),
    threads: int = options.threads_option(),
    amp: str = typer.Option("off", help="off | bf16 | fp16."),
    channels_last: bool = typer.Option(False, help="NHWC layout of model and inputs."),
    resume: bool = options.resume_option(),
):
    """Train and score a detector on a searched backbone + FPN: map, map50 in summary.json."""
    from genlab.nas.transfer.detection.detect import DetectConfig
    from genlab.nas.transfer.detection.detect import detect as run_detect

    steps = None if lr_steps is None else tuple(options.parse_list(lr_steps, int, "--lr-steps"))
    cfg = DetectConfig(genotype=genotype, space=space, data=data, detector=detector,
                       backbone=backbone,
                       backbone_weights=None if backbone_weights is None else str(
                           backbone_weights),
                       channels=channels, cells=cells, fpn_channels=fpn_channels,
                       head_norm=head_norm, epochs=epochs,
                       batch_size=batch_size, lr=lr, weight_decay=weight_decay, lr_steps=steps,
                       warmup=warmup, grad_clip=grad_clip, min_size=min_size, max_size=max_size,
                       flip=flip, max_steps=max_steps, checkpoint_steps=checkpoint_steps,
                       workers=workers, seed=seed, device=device, threads=threads, amp=amp,
                       channels_last=channels_last)
    s = run_detect(cfg, out, resume=resume)
    extra = f"   AP75 {s['map75']:.4f}" if "map75" in s else ""
    typer.echo(f"mAP {s['map']:.4f}   mAP@0.5 {s['map50']:.4f}{extra}   trivial mAP@0.5 "
               f"{s['trivial_map50']:.4f}   parameters {s['params']:,}")
    options.closing(out)
