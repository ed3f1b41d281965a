"""Data-parallel training without a model wrapper: gradient all-reduce and global BatchNorm.

Rank r holds n_r of the N samples of a global batch and computes the mean loss f_r of
its share. One process would minimise the mean over the whole batch,
L = sum_r w_r f_r with w_r = n_r / N, so :class:`GradientSync` replaces every gradient
by sum_r w_r grad f_r at the end of each backward pass (one flat all-reduce per
device and dtype). With equal shares this is DDP's average; with unequal ones (the last
batch of an epoch) it is still the one-process gradient.

Why not DistributedDataParallel: DDP needs every forward to go through its wrapper,
and genlab's trainers (and their subclasses) call ``self.model`` directly, ask for its
attributes and save its state_dict. Hooks on the parameters keep the model as it is:
every closure, every optimiser (two-pass sharpness-aware ones included) is data-parallel unchanged.
:meth:`GradientSync.no_sync` skips the reduction (gradient accumulation, a two-pass optimiser's
per-rank perturbation).

BatchNorm (our handling of per-rank statistics): each rank's batch statistics differ
from the global batch's, so P processes would not train the model one process trains.
:class:`GlobalBatchNorm` normalises with the statistics of the global batch, in two
passes for accuracy: mean = (sum_r S_r) / N, var = (sum_r sum (x - mean)^2) / N
(biased, as BatchNorm normalises; the running variance gets the unbiased one, as in
torch). Gradients flow through the all-reduce of the sums; its backward on rank r is
all_reduce(w_r g_r) / w_r, so that after GradientSync's weighting the gradient is
exactly dL/dtheta. Unlike torch.nn.SyncBatchNorm it also runs on CPU (gloo).
:func:`convert_batchnorm` swaps it in, sharing parameters and buffers, so optimisers
and checkpoints see the same tensors and the same state_dict keys.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from genlab.core.parallel.distributed import global_sum, is_distributed, world_size


class GradientSync:
    """All-reduce the gradients of ``params`` at the end of every backward pass.

    ``share`` is this rank's weight w_r = n_r / N for the coming step (default 1 / P).
    Only parameters that received a gradient on some rank in the pass are reduced; a
    parameter without a gradient on this rank contributes zeros.
    """

    def __init__(self, params: Iterable[torch.Tensor]):
        seen, unique = set(), []
        for p in params:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                unique.append(p)
        self.params = unique
        self.share = 1.0 / world_size()
        self.enabled = True
        self._fired: set[int] = set()
        self._queued = False
        self._handles = [p.register_post_accumulate_grad_hook(self._hook(i))
                         for i, p in enumerate(self.params)]

    def _hook(self, index: int) -> Callable:
        def on_grad(_param):
            if not self.enabled:
                return
            self._fired.add(index)
            if not self._queued:
                self._queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._finish_backward)

        return on_grad

    @contextlib.contextmanager
    def no_sync(self):
        """Inside the block gradients stay local (they accumulate; a later synced pass reduces)."""
        previous, self.enabled = self.enabled, False
        try:
            yield
        finally:
            self.enabled = previous

    def _finish_backward(self) -> None:
        self._queued = False
        fired, self._fired = self._fired, set()
        if not is_distributed():
            return
        flags = torch.zeros(len(self.params), dtype=torch.float64)
        flags[list(fired)] = 1.0
        union = global_sum(flags)
        self.reduce([p for p, f in zip(self.params, union.tolist(), strict=True) if f > 0])

    @torch.no_grad()
    def reduce(self, params: list[torch.Tensor]) -> None:
        """grad <- sum over ranks of share * grad, for ``params`` (call on every rank)."""
        buckets: dict[tuple, list[torch.Tensor]] = {}
        for p in params:
            buckets.setdefault((p.device, p.dtype), []).append(p)
        for group in buckets.values():
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                              for p in group])
            flat.mul_(self.share)
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            offset = 0
            for p in group:
                part = flat[offset : offset + p.numel()].view_as(p)
                offset += p.numel()
                if p.grad is None:
                    p.grad = part.clone(memory_format=torch.preserve_format)
                else:
                    p.grad.copy_(part)

    def close(self) -> None:
        """Remove the hooks (the parameters train as in one process again)."""
        for h in self._handles:
            h.remove()
        self._handles = []


class _WeightedAllReduce(torch.autograd.Function):
    """Forward: the sum over ranks. Backward on rank r: all_reduce(w_r g) / w_r (see module)."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor, share: float) -> torch.Tensor:
        ctx.share = share
        out = tensor.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        g = (grad * ctx.share).contiguous()
        dist.all_reduce(g, op=dist.ReduceOp.SUM)
        return g / ctx.share, None


def global_moments(x: torch.Tensor, share: float | None, dims: list[int]
                   ) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Mean, biased variance and count over ``dims`` of the global batch (differentiable).

    ``share`` is this rank's w_r (see module); None takes it from the counts (this rank's
    elements over all ranks', which is w_r when ``dims`` include the batch dimension).
    Every rank must call it, with the same shapes apart from the reduced dimensions.
    """
    local_count = 1
    for d in dims:
        local_count *= x.shape[d]
    if not is_distributed():
        return x.mean(dims), x.var(dims, unbiased=False), float(local_count)
    count = float(global_sum([local_count], device="cpu")[0])
    if share is None:
        share = local_count / count
    mean = _WeightedAllReduce.apply(x.sum(dims), share) / count
    shape = [1 if d in dims else x.shape[d] for d in range(x.dim())]
    centred = x - mean.view(shape)
    var = _WeightedAllReduce.apply((centred * centred).sum(dims), share) / count
    return mean, var, count


_GLOBAL_STATISTICS = [False]


@contextlib.contextmanager
def global_batch_statistics():
    """Inside the block :func:`batch_moments` and :func:`gather_batch` see the global batch.

    Every rank must enter it around the same computation (they communicate); outside it,
    and in one process, both are the plain local computation.
    """
    previous, _GLOBAL_STATISTICS[0] = _GLOBAL_STATISTICS[0], True
    try:
        yield
    finally:
        _GLOBAL_STATISTICS[0] = previous


def _global_now() -> bool:
    return _GLOBAL_STATISTICS[0] and is_distributed()


def global_statistics_active() -> bool:
    """True inside :func:`global_batch_statistics` under torchrun: batch statistics read
    now are the global batch's."""
    return _global_now()


def batch_moments(x: torch.Tensor, dims: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and biased variance over ``dims``: of the global batch inside
    :func:`global_batch_statistics` under torchrun, else of ``x`` (differentiable)."""
    if not _global_now():
        return x.mean(dims), x.var(dims, unbiased=False)
    mean, var, _ = global_moments(x, None, dims)
    return mean, var


class _WeightedAllGather(torch.autograd.Function):
    """Forward: every rank's rows (rank order). Backward on rank r: its rows of
    all_reduce(w_r g) / w_r, the weighting GradientSync undoes (see module)."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor, sizes: list[int], rank_: int) -> torch.Tensor:
        n = sum(sizes)
        ctx.share, ctx.rows = sizes[rank_] / n, (sum(sizes[:rank_]), sizes[rank_])
        longest = max(sizes)
        padded = tensor.new_zeros((longest, *tensor.shape[1:]))
        padded[: tensor.shape[0]] = tensor
        parts = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(parts, padded.contiguous())
        return torch.cat([p[:s] for p, s in zip(parts, sizes, strict=True)])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        g = (grad * ctx.share).contiguous()
        dist.all_reduce(g, op=dist.ReduceOp.SUM)
        start, count = ctx.rows
        return g[start : start + count] / ctx.share, None, None


def gather_batch(x: torch.Tensor) -> torch.Tensor:
    """The global batch's rows of ``x`` (rank order) inside :func:`global_batch_statistics`
    under torchrun, else ``x``. Differentiable: a loss computed from the gathered rows on
    every rank back-propagates to each rank's own rows so that, after GradientSync's
    weighting, the gradient is the one-process gradient of that loss."""
    if not _global_now():
        return x
    return _WeightedAllGather.apply(x, global_sizes(x.shape[0], x.device), dist.get_rank())


def global_sizes(n: int, device=None) -> list[int]:
    """Every rank's ``n`` (rank order)."""
    sizes = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(world_size())]
    dist.all_gather(sizes, torch.tensor([n], dtype=torch.long, device=device))
    return [int(s.item()) for s in sizes]


class GlobalBatchNorm(_BatchNorm):
    """BatchNorm over the global batch of all processes (train mode); plain BatchNorm in eval.

    ``sync`` provides this rank's share w_r of the batch for the backward (see module);
    without one the share follows from the sample counts. ``track_running_stats`` is read
    from the BatchNorm it replaces, so code that freezes the statistics on the original
    layers (a perturbed second pass) freezes them here too.
    """

    def __init__(self, *args, sync: GradientSync | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.sync = sync

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() < 2:
            raise ValueError(f"expected at least 2-D input (N, C, ...), got {x.dim()}-D")

    @classmethod
    def from_module(cls, bn: _BatchNorm, sync: GradientSync | None) -> GlobalBatchNorm:
        """A GlobalBatchNorm that shares ``bn``'s parameters and buffers (no copies)."""
        new = cls(bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats,
                  sync=sync)
        for name in ("weight", "bias"):
            setattr(new, name, getattr(bn, name))
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            setattr(new, name, getattr(bn, name))
        new.train(bn.training)
        object.__setattr__(new, "_source", bn)  # not a submodule: no second state_dict entry
        return new

    def _tracking(self) -> bool:
        source = self.__dict__.get("_source")
        return (source if source is not None else self).track_running_stats

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        use_batch = self.training or self.running_mean is None
        if not use_batch or not is_distributed():
            return super().forward(x)
        share = self.sync.share if self.sync is not None else None  # None: from the counts
        tracking = self.training and self._tracking() and self.running_mean is not None
        y, mean, var, count = _normalise_global(x, self.weight, self.bias, self.eps, share)
        if tracking:
            assert self.num_batches_tracked is not None  # tracking implies running stats
            self.num_batches_tracked.add_(1)
            factor = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                      else self.momentum)
            _update_running(self.running_mean, self.running_var, mean, var, count, factor)
        return y


def _normalise_global(x: torch.Tensor, weight, bias, eps: float, share: float | None):
    """BatchNorm's output with the global batch's statistics; (y, mean, var, count)."""
    dims = [0, *range(2, x.dim())]
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mean, var, count = global_moments(xf, share, dims)
    shape = [1, -1] + [1] * (x.dim() - 2)
    y = (xf - mean.view(shape)) * torch.rsqrt(var + eps).view(shape)
    if weight is not None:
        y = y * weight.view(shape)
    if bias is not None:
        y = y + bias.view(shape)
    return y.to(x.dtype), mean.detach(), var.detach(), count


@torch.no_grad()
def _update_running(running_mean, running_var, mean, var, count: float, factor: float) -> None:
    """torch's running-statistics update (the unbiased variance goes into the running one)."""
    unbiased = var * (count / max(count - 1.0, 1.0))
    running_mean.mul_(1 - factor).add_(mean.to(running_mean.dtype), alpha=factor)
    running_var.mul_(1 - factor).add_(unbiased.to(running_var.dtype), alpha=factor)


def batch_norm(x: torch.Tensor, running_mean, running_var, weight, bias, training: bool,
               momentum: float, eps: float) -> torch.Tensor:
    """``torch.nn.functional.batch_norm``, over the global batch when training inside
    :func:`global_batch_statistics` under torchrun (for networks that call it directly)."""
    if not (training and _global_now()):
        return torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias,
                                              training, momentum, eps)
    y, mean, var, count = _normalise_global(x, weight, bias, eps, None)
    if running_mean is not None:
        _update_running(running_mean, running_var, mean, var, count, momentum)
    return y


def convert_batchnorm(model: nn.Module, sync: GradientSync | None) -> Callable[[], None]:
    """Swap every BatchNorm of ``model`` for a GlobalBatchNorm in place; returns the undo."""
    swapped: list[tuple[nn.Module, str, nn.Module]] = []

    def visit(parent: nn.Module) -> None:
        for name, child in list(parent.named_children()):
            if isinstance(child, _BatchNorm) and not isinstance(child, GlobalBatchNorm):
                setattr(parent, name, GlobalBatchNorm.from_module(child, sync))
                swapped.append((parent, name, child))
            else:
                visit(child)

    visit(model)

    def undo() -> None:
        for parent, name, original in reversed(swapped):
            current = getattr(parent, name)
            original.train(current.training)
            setattr(parent, name, original)
        swapped.clear()

    return undo
