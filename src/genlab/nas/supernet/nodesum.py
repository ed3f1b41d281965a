"""In-place weighted node sums with a cheap backward, shared by the fused supernets.

A supernet node is node = sum(plain terms) + sum_k w_k * scale_k * t_k (w_k the softmax
weight of an edge's op, scale_k an optional constant map such as 1 / window counts or a
drop-path mask; either of w_k and scale_k may be absent, not both).
``NodeSum`` accumulates it into one tensor in place, and its backward computes
dL/dw_k = <g * scale_k, t_k> by a dot product instead of autograd's mul + sum. The backward
is itself differentiable (double backward for the alpha Hessian and hypergradients).

``NodeTerms`` collects one node's terms for it; ``ChannelSplit`` and ``shuffle_join`` are
PC-DARTS' channel split and channel shuffle in the layout of the states (the fused cells of
both cell spaces use them).
"""

from __future__ import annotations

import torch


def channels_last(x: torch.Tensor) -> bool:
    """True for a 4-d tensor dense in channels_last but not in the default layout."""
    try:  # layout queries other than the default are not implemented under vmap
        return x.dim() == 4 and not x.is_contiguous() and \
            x.is_contiguous(memory_format=torch.channels_last)
    except RuntimeError:
        return False


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sum(a * b) without materialising the product when both share a dense layout."""
    if torch.is_grad_enabled():  # the backward is itself differentiated (create_graph)
        return (a * b).sum()
    if a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype:
        if a.is_contiguous():
            return torch.dot(a.reshape(-1), b.reshape(-1))
        if channels_last(a):
            return torch.dot(a.permute(0, 2, 3, 1).reshape(-1), b.permute(0, 2, 3, 1).reshape(-1))
    return (a * b).sum()


class NodeSum(torch.autograd.Function):
    """node = sum(plain) + sum_k w_k * scale_k * t_k, accumulated in place into one tensor.

    ``w_k`` are 0-dim tensors (edge weights) or None (the term's factor is its scale alone),
    ``scale_k`` constant maps (broadcast against t_k) or None. The backward
    gives dL/dw_k = <g * scale_k, t_k> by a dot product instead of autograd's mul + sum, and
    dL/dt_k = w_k * scale_k * g.
    """

    @staticmethod
    def forward(ctx, n_plain: int, scales: tuple, *tensors: torch.Tensor) -> torch.Tensor:
        plain, rest = tensors[:n_plain], tensors[n_plain:]
        ts, ws = rest[0::2], rest[1::2]
        coefs = [w if sc is None else sc if w is None else w * sc
                 for w, sc in zip(ws, scales, strict=True)]
        # the node in channels_last if any term is (the first term's layout may be another)
        first = plain[0] if n_plain else ts[0]
        layout = torch.channels_last if any(map(channels_last, (*plain, *ts))) \
            else torch.contiguous_format
        if n_plain >= 2:
            dtype = torch.promote_types(plain[0].dtype, plain[1].dtype)
        else:
            dtype = first.dtype if n_plain else torch.result_type(ts[0], coefs[0])
        out = torch.empty_like(first, dtype=dtype, memory_format=layout)
        if n_plain >= 2:
            torch.add(plain[0], plain[1], out=out)
        elif n_plain == 1:
            out.copy_(plain[0])
        else:
            torch.mul(ts[0], coefs[0], out=out)
        for p in plain[2:]:
            out.add_(p)
        for t, c in zip(ts[1:] if n_plain == 0 else ts, coefs[1:] if n_plain == 0 else coefs,
                        strict=True):
            out.addcmul_(t, c)
        ctx.n_plain, ctx.scales = n_plain, scales
        ctx.channels_last = channels_last(out)
        # a term is needed in the backward only for its weight's gradient (a drop-path term
        # with a scale alone, or a weight without gradient, saves nothing)
        needs = ctx.needs_input_grad[2 + n_plain:]
        ctx.save_for_backward(*(t if needs[2 * i + 1] else None for i, t in enumerate(ts)), *ws)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        n = ctx.n_plain
        saved = ctx.saved_tensors
        k = len(saved) // 2
        ts, ws = saved[:k], saved[k:]
        needs = ctx.needs_input_grad[2:]
        if ctx.channels_last and not grad.is_contiguous(memory_format=torch.channels_last):
            # the terms' backwards (BN, conv) are 2-3x slower on CPU when the gradient's
            # layout differs from their input's; the incoming one is often NCHW (a slice of
            # the cell output's gradient)
            grad = grad.contiguous(memory_format=torch.channels_last)
        grads = [grad if needs[i] else None for i in range(n)]
        for idx, (t, w, sc) in enumerate(zip(ts, ws, ctx.scales, strict=True)):
            need_t, need_w = needs[n + 2 * idx], needs[n + 2 * idx + 1]
            g = grad if sc is None else grad * sc
            g_w = _dot(g, t) if need_w else None
            g_t = None
            if need_t and w is None:
                g_t = g
            elif need_t:
                # out of place when the backward itself is differentiated (create_graph)
                in_place = sc is not None and not torch.is_grad_enabled()
                g_t = g.mul_(w) if in_place else g * w
            grads += [g_t, g_w]
        return (None, None, *grads)


class NodeTerms:
    """The terms of one node sum (``NodeSum``): plain tensors, and (tensor, weight) pairs with
    an optional per-sample scale (a drop-path mask); a weight None: the scale alone."""

    __slots__ = ("plain", "weighted", "scales")

    def __init__(self):
        self.plain, self.weighted, self.scales = [], [], []

    def add(self, t: torch.Tensor, weight: torch.Tensor | None,
            scale: torch.Tensor | None) -> None:
        if weight is None and scale is None:
            self.plain.append(t)
        else:
            self.weighted += [t, weight]
            self.scales.append(scale)

    def total(self) -> torch.Tensor:
        return NodeSum.apply(len(self.plain), tuple(self.scales), *self.plain, *self.weighted)


def shuffle_join(ops: torch.Tensor, rest: torch.Tensor, groups: int) -> torch.Tensor:
    """``channel_shuffle(cat([ops, rest]), groups)`` (genlab.nas.supernet.cells) in one copy, in the
    memory format of ``ops``: channel i * groups + g of the result is channel i of part g."""
    parts = [ops, *rest.split(ops.shape[1], dim=1)]
    if memory_format_of(ops) is torch.channels_last:
        out = torch.stack([p.permute(0, 2, 3, 1) for p in parts], dim=-1)  # (N, H, W, C', G)
        return out.flatten(3).permute(0, 3, 1, 2)
    return torch.stack(parts, dim=2).flatten(1, 2)


def memory_format_of(x: torch.Tensor) -> torch.memory_format:
    """channels_last for a tensor dense in it (``channels_last``), else the default layout."""
    return torch.channels_last if channels_last(x) else torch.contiguous_format


class ChannelSplit(torch.autograd.Function):
    """PC-DARTS' (x[:, :C'], x[:, C':]): the ops' channels dense in x's layout, the bypassed
    ones a view; the backward joins their gradients in x's layout (slicing's own backward
    gives an NCHW gradient, and the BN and conv backwards before it are 2-3x slower on CPU
    when the layouts differ)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, width: int):
        ctx.layout = memory_format_of(x)
        return x[:, :width].contiguous(memory_format=ctx.layout), x[:, width:]

    @staticmethod
    def backward(ctx, g_ops: torch.Tensor, g_rest: torch.Tensor):  # unused: zeros
        return torch.cat([g_ops, g_rest], dim=1).contiguous(memory_format=ctx.layout), None
