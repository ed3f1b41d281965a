"""Architecture steps of bilevel search: first order, and DARTS' second-order (unrolled) one.

``bilevel_step`` is one step of a search: alpha on the val batch (``first_order_arch_step``
or ``second_order_arch_step``), then the weights on the train batch.

Second order (Liu et al., ICLR-19, eq. 6-8; quark0/darts architect.py, identical in
RobustDARTS): with eta the current weight learning rate, mu the SGD momentum, lambda the
weight decay and m the momentum buffer,

    w' = w - eta (mu m + grad_w L_train(w, alpha) + lambda w)          (virtual step)
    g  = grad_alpha L_val(w', alpha) - eta grad2_{alpha,w} L_train(w, alpha) v,
    v  = grad_w' L_val(w', alpha),

the mixed second derivative times v by central finite differences at w +- R v,
R = 0.01 / ||v|| (v over all weight tensors). Here L_val includes the regulariser's term
lambda_t R(alpha, ...) (beta-DARTS' second-order path drops it): a penalty that reads the
cells' features is evaluated at w' and enters v as well. Every pass at w', w + R v and w - R v
runs through ``torch.func.functional_call`` with copies of the BatchNorm buffers, so the
network's weights and running statistics are untouched (upstream updates them twice more).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.func import functional_call

from genlab.core.errors import ConfigError
from genlab.nas import diagnostics as diag

# val_objective(net_call, x, y) -> L_val + lambda_t R, with net_call(x, probe=None) -> logits
ValObjective = Callable[[Callable, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class WeightStep:
    """What the virtual step needs from the weight optimiser (SGD): lr, momentum, decay."""

    lr: float
    momentum: float
    weight_decay: float

    @classmethod
    def of(cls, opt: torch.optim.Optimizer) -> WeightStep:
        group = opt.param_groups[0]
        return cls(group["lr"], group.get("momentum", 0.0), group.get("weight_decay", 0.0))


def weights_of(net) -> tuple[list[str], list[torch.Tensor]]:
    """(names, tensors) of the weights of ``net`` (every parameter but the alphas), in order."""
    alpha_ids = {id(a) for a in net.arch_parameters()}
    pairs = [(n, p) for n, p in net.named_parameters() if id(p) not in alpha_ids]
    return [n for n, _ in pairs], [p for _, p in pairs]


def call_with(net, names: list[str], tensors: list[torch.Tensor], x: torch.Tensor, probe=None):
    """net(x) with the weights ``tensors`` and fresh copies of the buffers."""
    state = dict(zip(names, tensors, strict=True))
    state.update({n: b.clone() for n, b in net.named_buffers()})
    kwargs = {} if probe is None else {"probe": probe}
    # no per-cell checkpointing here: its rerun in the backward would read the network's own
    # weights, not ``tensors``
    kept = getattr(net, "checkpoint_cells", False)
    net.checkpoint_cells = False
    try:
        return functional_call(net, state, (x,), kwargs, strict=False)
    finally:
        net.checkpoint_cells = kept


def unrolled_arch_grads(net, train_batch, val_batch, val_objective: ValObjective,
                        step: WeightStep, momentum_buffers: list[torch.Tensor | None],
                        r: float = 1e-2) -> list[torch.Tensor]:
    """The second-order gradient of each alpha (``net.arch_parameters()`` order).

    ``val_objective(net_call, x, y)`` returns L_val + lambda_t R for the logits function
    ``net_call(x, probe=None)``; ``momentum_buffers`` are the SGD buffers of the weights in
    ``net.weight_parameters()`` order (None where absent).
    """
    alphas = list(net.arch_parameters())
    names, w = weights_of(net)
    xt, yt = train_batch
    xv, yv = val_batch
    train_loss = F.cross_entropy(call_with(net, names, w, xt), yt)
    g_w = torch.autograd.grad(train_loss, w, allow_unused=True)
    with torch.no_grad():
        w_virtual = []
        for p, g, m in zip(w, g_w, momentum_buffers, strict=True):
            d = (torch.zeros_like(p) if g is None else g) + step.weight_decay * p
            if m is not None:
                d = d + step.momentum * m
            w_virtual.append((p - step.lr * d).requires_grad_())

    def call_virtual(x, probe=None):
        return call_with(net, names, w_virtual, x, probe)

    loss = val_objective(call_virtual, xv, yv)
    grads = torch.autograd.grad(loss, alphas + w_virtual, allow_unused=True)
    d_alpha = [torch.zeros_like(a) if g is None else g for a, g in
               zip(alphas, grads[:len(alphas)], strict=True)]
    v = [torch.zeros_like(p) if g is None else g for p, g in
         zip(w_virtual, grads[len(alphas):], strict=True)]
    hvp = mixed_hessian_vector(net, names, w, v, train_batch, r)
    return [d - step.lr * h for d, h in zip(d_alpha, hvp, strict=True)]


def mixed_hessian_vector(net, names: list[str], w: list[torch.Tensor], v: list[torch.Tensor],
                         train_batch, r: float = 1e-2) -> list[torch.Tensor]:
    """grad2_{alpha,w} L_train(w, alpha) v by central differences at w +- R v, R = r / ||v||."""
    alphas = list(net.arch_parameters())
    norm = torch.cat([t.reshape(-1) for t in v]).norm()
    if float(norm) == 0.0:
        return [torch.zeros_like(a) for a in alphas]
    radius = r / norm
    xt, yt = train_batch
    sides = []
    for sign in (1.0, -1.0):
        with torch.no_grad():
            shifted = [p + sign * radius * d for p, d in zip(w, v, strict=True)]
        loss = F.cross_entropy(call_with(net, names, shifted, xt), yt)
        grads = torch.autograd.grad(loss, alphas, allow_unused=True)
        sides.append([torch.zeros_like(a) if g is None else g for a, g in
                      zip(alphas, grads, strict=True)])
    return [(gp - gm) / (2 * radius) for gp, gm in zip(*sides, strict=True)]


def exact_unrolled_arch_grads(net, train_batch, val_batch, val_objective: ValObjective,
                              step: WeightStep, momentum_buffers: list[torch.Tensor | None]
                              ) -> list[torch.Tensor]:
    """The same hypergradient by autograd through the virtual step (double backward).

    Exact (no finite differences) and expensive: the reference the tests check
    ``unrolled_arch_grads`` against, on tiny supernets.
    """
    alphas = list(net.arch_parameters())
    names, w = weights_of(net)
    xt, yt = train_batch
    xv, yv = val_batch
    train_loss = F.cross_entropy(call_with(net, names, w, xt), yt)
    g_w = torch.autograd.grad(train_loss, w, create_graph=True, allow_unused=True)
    w_virtual = []
    for p, g, m in zip(w, g_w, momentum_buffers, strict=True):
        d = (torch.zeros_like(p) if g is None else g) + step.weight_decay * p.detach()
        if m is not None:
            d = d + step.momentum * m
        w_virtual.append(p.detach() - step.lr * d)

    def call_virtual(x, probe=None):
        return call_with(net, names, w_virtual, x, probe)

    loss = val_objective(call_virtual, xv, yv)
    grads = torch.autograd.grad(loss, alphas, allow_unused=True)
    return [torch.zeros_like(a) if g is None else g for a, g in zip(alphas, grads, strict=True)]


def momentum_buffers(net, opt: torch.optim.Optimizer) -> list[torch.Tensor | None]:
    """The SGD momentum buffer of each weight of ``net`` (None before the first step)."""
    return [opt.state.get(p, {}).get("momentum_buffer") for p in weights_of(net)[1]]


# -- the architecture step of a search, then the weight step -------------------------------

def first_order_arch_step(net, a_opt, w_opt, train_batch, val_batch, reg, step: int,
                          total: int, forces: dict | None = None) -> float:
    """Adam on alpha with grad_alpha (L_val + lambda_t R) at the current weights.

    With a ``forces`` dict, also records the norms of the two parts of the alpha gradient
    (genlab.nas.diagnostics.alpha_forces; one extra backward of CE_val)."""
    xv, yv = val_batch
    a_opt.zero_grad(set_to_none=True)
    probe = reg.make_probe()
    logits = net(xv) if probe is None else net(xv, probe=probe)
    val_loss = F.cross_entropy(logits, yv)
    alphas = list(net.arch_parameters())
    ce_grads = None
    if forces is not None:
        ce_grads = torch.autograd.grad(val_loss, alphas, retain_graph=True, allow_unused=True)
    reg_term = reg(net.alphas(), step, total, probe, val_loss, yv)
    (val_loss + reg_term).backward(inputs=alphas + reg.parameters())
    if forces is not None:
        forces.update(diag.alpha_forces(ce_grads, [a.grad for a in alphas]))
    a_opt.step()
    return float(val_loss.detach())


def second_order_arch_step(net, a_opt, w_opt, train_batch, val_batch, reg, step: int,
                           total: int, forces: dict | None = None) -> float:
    """Adam on alpha with the unrolled (second-order) gradient; returns L_val at w'.

    Forces are not recorded here (the unrolled gradient has no separate CE part); the
    regularisers with extra parameters (ber-lbe) are first order only."""
    if reg.parameters():
        raise ConfigError(f"--reg {reg.name} trains extra parameters with alpha and supports "
                          "--order 1 only")
    alphas = net.alphas()
    seen = {}

    def objective(call, x, y):
        probe = reg.make_probe()
        logits = call(x) if probe is None else call(x, probe=probe)
        seen["val_loss"] = F.cross_entropy(logits, y)
        return seen["val_loss"] + reg(alphas, step, total, probe, seen["val_loss"], y)

    grads = unrolled_arch_grads(net, train_batch, val_batch, objective, WeightStep.of(w_opt),
                                momentum_buffers(net, w_opt))
    a_opt.zero_grad(set_to_none=True)
    for alpha, g in zip(net.arch_parameters(), grads, strict=True):
        alpha.grad = g
    a_opt.step()
    return float(seen["val_loss"].detach())


ARCH_STEPS = {1: first_order_arch_step, 2: second_order_arch_step}


def bilevel_step(net, a_opt, w_opt, train_batch, val_batch, reg, step: int, total: int,
                 grad_clip: float, order: int = 1, forces: dict | None = None, method=None
                 ) -> tuple[float, float]:
    """One step: alpha on the val batch (first or second order), then the weights.

    ``method`` (genlab.nas.methods.SearchMethod, None: DARTS): before its arch warm-up ends
    alpha does not move (L_val is only measured); its perturbation gives the mixing weights
    of the weight step (SDARTS), restored afterwards."""
    if method is None or method.arch_active(step, total):
        val_loss = ARCH_STEPS[order](net, a_opt, w_opt, train_batch, val_batch, reg, step,
                                     total, forces)
    else:
        with torch.no_grad():
            val_loss = float(F.cross_entropy(net(val_batch[0]), val_batch[1]))
        if forces is not None:
            forces.clear()
    xt, yt = train_batch
    mixing = None if method is None else method.perturbation.weights(net, train_batch, step,
                                                                     total)
    w_opt.zero_grad(set_to_none=True)
    weights = net.weight_parameters()
    net.mixing_override = mixing
    try:
        train_loss = F.cross_entropy(net(xt), yt)
        train_loss.backward(inputs=weights)
    finally:
        net.mixing_override = None
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(weights, grad_clip)
    w_opt.step()
    return float(train_loss.detach()), val_loss
