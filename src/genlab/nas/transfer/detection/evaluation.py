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
from genlab.nas.transfer.detection.metrics import found_boxes, trivial_detector, voc_map

PICTURE_IMAGES = 8  # the evaluation images detections.png draws
PICTURE_THRESHOLD = 0.5  # the score from which detections.png draws a detection


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


def picture_found(items, predictions, classes, count: int = PICTURE_IMAGES,
                  threshold: float = PICTURE_THRESHOLD) -> tuple[dict, list[dict]]:
    """What detections.png shows: ``metrics.found_boxes`` at ``threshold`` over the first
    ``count`` images, and of each of them (matching is within an image, so the images'
    counts add up to the total)."""
    shown = list(zip(items, predictions, strict=True))[:count]
    total = found_boxes([p for _, p in shown], [it.target() for it, _ in shown], len(classes),
                        threshold)
    return total, [found_boxes([p], [it.target()], len(classes), threshold)
                   for it, p in shown]


def plot_detections(run, items, predictions, classes, count: int = PICTURE_IMAGES,
                    threshold: float = PICTURE_THRESHOLD) -> dict:
    """detections.png (on the main rank): the first ``count`` evaluation images, each true
    box dashed white on black, each detection scoring at least ``threshold`` in its class's
    colour with class and score (inside its top-left corner, stacked below any label near
    it), each panel titled with its counts. Returns the counts the
    picture shows (``picture_found``'s total), on every rank."""
    total, counts = picture_found(items, predictions, classes, count, threshold)
    if not run.is_main:
        return total
    from matplotlib.patches import Rectangle

    from genlab.core.report import figure
    from genlab.nas.transfer.detection.records import image_tensor

    shown = list(zip(items, predictions, counts, strict=False))
    cols = min(4, len(shown))
    fig, axes = figure(ncols=cols, nrows=-(-len(shown) // cols), width=3.0, height=3.2)
    colours = ["tab:red", "tab:blue", "tab:green", "tab:orange", "tab:purple"]
    for ax in axes.flat:
        ax.axis("off")
    for ax, (it, p, c) in zip(axes.flat, shown, strict=False):
        ax.imshow(image_tensor(it).permute(1, 2, 0).numpy())
        for b in it.boxes:
            for colour, style in (("black", "-"), ("white", "--")):
                ax.add_patch(Rectangle((b[0], b[1]), b[2] - b[0], b[3] - b[1], fill=False,
                                       edgecolor=colour, linestyle=style, linewidth=1.2))
        labels: list[tuple[float, float]] = []  # top-left corners of the labels placed
        row, span = 0.06 * it.height, 0.25 * it.width  # a label's height and width, about
        for b, s, lab in zip(p["boxes"], p["scores"], p["labels"], strict=True):
            if s < threshold:
                continue
            colour = colours[int(lab) % len(colours)]
            ax.add_patch(Rectangle((b[0], b[1]), b[2] - b[0], b[3] - b[1], fill=False,
                                   edgecolor=colour, linewidth=2))
            y = float(b[1])
            while any(abs(b[0] - u) < span and abs(y - v) < row for u, v in labels):
                y += row  # one row down, below the labels it would cover
            labels.append((float(b[0]), y))
            ax.annotate(f"{classes[int(lab)]} {s:.2f}", (b[0], y), (1, -1),
                        textcoords="offset points", color="white", fontsize=6, va="top",
                        bbox={"facecolor": colour, "edgecolor": "none", "pad": 1})
        ax.set_title(f"found {c['found']} of {c['boxes']}" +
                     (f", {c['other']} other" if c["other"] else ""), fontsize=8)
    fig.suptitle(f"{total['found']} of {total['boxes']} true boxes (dashed white on black) "
                 f"found by a detection of their class scoring >= {threshold} with IoU > "
                 f"{total['iou_threshold']} (solid, colour by class); {total['other']} other "
                 "detection(s) drawn", fontsize=8)
    fig.tight_layout()
    run.save_figure(fig, "detections.png")
    return total


__all__ = ["picture_found", "plot_detections", "predict", "score", "trivial_predictions"]
