"""Per-sample gradients of one layer from its input and its output gradient (one rule per type).

A layer y = f(x; theta) called on a batch, with B = d(sum_i L_i)/dy its output gradient,
contributes to the per-sample gradient of theta the term J_theta f(x_i)^T B_i (sample i's
rows only). Two shapes of answer:

- :class:`MatmulFactors` for ``nn.Linear`` and ``nn.Conv2d`` (groups 1, zero padding): with
  A_i the layer's input rows (L positions x k features; a column of ones when there is a
  bias; unfolded patches for a convolution, Goodfellow 2015; Rochette et al. 2019) and B_i
  the output-gradient rows (L x o), the per-sample gradient of [W | b] is B_i^T A_i. Norms
  and inner products never need it: <B_i^T A_i, B_j^T A_j> = sum_{l,m} (a_il . a_jm)(b_il .
  b_jm) ("ghost norm", Goodfellow 2015; Li et al. 2022; Bu et al. 2023); with one position
  (a plain Linear) it is (a_i . a_j)(b_i . b_j). Each operation takes whichever of the ghost
  form (cost ~ L^2 (k + o) per pair) and the materialised B_i^T A_i (cost ~ L o k per
  sample) is cheaper, in sample chunks that bound the memory.
- :class:`DenseGrads` for everything else: the per-sample gradients as a (b, d_layer)
  matrix. BatchNorm and LayerNorm have closed forms (sums of B and of B * x_hat); any other
  module with parameters falls back to torch.func (vmap over samples of the vjp of the
  module alone, its children held fixed).

Under BatchNorm in training mode the samples interact through the batch statistics; then
these rules give the per-sample *contributions* B_i^T A_i, whose mean is exactly the batch
gradient (our definition for that case; the derivative of each sample's own loss through
the batch statistics differs, see ghost.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vjp, vmap

#: elements one temporary may hold before an operation is split into sample chunks
CHUNK_ELEMENTS = 1 << 24


def _sample_chunks(b: int, per_sample: int):
    step = max(1, CHUNK_ELEMENTS // max(1, per_sample))
    for start in range(0, b, step):
        yield slice(start, min(b, start + step))


@dataclass
class MatmulFactors:
    """Per-sample gradients B_i^T A_i of a Linear/Conv2d layer (and B_i^T 1 of its bias),
    kept in factored form. The input rows A are made on demand, a chunk of samples at a
    time (a convolution's unfolded input is k times its input), so the memory of every
    operation is bounded by CHUNK_ELEMENTS whatever the batch."""

    params: list[torch.Tensor]  # weight, then the bias if it is trained
    rows: Callable[[slice], torch.Tensor]  # samples -> (b', L, k) input rows A
    B: torch.Tensor  # (b, L, o): output-gradient rows (may be a strided view)
    k: int

    @property
    def bias(self) -> bool:
        return len(self.params) == 2

    def _chunks(self, per_sample: int):
        b, L, o = self.B.shape
        return _sample_chunks(b, max(per_sample, L * (self.k + o)))

    def per_sample(self, sl: slice) -> torch.Tensor:
        """(b', o, k) per-sample weight gradients for the samples in ``sl``."""
        A, B = self.rows(sl), self.B[sl]
        if A.shape[1] == 1:
            return B[:, 0, :, None] * A[:, 0, None, :]
        return torch.matmul(B.transpose(1, 2), A)

    def bias_grads(self) -> torch.Tensor:
        """(b, o) per-sample bias gradients."""
        return self.B.sum(1)

    def sq_norms(self) -> torch.Tensor:
        _, L, o = self.B.shape
        k, bias = self.k, float(self.bias)
        parts = []
        if L == 1:
            A = self.rows(slice(None))
            return (A[:, 0].pow(2).sum(1) + bias) * self.B[:, 0].pow(2).sum(1)
        if L * (k + o) < o * k:  # ghost: sum_{l,m} (a_l . a_m)(b_l . b_m)
            for sl in self._chunks(2 * L * L):
                A, B = self.rows(sl), self.B[sl]
                aa = torch.matmul(A, A.transpose(1, 2))
                parts.append(((aa + bias) * torch.matmul(B, B.transpose(1, 2))).sum((1, 2)))
            return torch.cat(parts)
        for sl in self._chunks(o * k):
            parts.append(self.per_sample(sl).pow(2).sum((1, 2)))
        norms = torch.cat(parts)
        return norms + self.bias_grads().pow(2).sum(1) if self.bias else norms

    def gram(self) -> torch.Tensor:
        b, L, o = self.B.shape
        k, bias = self.k, float(self.bias)
        if L == 1:
            A = self.rows(slice(None))[:, 0]
            return (A @ A.T + bias) * (self.B[:, 0] @ self.B[:, 0].T)
        ghost_cost = (b * L) ** 2 * (k + o)
        mat_cost = b * L * o * k + b * b * o * k
        if ghost_cost < mat_cost and (b * L) ** 2 <= 4 * CHUNK_ELEMENTS:
            Af, Bf = self.rows(slice(None)).reshape(b * L, k), self.B.reshape(b * L, o)
            return ((Af @ Af.T + bias) * (Bf @ Bf.T)).view(b, L, b, L).sum((1, 3))
        flat = torch.cat([self.per_sample(sl).reshape(sl.stop - sl.start, -1)
                          for sl in self._chunks(o * k)])
        K = flat @ flat.T
        if self.bias:
            bg = self.bias_grads()
            K = K + bg @ bg.T
        return K

    def weighted_sum(self, weights: torch.Tensor) -> list[torch.Tensor]:
        """sum_i w_i g_i, split into the layer's parameters."""
        _, L, o = self.B.shape
        w = weights.to(self.B.dtype)
        total = None
        for sl in self._chunks(0):
            Bw = self.B[sl] * w[sl, None, None]
            n = (sl.stop - sl.start) * L
            part = Bw.reshape(n, o).T @ self.rows(sl).reshape(n, self.k)
            total = part if total is None else total + part
        out = [total.view_as(self.params[0])]
        if self.bias:
            out.append((self.B * w[:, None, None]).sum((0, 1)))
        return out

    def materialise(self) -> list[torch.Tensor]:
        """Per parameter, its (b, *shape) per-sample gradients."""
        b = self.B.shape[0]
        out = [self.per_sample(slice(None)).reshape(b, *self.params[0].shape)]
        if self.bias:
            out.append(self.bias_grads())
        return out

    def write_into(self, blocks: list[torch.Tensor]) -> None:
        """Write each parameter's per-sample gradients into its (b, numel) block."""
        b, L, o = self.B.shape
        w_block = blocks[0].view(b, o, self.k)
        if L == 1:
            A = self.rows(slice(None))
            torch.mul(self.B[:, 0, :, None], A[:, 0, None, :], out=w_block)
        else:  # matmul into a strided block falls back to a per-sample loop: copy instead
            for sl in self._chunks(o * self.k):
                w_block[sl].copy_(self.per_sample(sl))
        if self.bias:
            torch.sum(self.B, 1, out=blocks[1])


@dataclass
class DenseGrads:
    """Per-sample gradients of a layer as one (b, d_layer) matrix."""

    params: list[torch.Tensor]
    G: torch.Tensor  # (b, d_layer), parameters concatenated in order

    def sq_norms(self) -> torch.Tensor:
        return self.G.pow(2).sum(1)

    def gram(self) -> torch.Tensor:
        return self.G @ self.G.T

    def weighted_sum(self, weights: torch.Tensor) -> list[torch.Tensor]:
        total = weights.to(self.G.dtype) @ self.G
        return [t.view_as(p) for t, p in zip(self._pieces(total), self.params, strict=True)]

    def materialise(self) -> list[torch.Tensor]:
        b = self.G.shape[0]
        return [t.reshape(b, *p.shape) for t, p in
                zip(self._pieces(self.G, dim=1), self.params, strict=True)]

    def write_into(self, blocks: list[torch.Tensor]) -> None:
        for block, t in zip(blocks, self._pieces(self.G, dim=1), strict=True):
            block.copy_(t)

    def _pieces(self, t: torch.Tensor, dim: int = 0):
        return torch.split(t, [p.numel() for p in self.params], dim=dim)


# -- rules: (module, inputs, kwargs, output gradient) -> factors ------------------------------
def _bias_only(params, B: torch.Tensor) -> DenseGrads:
    """A layer whose weight is frozen: the bias gradient is B summed over positions."""
    return DenseGrads(params, B.sum(1))


def _matmul(params, module, rows: Callable[[slice], torch.Tensor], k: int, B: torch.Tensor):
    if not any(module.weight is p for p in params):
        return _bias_only(params, B)
    return MatmulFactors(params, rows, B, k)


def linear_factors(module: nn.Linear, args, kwargs, grad, params, dtype):
    x = args[0].to(dtype)
    b = x.shape[0]
    A = x.reshape(b, -1, x.shape[-1])
    return _matmul(params, module, lambda sl: A[sl], A.shape[-1],
                   grad.to(dtype).reshape(b, -1, grad.shape[-1]))


def unfold(x: torch.Tensor, module: nn.Conv2d) -> torch.Tensor:
    """(b, c*kh*kw, L) patches of ``x`` as ``module`` sees them (F.unfold's layout).

    Outside autograd it is one strided view and one copy (F.unfold on CPU loops over the
    samples); inside autograd F.unfold keeps the graph.
    """
    if torch.is_grad_enabled() and x.requires_grad:
        return F.unfold(x, module.kernel_size, dilation=module.dilation,
                        padding=module.padding, stride=module.stride)
    (kh, kw), (dh, dw) = module.kernel_size, module.dilation
    (ph, pw), (sh, sw) = module.padding, module.stride
    x = F.pad(x, (pw, pw, ph, ph)) if (ph or pw) else x.contiguous()
    b, c, h, w = x.shape
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    sb, sc, sy, sx = x.stride()
    view = x.as_strided((b, c, kh, kw, oh, ow), (sb, sc, sy * dh, sx * dw, sy * sh, sx * sw),
                        x.storage_offset())
    return view.reshape(b, c * kh * kw, oh * ow)


def conv2d_factors(module: nn.Conv2d, args, kwargs, grad, params, dtype):
    x = args[0].to(dtype)
    b = x.shape[0]
    B = grad.to(dtype).reshape(b, grad.shape[1], -1).transpose(1, 2)
    k = x.shape[1] * module.kernel_size[0] * module.kernel_size[1]
    return _matmul(params, module, lambda sl: unfold(x[sl], module).transpose(1, 2), k, B)


def _sum_over(t: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    return t.sum(dims) if dims else t  # sum(()) would reduce every dimension


def _affine_dense(params, module, grad, x_hat, reduce_dims) -> DenseGrads:
    """Per-sample grads of an elementwise affine y = x_hat * w + b (w, b may be None)."""
    b = grad.shape[0]
    cols = []
    if module.weight is not None and any(module.weight is p for p in params):
        cols.append(_sum_over(grad * x_hat, reduce_dims).reshape(b, -1))
    if module.bias is not None and any(module.bias is p for p in params):
        cols.append(_sum_over(grad, reduce_dims).reshape(b, -1))
    return DenseGrads(params, torch.cat(cols, 1))


def batchnorm_factors(module: nn.modules.batchnorm._BatchNorm, args, kwargs, grad, params,
                      dtype) -> DenseGrads:
    """x_hat with the statistics the layer used: the batch's in training, else running ones."""
    x = args[0].to(dtype)
    batch_stats = module.training or (module.running_mean is None and module.running_var is None)
    running = (None, None) if batch_stats else (module.running_mean.to(dtype),
                                                module.running_var.to(dtype))
    x_hat = F.batch_norm(x, *running, None, None, batch_stats, 0.0, module.eps)
    return _affine_dense(params, module, grad.to(dtype), x_hat, tuple(range(2, x.ndim)))


def layernorm_factors(module: nn.LayerNorm, args, kwargs, grad, params, dtype) -> DenseGrads:
    x = args[0].to(dtype)
    x_hat = F.layer_norm(x, module.normalized_shape, None, None, module.eps)
    lead = tuple(range(1, x.ndim - len(module.normalized_shape)))
    return _affine_dense(params, module, grad.to(dtype), x_hat, lead)


def generic_factors(module: nn.Module, args, kwargs, grad, params, dtype) -> DenseGrads:
    """vmap over samples of the vjp of ``module`` w.r.t. its own parameters (children fixed)."""
    names = [n for n, p in module.named_parameters(recurse=False) if any(p is q for q in params)]
    b = grad.shape[0]
    batched = [isinstance(a, torch.Tensor) and a.ndim > 0 and a.shape[0] == b for a in args]

    def one(theta, cot, *sample_args):
        full = [a.unsqueeze(0) if bat else a
                for a, bat in zip(sample_args, batched, strict=True)]

        def f(th):
            return functional_call(module, th, tuple(full), kwargs)

        _, pull = vjp(f, theta)
        return pull(cot.unsqueeze(0).to(dtype))[0]

    theta = {n: getattr(module, n).to(dtype) for n in names}
    in_dims = (None, 0, *[0 if bat else None for bat in batched])
    per = vmap(one, in_dims=in_dims)(theta, grad, *args)
    G = torch.cat([per[n].reshape(b, -1) for n in names], 1)
    return DenseGrads([getattr(module, n) for n in names], G)


def additive_factors(module: nn.Module, args, kwargs, grad, params, dtype) -> DenseGrads:
    """Per-sample grads of y = x + theta (theta broadcast over the batch): B_i, summed over the
    dimensions theta broadcasts along. For a module with one parameter, e.g. a position table."""
    (theta,) = params
    grad = grad.to(dtype)
    b = grad.shape[0]
    shape = (1,) * (grad.ndim - theta.ndim) + tuple(theta.shape)
    dims = tuple(i for i in range(1, grad.ndim) if shape[i] == 1 and grad.shape[i] != 1)
    return DenseGrads(params, _sum_over(grad, dims).reshape(b, -1))


def _conv_supported(module: nn.Conv2d) -> bool:
    return (module.groups == 1 and module.padding_mode == "zeros"
            and not isinstance(module.padding, str))


#: (type, condition, rule), first match wins; any other module with parameters: generic.
#: Modules defined elsewhere add their rule with :func:`register_rule`.
RULES: list[tuple[type, Callable[[nn.Module], bool], Callable]] = [
    (nn.Linear, lambda m: True, linear_factors),
    (nn.Conv2d, _conv_supported, conv2d_factors),
    (nn.modules.batchnorm._BatchNorm, lambda m: m.affine, batchnorm_factors),
    (nn.LayerNorm, lambda m: True, layernorm_factors),
]


def register_rule(kind: type, rule: Callable, condition: Callable[[nn.Module], bool] | None = None
                  ) -> None:
    """Use ``rule`` for modules of type ``kind`` (checked before the built-in rules)."""
    RULES.insert(0, (kind, condition or (lambda m: True), rule))


def rule_for(module: nn.Module) -> Callable:
    """The rule that turns ``module``'s recorded call into per-sample factors."""
    for kind, ok, rule in RULES:
        if isinstance(module, kind) and ok(module):
            return rule
    return generic_factors
