"""Scoring a trained detector: its detections on the evaluation images, the VOC or COCO
figures, the trivial detector's, and a picture of some detections.

Under torchrun every rank predicts its share of the images (rank r: images r, r + P, ...);
the detections are gathered on every rank, which then score the same lists.
"""

from __future__ import annotations

from pathlib import Path

import torch

from genlab.core.parallel.distributed import is_distributed, rank, world_size
from genlab.nas.transfer.detection.batches import eval_batches
from genlab.nas.transfer.detection.metrics import trivial_detector, voc_map


@torch.no_grad()
def predict(model, items, device, batch_size: int = 8, workers: int = 0,
            autocast=None) -> list[dict]:
    """Numpy detections (boxes, scores, labels) of every item, in item order."""
    import contextlib

    indices = list(range(rank(), len(items), world_size())) if is_distributed() else \
        list(range(len(items)))
    was = model.training
    model.eval()
    mine: dict[int, dict] = {}
    for x, y in eval_batches(items, indices, batch_size, workers):
        with autocast() if autocast is not None else contextlib.nullcontext():
            dets = model(x.to(device), y.to(device))
        for t, d in zip(y, dets, strict=True):
            mine[int(t[0, 3])] = {k: d[k].float().cpu().numpy() for k in ("boxes", "scores")}
            mine[int(t[0, 3])]["labels"] = d["labels"].cpu().numpy()
    model.train(was)
    if is_distributed():
        import torch.distributed as dist

        parts = [None] * world_size()
        dist.all_gather_object(parts, mine)
        mine = {k: v for part in parts for k, v in part.items()}
    return [mine[i] for i in range(len(items))]


def trivial_predictions(train, items, num_classes: int) -> list[dict]:
    predict_one = trivial_detector([{"boxes": it.training_boxes()[0],
                                     "labels": it.training_boxes()[1]} for it in train],
                                   [(it.height, it.width) for it in train], num_classes)
    return [predict_one(it.height, it.width) for it in items]


def score(kind: str, predictions, items, classes, *, coco_ids=None,
          annotations: Path | None = None, run=None) -> dict:
    """{"map", "map50", ...}: VOC's 11-point mAP@0.5 (map = map50) with the per-class APs, or
    COCOeval's AP, AP50, AP75 (its table written to coco_eval.txt in ``run``)."""
    if kind == "coco":
        from genlab.nas.transfer.detection.coco import coco_eval, results_json

        results = results_json(predictions, items, coco_ids)
        figures, text = coco_eval(annotations, results)
        if run is not None and run.is_main:
            import json

            run.file("coco_results.json").write_text(json.dumps(results))
            run.file("coco_eval.txt").write_text(text)
        return figures
    res = voc_map(predictions, [it.target() for it in items], len(classes))
    return {"map": res["map"], "map50": res["map"],
            "ap": {c: a for c, a in zip(classes, res["ap"], strict=True)}}


def plot_detections(run, items, predictions, classes, count: int = 8,
                    threshold: float = 0.3) -> None:
    """detections.png: the first ``count`` evaluation images, truth in white (dashed),
    detections scoring at least ``threshold`` in colour with class and score."""
    from matplotlib.patches import Rectangle

    from genlab.core.report import figure
    from genlab.nas.transfer.detection.records import image_tensor

    shown = list(zip(items, predictions, strict=True))[:count]
    cols = min(4, len(shown))
    fig, axes = figure(ncols=cols, nrows=-(-len(shown) // cols), width=3.0, height=3.0)
    colours = ["tab:red", "tab:blue", "tab:green", "tab:orange", "tab:purple"]
    for ax in axes.flat:
        ax.axis("off")
    for ax, (it, p) in zip(axes.flat, shown, strict=False):
        ax.imshow(image_tensor(it).permute(1, 2, 0).numpy())
        for b in it.boxes:
            ax.add_patch(Rectangle((b[0], b[1]), b[2] - b[0], b[3] - b[1], fill=False,
                                   edgecolor="white", linestyle="--", linewidth=1))
        for b, s, lab in zip(p["boxes"], p["scores"], p["labels"], strict=True):
            if s < threshold:
                continue
            c = colours[int(lab) % len(colours)]
            ax.add_patch(Rectangle((b[0], b[1]), b[2] - b[0], b[3] - b[1], fill=False,
                                   edgecolor=c, linewidth=1.5))
            ax.text(b[0], b[1], f"{classes[int(lab)]} {s:.2f}", color=c, fontsize=6,
                    va="bottom")
    fig.suptitle(f"detections scoring >= {threshold} (colour), truth (white, dashed)",
                 fontsize=8)
    fig.tight_layout()
    run.save_figure(fig, "detections.png")


__all__ = ["plot_detections", "predict", "score", "trivial_predictions"]
