"""Plots of a gaze run: gaze arrows on target images, router assignment, loss curves."""

from __future__ import annotations

import cv2
import numpy as np

from genlab.core.report import figure
from genlab.core.runs import RunDir
from genlab.gaze.draw import draw_gaze_arrows
from genlab.gaze.metrics import predict


def loss_curves(metrics: list[dict]):
    """Training loss terms and held-out source error against the optimiser step (records
    of a grouping phase, which precede the first step, are left out)."""
    metrics = [m for m in metrics if m.get("phase") != "grouping"]
    fig, axes = figure(ncols=2, width=4.6, height=3.2)
    steps = [m.get("step", m["epoch"]) for m in metrics]
    for key in sorted({k for m in metrics for k in m if k.startswith("train_")}):
        axes[0, 0].plot(steps, [m.get(key) for m in metrics], marker="o", ms=3, label=key)
    axes[0, 0].set(xlabel="step", ylabel="loss", title="training losses")
    axes[0, 0].legend(fontsize=7)
    axes[0, 1].plot(steps, [m.get("val_mean_deg") for m in metrics], marker="o", ms=3,
                    label="source val (held-out subjects)")
    axes[0, 1].set(xlabel="step", ylabel="mean angular error (deg)", title="angular error")
    axes[0, 1].legend(fontsize=7)
    return fig


def router_assignment(shares: dict[str, list[float]]):
    """Stacked bars: share of each data set's images whose top-1 expert is k."""
    fig, axes = figure(width=max(3.0, 1.4 * len(shares) + 1.5), height=3.2)
    ax = axes[0, 0]
    names = list(shares)
    k = len(next(iter(shares.values())))
    bottom = np.zeros(len(names))
    for j in range(k):
        vals = np.array([shares[n][j] for n in names])
        ax.bar(names, vals, bottom=bottom, color=f"C{j % 10}", label=f"expert {j}")
        bottom += vals
    ax.set(ylabel="share of images (top-1 expert)", ylim=(0, 1), title="router assignment")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


def gaze_arrow_grid(images, gaze, pred, count: int = 16):
    """Images (N,3,H,W float [0, 1]) with true (green) and predicted (red) gaze arrows, under
    a legend saying which is which."""
    n = min(count, len(images))
    imgs = (images[:n].permute(0, 2, 3, 1).numpy() * 255).clip(0, 255).astype(np.uint8)
    return draw_gaze_arrows(imgs, gaze[:n].numpy(),
                            pred=None if pred is None else pred[:n].numpy(), legend=True)


def save_image(run: RunDir, image: np.ndarray, name: str) -> None:
    """Save an RGB uint8 array as a PNG in the run folder."""
    cv2.imwrite(str(run.file(name)), image[..., ::-1])


def arrows_on(model, data, device, count: int = 16) -> np.ndarray:
    """The arrow grid of a data set's first ``count`` images and the model's predictions."""
    first = data.subset(range(min(count, len(data))))
    pred = predict(model, first, device, batch_size=count).gaze
    return gaze_arrow_grid(first.preview(count), first.labels.gaze, pred, count)


def save_run_plots(run: RunDir, model, data, device, summary: dict) -> None:
    """loss_curves.png, router_assignment.png (routed models) and gaze_arrows.png of a run."""
    metrics = run.metrics()
    if metrics:
        run.save_figure(loss_curves(metrics), "loss_curves.png")
    shares = {"held-out source": summary["router"]["source"].get("top1_share")}
    shares.update({name: (t or {}).get("router", {}).get("top1_share")
                   for name, t in summary["targets"].items()})
    shares = {k: v for k, v in shares.items() if v}
    if shares:
        run.save_figure(router_assignment(shares), "router_assignment.png")
    name = summary["target"]
    target = data.targets[name]
    if target.labels.labelled:
        save_image(run, arrows_on(model, target, device), "gaze_arrows.png")
