"""Data-parallel architecture search: the bilevel step of one process, shared by P processes.

Every rank draws the same global train and validation batches (same seed, same step) and
augments them with the same per-step generators; :meth:`SearchParallel.shard` keeps this
rank's contiguous share of each. Two :class:`~genlab.core.parallel.data_parallel.GradientSync`
objects all-reduce the gradients, weighted by the share of the batch they came from: one
on the architecture parameters (the validation batch's share), one on the weights (the
training batch's share), so a last batch split unevenly still gives the one-process
gradient. Gradient clipping runs after the all-reduce, on the global gradient.

Inside :meth:`SearchParallel.step`, BatchNorm layers normalise over the global batch
(GlobalBatchNorm; its share of the batch follows from the sample counts) and batch
statistics read through :func:`genlab.core.parallel.data_parallel.batch_moments` are global too:
the ``ber-batch`` regulariser's batch entropy of the cells' inputs and outputs is the
entropy of the global batch, its gradient exact (the variance is all-reduced with the
weighted backward of the module above). ``beta`` and ``ber-kl`` read alpha only, which is
the same on every rank; ``ber`` (ber-anchor) and the other entropy-turn penalties read the
nodes' batch entropy of the global batch (genlab.nas.entropy.global_batch_entropy), so every
rank detects the turn at the same step.

The epoch diagnostics (genotype, entropy, the IB point, the Hessian eigenvalue) use a
fixed diagnostic batch that every rank holds whole: each rank computes them alone, with
the same weights and the same batch, hence the same figures, and rank 0 writes them.

Second order (``order=2``) takes the training gradient and the Hessian-vector products
inside genlab.nas.architect by ``torch.autograd.grad``, which no all-reduce reaches; under
torchrun it is refused with a clear error rather than silently computed per rank.
"""

from __future__ import annotations

import contextlib

from genlab.core.errors import ConfigError
from genlab.core.parallel.data_parallel import (
    GradientSync,
    convert_batchnorm,
    global_batch_statistics,
)
from genlab.core.parallel.distributed import (
    broadcast_module,
    global_sum,
    is_distributed,
    shard_batch,
)


class SearchParallel:
    """The data-parallel plumbing of one search (the identity in one process)."""

    def __init__(self, net, order: int = 1, extra_arch=()):
        """``extra_arch``: parameters stepped with alpha (a regulariser's learnt targets)."""
        self.net = net
        self.active = is_distributed()
        self.alpha_sync = self.weight_sync = None
        self.shares = (1.0, 1.0)
        if not self.active:
            return
        if order != 1:
            raise ConfigError("order 2 (the unrolled architecture gradient) runs in one process "
                              "only: its inner gradients are not all-reduced; use --order 1 "
                              "under torchrun")
        broadcast_module(net)
        self.alpha_sync = GradientSync(list(net.arch_parameters()) + list(extra_arch))
        self.weight_sync = GradientSync(net.weight_parameters())

    def shard(self, xt, yt, xv, yv):
        """This rank's shares of the global train and validation batches."""
        if not self.active:
            return xt, yt, xv, yv
        (xt, yt), share_t = shard_batch((xt, yt))
        (xv, yv), share_v = shard_batch((xv, yv))
        self.weight_sync.share, self.alpha_sync.share = share_t, share_v
        self.shares = (share_t, share_v)
        return xt, yt, xv, yv

    @contextlib.contextmanager
    def step(self):
        """Global BatchNorm and global batch statistics for the duration of one bilevel step."""
        if not self.active:
            yield
            return
        undo = convert_batchnorm(self.net, None)
        try:
            with global_batch_statistics():
                yield
        finally:
            undo()

    def global_losses(self, train_loss: float, val_loss: float) -> tuple[float, float]:
        """The global batches' mean losses from this rank's share means."""
        if not self.active:
            return train_loss, val_loss
        t, v = global_sum([train_loss * self.shares[0], val_loss * self.shares[1]]).tolist()
        return t, v

    def local(self):
        """Gradients stay local inside (diagnostics that every rank computes alone)."""
        if not self.active:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(self.alpha_sync.no_sync())
        stack.enter_context(self.weight_sync.no_sync())
        return stack

    def close(self) -> None:
        for sync in (self.alpha_sync, self.weight_sync):
            if sync is not None:
                sync.close()

