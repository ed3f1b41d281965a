"""Diagnostics of search collapse, recorded during the search and plotted afterwards.

- softmax weights per edge and the mean edge entropy (max log K: log 5 = 1.609 on NB201);
- the count of parameter-free ops (skip, pools, none) in the current argmax cell;
- the dominant eigenvalue of the Hessian of L_val w.r.t. alpha (RobustDARTS,
  Zela et al. 2020): alpha has |E| x K = 30 entries on NB201, so the whole Hessian is
  formed exactly by double backward (one batched pass for all rows);
- the information-bottleneck plane: the compression estimate (batch entropy of the
  cell outputs after Peer et al. 2022, with genlab's earlier estimator
  ``gaussian_batch_entropy``, averaged over cells) against the prediction term
  (validation cross-entropy), one point per epoch.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from genlab.core.report import figure
from genlab.nas.entropy import edge_entropy, gaussian_batch_entropy


def mean_entropy(arch_params: torch.Tensor) -> float:
    return float(edge_entropy(arch_params.detach()).mean())


def alpha_hessian(net, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Exact Hessian of the cross-entropy on (x, y) w.r.t. the flattened arch parameters.

    Double backward: the gradient is taken with create_graph, then all |E| x K rows come
    from one batched (vmapped) backward pass against the identity. It runs on a copy of
    the network so the search's BatchNorm running statistics are left untouched.
    """
    twin = copy.deepcopy(net).train()
    alpha = twin.arch_params
    loss = F.cross_entropy(twin(x), y)
    (grad,) = torch.autograd.grad(loss, alpha, create_graph=True)
    eye = torch.eye(alpha.numel(), dtype=alpha.dtype, device=alpha.device)
    (rows,) = torch.autograd.grad(grad, alpha, grad_outputs=eye.reshape(-1, *alpha.shape),
                                  is_grads_batched=True)
    hess = rows.reshape(alpha.numel(), alpha.numel()).detach()
    return 0.5 * (hess + hess.T)


def hessian_eigenvalue(net, x: torch.Tensor, y: torch.Tensor) -> float:
    """Dominant (largest) eigenvalue of the exact alpha-Hessian of the validation loss."""
    return float(torch.linalg.eigvalsh(alpha_hessian(net, x, y).double())[-1])


@torch.no_grad()
def ib_point(net, x: torch.Tensor, y: torch.Tensor) -> dict:
    """One point of the IB plane: batch entropy of cell outputs and validation CE/accuracy."""
    was_training = net.training
    net.train()
    logits, cells = net(x, return_cells=True)
    net.train(was_training)
    outs = [gaussian_batch_entropy(o) for _, o in cells]
    drops = [gaussian_batch_entropy(i) - gaussian_batch_entropy(o) for i, o in cells]
    return {
        "val_ce": float(F.cross_entropy(logits, y)),
        "val_acc": float((logits.argmax(-1) == y).float().mean()),
        "cell_batch_entropy": float(torch.stack(outs).mean()),
        "cell_compression": float(torch.stack(drops).mean()),
    }


# -- plots ---------------------------------------------------------------------------
def plot_edge_weights(history: list[dict], edges, ops):
    """Softmax weight of every op on every edge over the search (one panel per edge)."""
    fig, axes = figure(ncols=3, nrows=(len(edges) + 2) // 3, width=4.0, height=2.8)
    steps = [h["step"] for h in history]
    for e, edge in enumerate(edges):
        ax = axes.flat[e]
        for k, op in enumerate(ops):
            ax.plot(steps, [h["arch_weights"][e][k] for h in history], label=op)
        ax.set_title(f"edge {edge}")
        ax.set_ylim(0, 1)
        ax.set_xlabel("step")
    axes.flat[0].legend(fontsize=7)
    for ax in list(axes.flat)[len(edges):]:
        ax.axis("off")
    fig.suptitle("architecture weights softmax(alpha) per edge")
    fig.tight_layout()
    return fig


def plot_search_curves(history: list[dict], max_entropy: float):
    """Mean edge entropy, parameter-free op count, Hessian eigenvalue and NB201 accuracy."""
    panels = [("mean_entropy", "mean edge entropy"), ("param_free_ops", "parameter-free ops"),
              ("hessian_eig", "Hessian eigenvalue (alpha)"), ("nb201_cifar10", "NB201 CIFAR-10 %")]
    panels = [p for p in panels if any(h.get(p[0]) is not None for h in history)]
    fig, axes = figure(ncols=len(panels), width=3.6, height=3.0)
    for ax, (key, title) in zip(axes.flat, panels, strict=False):
        pts = [(h["step"], h[key]) for h in history if h.get(key) is not None]
        ax.plot(*zip(*pts, strict=True), marker="." if len(pts) < 40 else None)
        if key == "mean_entropy":
            ax.axhline(max_entropy, ls="--", c="grey", lw=0.8, label="log K")
            ax.legend(fontsize=7)
        ax.set_title(title)
        ax.set_xlabel("step")
    fig.tight_layout()
    return fig


def plot_ib_plane(history: list[dict]):
    """IB plane: compression estimate (cell batch entropy) vs validation cross-entropy."""
    fig, axes = figure(width=4.6, height=3.8)
    ax = axes[0, 0]
    pts = [(h["cell_batch_entropy"], h["val_ce"], h["step"]) for h in history
           if h.get("cell_batch_entropy") is not None]
    if pts:
        xs, ys, steps = zip(*pts, strict=True)
        ax.plot(xs, ys, c="lightgrey", lw=0.8, zorder=1)
        sc = ax.scatter(xs, ys, c=steps, cmap="viridis", s=14, zorder=2)
        fig.colorbar(sc, ax=ax, label="step")
    ax.set_xlabel("batch entropy of cell outputs (compression estimate)")
    ax.set_ylabel("validation cross-entropy (prediction)")
    ax.set_title("information-bottleneck plane")
    fig.tight_layout()
    return fig
