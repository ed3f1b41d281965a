"""Diagnostics of search collapse, recorded during the search and plotted afterwards.

- softmax weights per edge and the mean edge entropy over the rows of every alpha tensor
  (max log K: log 5 = 1.609 on NB201, log 8 = 2.079 in the DARTS space);
- the count of parameter-free ops (skip, pools, none) in the current argmax cell;
- the dominant eigenvalue of the Hessian of L_val w.r.t. all alpha tensors concatenated
  (RobustDARTS, Zela et al. 2020): 30 entries on NB201, 224 in the DARTS space (normal +
  reduce). Up to 30 entries (NB201) the whole Hessian is formed exactly by double backward
  (batched passes over chunks of rows); above, the top eigenvalue comes from 12 Lanczos
  iterations on Hessian-vector products (a few HVPs instead of one per entry; the tests
  check it against the exact Hessian);
- the information-bottleneck plane: the compression estimate (batch entropy of the
  cell outputs after Peer et al. 2022, with genlab's earlier estimator
  ``gaussian_batch_entropy``, averaged over cells) against the prediction term
  (validation cross-entropy), one point per epoch; and the batch entropy of Peer et al.
  (``batch_entropy``) of every node of every search cell (``node_entropy``, cells x nodes);
- the forces on alpha at the logging steps (first-order search): ``force_ce`` = the norm of
  the gradient of the mean validation cross-entropy on alpha, ``force_reg`` = the norm of the
  regulariser's term's gradient, ``force_ratio`` = force_reg / force_ce (all alpha tensors
  concatenated; the norm of the total gradient minus the CE part, so the regulariser's part
  includes everything it adds, e.g. ber-lbe's CE factor).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from genlab.core.report import figure
from genlab.nas.entropy import batch_entropy, edge_entropy, gaussian_batch_entropy
from genlab.nas.regularizers.base import Alphas, named
from genlab.nas.supernet.probe import CellTraces

HESSIAN_CHUNK = 32  # Hessian rows per batched double-backward pass (bounds the memory)
EXACT_MAX_ENTRIES = 30  # more alpha entries: the Lanczos estimate of the top eigenvalue
LANCZOS_ITERATIONS = 12


def mean_entropy(alphas: Alphas | torch.Tensor) -> float:
    """Mean edge entropy over the rows of every alpha tensor."""
    rows = [edge_entropy(a.detach()) for a in named(alphas).values()]
    return float(torch.cat(rows).mean())


def alpha_forces(ce_grads, total_grads) -> dict:
    """Norms of the CE part and of the rest of the alpha gradient, and their ratio (an alpha
    that got no gradient at all, e.g. the normal alpha of a supernet of reduction cells only,
    adds nothing to either)."""
    pairs = [(g, t) for g, t in zip(ce_grads, total_grads, strict=True)
             if g is not None or t is not None]
    if not pairs:
        return {"force_ce": 0.0, "force_reg": 0.0, "force_ratio": None}
    ce_grads, total_grads = zip(*pairs, strict=True)
    ce = [torch.zeros_like(t) if g is None else g for g, t in
          zip(ce_grads, total_grads, strict=True)]
    total = [torch.zeros_like(c) if t is None else t for c, t in
             zip(ce, total_grads, strict=True)]
    f_ce = float(torch.cat([g.reshape(-1) for g in ce]).norm())
    f_reg = float(torch.cat([(t - g).reshape(-1) for t, g in zip(total, ce, strict=True)]).norm())
    return {"force_ce": f_ce, "force_reg": f_reg,
            "force_ratio": f_reg / f_ce if f_ce > 0 else None}


def _alpha_gradient(net, x: torch.Tensor, y: torch.Tensor, *, batched: bool = False):
    """(alphas of a train-mode copy of ``net``, the flat gradient of CE w.r.t. them, with graph).
    ``batched``: the copy runs in the default memory layout, where vmap (the batched Hessian
    rows) has every rule it needs; a fused supernet's channels_last layout (faster on CPU for
    its own steps) makes the convolutions' double backward query a layout vmap cannot."""
    twin = copy.deepcopy(net).train()
    if batched:
        if getattr(twin, "channels_last", False):
            twin.channels_last = False
        twin.to(memory_format=torch.contiguous_format)
    alphas = list(twin.arch_parameters())
    loss = F.cross_entropy(twin(x), y)
    grads = torch.autograd.grad(loss, alphas, create_graph=True, allow_unused=True)
    flat = torch.cat([(g if g is not None else torch.zeros_like(a)).reshape(-1)
                      for g, a in zip(grads, alphas, strict=True)])
    return alphas, flat


# Device types where a batched double backward of a supernet failed in this process (a layout
# query or an op without a vmap rule): the rows are computed one by one there without trying
# again (each failed try costs a backward).
_UNBATCHED: set[str] = set()


def _hvp_rows(flat: torch.Tensor, alphas: list, vectors: torch.Tensor) -> torch.Tensor:
    """H @ v for each row v of ``vectors`` (batched by vmap; one by one where vmap lacks an op)."""
    if not flat.requires_grad:  # the loss does not depend on alpha
        return torch.zeros_like(vectors)

    def flatten(rows, batch):
        return torch.cat([(r if r is not None else vectors.new_zeros(*batch, *a.shape)).reshape(
            *batch, -1) for r, a in zip(rows, alphas, strict=True)], dim=-1)

    def one_by_one():
        return torch.stack([flatten(torch.autograd.grad(flat, alphas, grad_outputs=v,
                                                        retain_graph=True, allow_unused=True),
                                    ()) for v in vectors])

    if len(vectors) == 1 or flat.device.type in _UNBATCHED:
        return one_by_one()
    try:
        rows = torch.autograd.grad(flat, alphas, grad_outputs=vectors, is_grads_batched=True,
                                   retain_graph=True, allow_unused=True)
        return flatten(rows, (len(vectors),))
    except RuntimeError:  # e.g. max-pool double backward on channels_last has no vmap rule
        _UNBATCHED.add(flat.device.type)  # not tried again: each try costs a failed backward
        return one_by_one()


def alpha_hessian(net, x: torch.Tensor, y: torch.Tensor, chunk: int = HESSIAN_CHUNK
                  ) -> torch.Tensor:
    """Exact Hessian of the cross-entropy on (x, y) w.r.t. all alphas, flattened and concatenated.

    Double backward: the gradient is taken with create_graph, then the rows come from batched
    backward passes against blocks of ``chunk`` rows of the identity. It runs on a copy of the
    network (BatchNorm running statistics untouched) and leaves the global RNG as it was. An
    alpha the loss does not reach (a cell type absent from a tiny network) has zero rows.
    """
    with torch.random.fork_rng(devices=[]):
        alphas, flat = _alpha_gradient(net, x, y, batched=True)
        n = flat.numel()
        eye = torch.eye(n, dtype=flat.dtype, device=flat.device)
        hess = torch.cat([_hvp_rows(flat, alphas, eye[lo:lo + chunk])
                          for lo in range(0, n, chunk)]).detach()
    return 0.5 * (hess + hess.T)


def lanczos_top_eigenvalue(net, x: torch.Tensor, y: torch.Tensor,
                           iterations: int = LANCZOS_ITERATIONS) -> float:
    """Largest eigenvalue of the alpha-Hessian by Lanczos on Hessian-vector products.

    Full reorthogonalisation and a fixed pseudo-random start vector (not all ones: that lies
    in the Hessian's null space, since adding a constant to a row of alpha leaves the softmax
    unchanged): ``iterations`` HVPs instead of one per alpha entry; exact once ``iterations``
    reaches the number of entries.
    """
    with torch.random.fork_rng(devices=[]):
        alphas, flat = _alpha_gradient(net, x, y)
        n = flat.numel()
        start = torch.randn(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        basis, diagonal, off = [start / start.norm()], [], []
        for _ in range(min(iterations, n)):
            q = basis[-1]
            w = _hvp_rows(flat, alphas, q.to(flat.dtype)[None])[0].detach().double()
            diagonal.append(float(w @ q))
            stack = torch.stack(basis)
            for _ in range(2):  # twice: keeps the basis orthogonal in floating point
                w = w - stack.T @ (stack @ w)
            beta = float(w.norm())
            if len(basis) == n or beta <= 1e-12 * max(1.0, abs(diagonal[-1])):
                break
            off.append(beta)
            basis.append(w / beta)
    k = len(diagonal)
    tri = torch.diag(torch.tensor(diagonal, dtype=torch.float64))
    if k > 1:
        b = torch.tensor(off[:k - 1], dtype=torch.float64)
        tri = tri + torch.diag(b, 1) + torch.diag(b, -1)
    return float(torch.linalg.eigvalsh(tri)[-1])


def hessian_eigenvalue(net, x: torch.Tensor, y: torch.Tensor) -> float:
    """Dominant (largest) eigenvalue of the alpha-Hessian of the validation loss.

    Exact (the whole Hessian) up to EXACT_MAX_ENTRIES alpha entries (NB201: 30), Lanczos
    above (DARTS: 224); the tests check both against an explicit Hessian.
    """
    n = sum(a.numel() for a in net.arch_parameters())
    if n <= EXACT_MAX_ENTRIES:
        return float(torch.linalg.eigvalsh(alpha_hessian(net, x, y).double())[-1])
    return lanczos_top_eigenvalue(net, x, y)


@torch.no_grad()
def ib_point(net, x: torch.Tensor, y: torch.Tensor) -> dict:
    """One point of the IB plane: batch entropy of cell outputs and validation CE/accuracy
    (``val_acc`` in percent, 0-100)."""
    was_training = net.training
    net.train()
    probe = CellTraces()
    with torch.random.fork_rng(devices=[]):  # S4's noise op must not move the search's RNG
        logits = net(x, probe=probe)
    net.train(was_training)
    pairs = [(tr.inputs[-1], tr.output) for tr in probe.traces]
    outs = [gaussian_batch_entropy(o) for _, o in pairs]
    drops = [gaussian_batch_entropy(i) - gaussian_batch_entropy(o) for i, o in pairs]
    return {
        "val_ce": float(F.cross_entropy(logits, y)),
        "val_acc": 100.0 * float((logits.argmax(-1) == y).float().mean()),
        "cell_batch_entropy": float(torch.stack(outs).mean()),
        "cell_compression": float(torch.stack(drops).mean()),
        "node_entropy": [[float(batch_entropy(t)) for t in tr.nodes] for tr in probe.traces],
    }


# -- plots ---------------------------------------------------------------------------
def plot_edge_weights(history: list[dict], specs: dict):
    """softmax(alpha) over the search: per-edge curves (up to 12 rows), else per alpha tensor a
    heatmap of the final weights and the entropy of every row over the steps.

    ``specs``: the space's alpha specs (name -> AlphaSpec with row names and op names).
    """
    rows = sum(len(spec.rows) for spec in specs.values())
    if rows > 12:
        return _plot_weight_maps(history, specs)
    fig, axes = figure(ncols=3, nrows=(rows + 2) // 3, width=4.0, height=2.8)
    steps = [h["step"] for h in history]
    panels = [(name, r, row, spec.ops[r]) for name, spec in specs.items()
              for r, row in enumerate(spec.rows)]
    for ax, (name, r, row, ops) in zip(axes.flat, panels, strict=False):
        for k, op in enumerate(ops):
            ax.plot(steps, [h["arch_weights"][name][r][k] for h in history], label=op)
        ax.set_title(f"{name} {row}" if len(specs) > 1 else f"edge {row}")
        ax.set_ylim(0, 1)
        ax.set_xlabel("step")
    axes.flat[0].legend(fontsize=7)
    for ax in list(axes.flat)[rows:]:
        ax.axis("off")
    fig.suptitle("architecture weights softmax(alpha) per edge")
    fig.tight_layout()
    return fig


def _plot_weight_maps(history: list[dict], specs: dict):
    fig, axes = figure(ncols=2, nrows=len(specs), width=5.0, height=4.2)
    steps = [h["step"] for h in history]
    for (name, spec), (ax_map, ax_ent) in zip(specs.items(), axes, strict=True):
        final = torch.tensor(history[-1]["arch_weights"][name])
        image = ax_map.imshow(final, aspect="auto", cmap="viridis", vmin=0, vmax=1)
        ax_map.set_yticks(range(len(spec.rows)), spec.rows, fontsize=6)
        uniform_ops = len(set(spec.ops)) == 1
        ax_map.set_xticks(range(spec.shape[1]), spec.ops[0] if uniform_ops else
                          [f"op {k}" for k in range(spec.shape[1])], rotation=45, ha="right",
                          fontsize=6)
        ax_map.set_title(f"{name}: final softmax(alpha)", fontsize=9)
        fig.colorbar(image, ax=ax_map)
        weights = torch.tensor([h["arch_weights"][name] for h in history])  # (T, rows, K)
        entropy = -(weights * weights.clamp_min(1e-12).log()).sum(-1)
        ax_ent.plot(steps, entropy.numpy(), lw=0.8)
        ax_ent.axhline(spec.max_entropy, ls="--", c="grey", lw=0.8)
        ax_ent.set_title(f"{name}: entropy of each row", fontsize=9)
        ax_ent.set_xlabel("step")
    fig.tight_layout()
    return fig


SEARCH_CURVES = [("loss", "loss (train and val batches)"),
                 ("val_acc", "supernet val accuracy % (diagnostic batch)"),
                 ("mean_entropy", "mean edge entropy"), ("param_free_ops", "parameter-free ops"),
                 ("hessian_eig", "Hessian eigenvalue (alpha)"),
                 ("nb201_cifar10", "NB201 CIFAR-10 %")]


def plot_search_curves(history: list[dict], max_entropy: float):
    """Train and val loss (each logged step's mean over its batches), the supernet's val
    accuracy on the diagnostic batch, mean edge entropy, parameter-free op count, Hessian
    eigenvalue and NB201 accuracy: every panel the metrics hold."""
    keys = {"loss": ("train_loss", "val_loss")}
    panels = [p for p in SEARCH_CURVES
              if any(h.get(k) is not None for h in history for k in keys.get(p[0], (p[0],)))]
    fig, axes = figure(ncols=len(panels), width=3.6, height=3.0)
    for ax, (key, title) in zip(axes.flat, panels, strict=False):
        for part in keys.get(key, (key,)):
            pts = [(h["step"], h[part]) for h in history if h.get(part) is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="." if len(pts) < 40 else None,
                        label=part.split("_")[0] if key == "loss" else None)
        if key == "loss":
            ax.legend(fontsize=7)
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


def plot_node_entropy(history: list[dict]):
    """Batch entropy (Peer et al.) of every node of every search cell over the search."""
    fig, axes = figure(width=5.0, height=3.4)
    ax = axes[0, 0]
    pts = [h for h in history if h.get("node_entropy")]
    steps = [h["step"] for h in pts]
    for c, cell in enumerate(pts[0]["node_entropy"]):
        for n in range(len(cell)):
            ax.plot(steps, [h["node_entropy"][c][n] for h in pts], lw=0.9,
                    label=f"cell {c} node {n + 1}")
    ax.set_xlabel("step")
    ax.set_ylabel("batch entropy H_B (nats)")
    ax.set_title("batch entropy of the search cells' nodes")
    if sum(len(c) for c in pts[0]["node_entropy"]) <= 12:
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def plot_forces(history: list[dict]):
    """||grad CE|| and ||grad regulariser|| on alpha, and their ratio, at the logging steps."""
    fig, axes = figure(ncols=2, width=4.2, height=3.2)
    pts = [h for h in history if h.get("force_ce") is not None]
    steps = [h["step"] for h in pts]
    ax = axes[0, 0]
    ax.plot(steps, [h["force_ce"] for h in pts], label="CE")
    ax.plot(steps, [h["force_reg"] for h in pts], label="regulariser")
    ax.set_yscale("symlog", linthresh=1e-6)
    ax.set_title("gradient norm on alpha")
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    ratio = [(h["step"], h["force_ratio"]) for h in pts if h.get("force_ratio") is not None]
    if ratio:
        ax.plot(*zip(*ratio, strict=True))
    ax.set_title("force ratio reg / CE")
    for ax in axes[0]:
        ax.set_xlabel("step")
    fig.tight_layout()
    return fig


def arch_weights(net) -> dict[str, list]:
    """softmax(alpha) of every alpha of ``net``, as lists (the metrics' ``arch_weights``)."""
    return {name: F.softmax(a.detach(), dim=-1).cpu().tolist() for name, a in net.alphas().items()}


def epoch_record(space, genotype, net, x: torch.Tensor, y: torch.Tensor, table) -> dict:
    """A search's diagnostics at the end of an epoch: the derived ``genotype`` and its op
    counts, the mean edge entropy, the architecture weights, the IB point on (x, y) and, with a
    table, the genotype's accuracies (keys prefixed by the table's name)."""
    record = {"genotype": space.format(genotype), **space.op_counts(genotype),
              "mean_entropy": mean_entropy(net.alphas()), "arch_weights": arch_weights(net)}
    record.update(ib_point(net, x, y))
    if table is not None:
        for k, v in table.lookup(genotype).items():
            record[f"{space.table}_{k}"] = v
    return record
