"""Plots of a gaze run: gaze arrows on test images, router assignment, loss curves."""

from __future__ import annotations

import numpy as np

from genlab.core.report import figure
from genlab.core.runs import RunDir


def loss_curves(metrics: list[dict]):
    """Training loss terms and source-val / target angular error per epoch."""
    fig, axes = figure(ncols=2, width=4.6, height=3.2)
    epochs = [m["epoch"] for m in metrics]
    for key in sorted({k for m in metrics for k in m if k.startswith("train_")}):
        axes[0, 0].plot(epochs, [m.get(key) for m in metrics], marker="o", ms=3, label=key)
    axes[0, 0].set(xlabel="epoch", ylabel="loss", title="training losses")
    axes[0, 0].legend(fontsize=7)
    for key, label in (
        ("val_mean_deg", "source val (held-out subjects)"),
        ("target_mean_deg", "target domain"),
    ):
        axes[0, 1].plot(epochs, [m.get(key) for m in metrics], marker="o", ms=3, label=label)
    axes[0, 1].set(xlabel="epoch", ylabel="mean angular error (deg)", title="angular error")
    axes[0, 1].legend(fontsize=7)
    return fig


def router_assignment(shares: dict[str, list[float]]):
    """Stacked bars: share of each domain's images whose top-1 expert is k."""
    fig, axes = figure(width=max(3.0, 1.4 * len(shares) + 1.5), height=3.2)
    ax = axes[0, 0]
    names = list(shares)
    k = len(next(iter(shares.values())))
    bottom = np.zeros(len(names))
    colours = [f"C{i % 10}" for i in range(k)]
    for j in range(k):
        vals = np.array([shares[n][j] for n in names])
        ax.bar(names, vals, bottom=bottom, color=colours[j], label=f"expert {j}")
        bottom += vals
    ax.set(ylabel="share of images (top-1 expert)", ylim=(0, 1), title="router assignment")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


def gaze_arrow_grid(images, gaze, pred, count: int = 16):
    """Test images with true (and predicted) gaze arrows, via genlab.gaze.draw."""
    from genlab.gaze.draw import draw_gaze_arrows

    n = min(count, len(images))
    imgs = images[:n].permute(0, 2, 3, 1).numpy()
    imgs = (imgs * 255).clip(0, 255).astype(np.uint8)
    return draw_gaze_arrows(imgs, gaze[:n].numpy(), pred=None if pred is None else pred[:n].numpy())


def save_image_or_figure(run: RunDir, obj, name: str) -> None:
    """Save a matplotlib figure or an RGB uint8 array as a PNG in the run folder."""
    if hasattr(obj, "savefig"):
        run.save_figure(obj, name)
        return
    import cv2

    arr = np.asarray(obj)
    cv2.imwrite(str(run.file(name)), arr[..., ::-1] if arr.ndim == 3 else arr)


def save_run_plots(run: RunDir, data, pred, summary: dict) -> None:
    """loss_curves.png, router_assignment.png (MoEGaze) and gaze_arrows.png of a run."""
    metrics = run.metrics()
    if metrics:
        run.save_figure(loss_curves(metrics), "loss_curves.png")
    router = summary.get("router", {})
    if router.get("source", {}).get("top1_share"):
        shares = {
            f"source {summary['source']}": router["source"]["top1_share"],
            f"target {summary['target']}": router["target"]["top1_share"],
        }
        run.save_figure(router_assignment(shares), "router_assignment.png")
    save_image_or_figure(
        run, gaze_arrow_grid(data.test.images, data.test.gaze, pred), "gaze_arrows.png"
    )
