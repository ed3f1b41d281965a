"""DARTS-PT (Wang et al., ICLR-21): perturbation-based selection on the trained supernet.

After ruocwang/darts-pt, ``sota/cnn/projection.py`` (DARTS spaces) and
``nasbench201/projection.py`` (NB201). Selection ``pt``; it composes with every method, because
it reads the supernet only through ``mixing_weights()`` and ``mixing_override``.

Op pass, in rounds. In each round, every alpha tensor (normal then reduce in the DARTS spaces)
gets one decision: a random undecided row (``np.random.RandomState(seed).choice`` over the
undecided rows in index order, as upstream's ``np.random.choice``); each op of that row is
masked in turn (its mixing weight set to 0, the others left as they are, not renormalised)
and the supernet's validation accuracy is measured; the op whose removal gives the lowest
accuracy (the first on a tie) is fixed, its row becoming one-hot. The mixing weights of a
forward are the "projected weights": the expected weights (softmax of alpha) with the
decided rows replaced by their one-hot (or zero) rows.

Edge pass (the DARTS family only; upstream ``project_edge``): in each round, a random
undecided node with more than two inputs per cell type (nodes 3, 4, 5; node 2 has only two);
each of its input edges is removed in turn (its whole row set to 0) and the edge whose
removal gives the highest accuracy is dropped (the last on a tie), until two remain.
Upstream re-evaluates the remaining edges after each drop with the same weights (the dropped
edge is not masked in those evaluations), so its figures equal the first round's; genlab
evaluates each edge once and applies the same elimination to those figures. NB201 has no
edge pass. MobileNet: each block is a row of the op pass (ours: upstream defines no version).

Between two rounds the weights are fine-tuned ``tune_epochs`` passes of the train split
(upstream ``proj_intv`` = 5 epochs) with a fresh SGD at the search's learning rate / 10
(constant: upstream builds a cosine scheduler there but never steps it), the search's
momentum, weight decay and gradient clipping, on the projected weights; upstream also keeps
stepping alpha in those epochs, genlab steps only the weights (a selection has no
architecture optimiser). There is no tuning after the last round (it cannot change the
genotype); upstream's NB201 schedule gives its last interval 4 epochs, genlab 5.

Evaluation: upstream measures the whole validation queue, in train mode (batch statistics,
no gradients). genlab measures ``val_batches`` fixed batches (``ctx.val_batch(0 ..
val_batches - 1)``, 4 by default: 256 images at the proxy's batch of 64), in train mode;
``crit`` "acc" (upstream's default) or "loss" (the op whose removal raises the loss most).

The genotype: the DARTS family's rule (quark0/darts ``_parse``, genlab ``derive_cell``) on the
projected weights, as upstream's ``genotype()``; other spaces: their own rule on logits that
are 100 x the projected weights (one-hot rows: the decided op).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError, DivergedError
from genlab.nas.methods.base import SELECTIONS, Selection, SelectionContext

CRITS = ("acc", "loss")


def node_rows(space) -> dict[int, list[int]] | None:
    """{node: its input edges' alpha rows} of the nodes with more than two inputs, for the
    DARTS family (node 1 of 0..3 reads states 0, 1, 2: rows 2, 3, 4, ...); None elsewhere."""
    from genlab.nas.spaces.darts.genotype import STEPS, edge_row
    from genlab.nas.spaces.darts.space import DartsFamilySpace

    if not isinstance(space, DartsFamilySpace):
        return None
    return {node: [edge_row(node, j) for j in range(node + 2)] for node in range(1, STEPS)}


class Projection:
    """The projected weights of one supernet: decided rows one-hot, dropped rows zero."""

    def __init__(self, net):
        self.net = net
        self.names = list(net.alphas())
        self.fixed: dict[str, dict[int, int]] = {n: {} for n in self.names}  # row -> op
        self.dropped: dict[str, set[int]] = {n: set() for n in self.names}

    def weights(self) -> dict[str, torch.Tensor]:
        saved, self.net.mixing_override = self.net.mixing_override, None
        try:
            with torch.no_grad():
                base = {n: w.detach().clone() for n, w in self.net.mixing_weights().items()}
        finally:
            self.net.mixing_override = saved
        for name in self.names:
            w = base[name]
            for row, op in self.fixed[name].items():
                w[row] = 0.0
                w[row, op] = 1.0
            for row in self.dropped[name]:
                w[row] = 0.0
        return base

    def undecided(self, name: str) -> list[int]:
        rows = self.net.alphas()[name].shape[0]
        return [r for r in range(rows) if r not in self.fixed[name]]


def evaluate(net, weights: dict[str, torch.Tensor], batches) -> tuple[float, float]:
    """(accuracy in percent, mean cross-entropy) of ``net`` on ``batches`` with the mixing
    weights ``weights``, in train mode (batch statistics) without gradients, as upstream's
    projection ``infer(..., _eval=False)``."""
    was_training, saved = net.training, net.mixing_override
    net.train()
    net.mixing_override = weights
    correct, loss, n = 0, 0.0, 0
    try:
        with torch.no_grad():
            for x, y in batches:
                logits = net(x)
                correct += int((logits.argmax(dim=1) == y).sum())
                loss += float(F.cross_entropy(logits, y, reduction="sum"))
                n += len(y)
    finally:
        net.mixing_override = saved
        net.train(was_training)
    return 100.0 * correct / n, loss / n


def _worse(crit: str, a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Upstream's ``compare``: removal ``a`` hurts more than ``b`` (lower acc / higher loss)."""
    return a[0] < b[0] if crit == "acc" else a[1] > b[1]


def project_op(proj: Projection, name: str, row: int, score, crit: str) -> tuple[int, list]:
    """Mask each op of ``row`` in turn; the op whose removal hurts most (first on a tie)."""
    stats, best = [], None
    for op in range(proj.net.alphas()[name].shape[1]):
        weights = proj.weights()
        weights[name][row, op] = 0.0
        s = score(weights)
        stats.append(s)
        if best is None or _worse(crit, s, stats[best]):
            best = op
    proj.fixed[name][row] = best
    return best, stats


def project_edge(proj: Projection, name: str, rows: list[int], score, crit: str
                 ) -> tuple[list[int], list]:
    """Remove each input edge of a node in turn; drop the edge whose removal hurts least
    (the last on a tie), until two remain; they are kept in row order."""
    stats = {}
    for row in rows:
        weights = proj.weights()
        weights[name][row] = 0.0
        stats[row] = score(weights)
    kept = list(rows)
    while len(kept) > 2:
        drop = None
        for row in kept:
            if drop is None or not _worse(crit, stats[row], stats[drop]):
                drop = row
        kept.remove(drop)
    proj.dropped[name].update(r for r in rows if r not in kept)
    return kept, [stats[r] for r in rows]


def run_projection(space, net, score: Callable, rng: np.random.RandomState, crit: str = "acc",
                   tune: Callable[[dict], None] | None = None,
                   log: Callable[[dict], None] | None = None) -> Projection:
    """DARTS-PT's op pass then (DARTS family) edge pass on ``net`` (module docstring).
    ``score(weights)`` -> (acc, loss) of the supernet with those mixing weights; ``tune``
    (or None) fine-tunes the weights between rounds on the projected weights it is given."""
    proj = Projection(net)
    specs = space.alpha_specs()
    nodes = node_rows(space)
    rounds: list[list[tuple[str, Callable[[], dict]]]] = []

    def op_step(name):
        def step():
            row = int(rng.choice(proj.undecided(name), size=1)[0])
            op, stats = project_op(proj, name, row, score, crit)
            ops = specs[name].ops[row]
            return {"pass": "op", "alpha": name, "row": row, "edge": specs[name].rows[row],
                    "op": ops[op], "removed": {o: _stat(s) for o, s in zip(ops, stats,
                                                                           strict=True)}}
        return step

    def edge_step(name, undecided):
        def step():
            node = int(rng.choice(sorted(undecided), size=1)[0])
            undecided.discard(node)
            kept, stats = project_edge(proj, name, nodes[node], score, crit)
            labels = [specs[name].rows[r] for r in nodes[node]]
            return {"pass": "edge", "alpha": name, "node": node + 2,
                    "kept": [specs[name].rows[r] for r in kept],
                    "removed": {lb: _stat(s) for lb, s in zip(labels, stats, strict=True)}}
        return step

    counts = {n: specs[n].shape[0] for n in proj.names}
    for r in range(max(counts.values())):
        rounds.append([(n, op_step(n)) for n in proj.names if r < counts[n]])
    if nodes is not None:
        pending = {n: set(nodes) for n in proj.names}
        for _ in nodes:
            rounds.append([(n, edge_step(n, pending[n])) for n in proj.names])
    for index, steps in enumerate(rounds):
        if index and tune is not None:
            tune(proj)
        for _, step in steps:
            record = step()
            if log is not None:
                log({"select": "pt", "round": index, "crit": crit, **record})
    return proj


def _stat(s: tuple[float, float]) -> dict[str, float]:
    return {"val_acc": s[0], "val_loss": s[1]}


def projected_genotype(space, proj: Projection):
    """The genotype of the projected weights (module docstring)."""
    weights = proj.weights()
    if node_rows(space) is not None:
        from genlab.nas.spaces.darts.genotype import CELL_TYPES, STEPS, DartsGenotype, derive_cell

        cells = {c: derive_cell(weights[c], space.edge_ops[c]) for c in CELL_TYPES}
        concat = tuple(range(2, STEPS + 2))
        return DartsGenotype(cells["normal"], concat, cells["reduce"], concat)
    return space.derive({n: 100.0 * w for n, w in weights.items()})


class PTSelection(Selection):
    """DARTS-PT's projection (module docstring); params ``tune_epochs`` (passes of the train
    split between two rounds, upstream 5), ``val_batches`` (fixed validation batches of every
    measurement) and ``crit`` ("acc" | "loss")."""

    name: ClassVar[str] = "pt"
    tune_epochs: ClassVar[int] = 5
    val_batches: ClassVar[int] = 4
    crit: ClassVar[str] = "acc"

    def __init__(self, **params):
        unknown = set(params) - {"tune_epochs", "val_batches", "crit"}
        if unknown:
            raise ConfigError(f"selection pt has no parameter(s) {sorted(unknown)}; it takes "
                              "tune_epochs, val_batches, crit")
        super().__init__(**params)
        self.tune_epochs = int(params.get("tune_epochs", type(self).tune_epochs))
        self.val_batches = int(params.get("val_batches", type(self).val_batches))
        self.crit = str(params.get("crit", type(self).crit))
        if self.tune_epochs < 0 or self.val_batches < 1:
            raise ConfigError(f"selection pt needs tune_epochs >= 0 and val_batches >= 1, got "
                              f"{self.tune_epochs} and {self.val_batches}")
        if self.crit not in CRITS:
            raise ConfigError(f"selection pt: crit is one of {', '.join(CRITS)}, got "
                              f"{self.crit!r}")

    def select(self, ctx: SelectionContext):
        net = ctx.net
        batches = [ctx.val_batch(i) for i in range(self.val_batches)]

        def score(weights):
            return evaluate(net, weights, batches)

        tune = self._tuner(ctx) if self.tune_epochs else None
        proj = run_projection(ctx.space, net, score, np.random.RandomState(ctx.cfg.seed),
                              self.crit, tune, ctx.log)
        return projected_genotype(ctx.space, proj)

    def _tuner(self, ctx: SelectionContext):
        """Fine-tuning of the weights between rounds (module docstring)."""
        net, cfg = ctx.net, ctx.cfg
        weights = net.weight_parameters()
        defaults = ctx.w_opt.defaults
        opt = torch.optim.SGD(weights, lr=cfg.w_lr / 10, momentum=defaults["momentum"],
                              weight_decay=defaults["weight_decay"])
        per_epoch = len(ctx.train)
        state = {"step": cfg.steps}  # batches after the search's: the next of the stream

        def tune(proj: Projection):
            net.train()
            for _ in range(self.tune_epochs * per_epoch):
                x, y = ctx.train_batch(state["step"])
                state["step"] += 1
                net.mixing_override = proj.weights()
                try:
                    opt.zero_grad(set_to_none=True)
                    loss = F.cross_entropy(net(x), y)
                    loss.backward(inputs=weights)
                finally:
                    net.mixing_override = None
                if cfg.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(weights, cfg.grad_clip)
                if not math.isfinite(float(loss.detach())):
                    raise DivergedError(f"selection pt: non-finite loss in fine-tuning "
                                        f"(train batch {state['step']})")
                opt.step()

        return tune


SELECTIONS.register(PTSelection.name, PTSelection)
