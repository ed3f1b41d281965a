"""A search's batch of each step (:class:`StepBatches`): step-indexed, seeded, streamed from
image files ahead of the step that needs them."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from genlab.core.data import Batches, read_rows, streamed


class EpochOrders:
    """The rows of each step's batch: step t is batch t mod L of epoch t div L, each epoch a
    fresh shuffle of the seeded ``Batches`` (the two most recent epochs kept)."""

    def __init__(self, batches: Batches):
        self.batches = batches
        self._orders: dict[int, list[torch.Tensor]] = {}  # epoch -> its batches' rows

    def rows(self, step: int) -> torch.Tensor:
        """The rows of the split that make the batch of ``step``."""
        epoch, idx = divmod(step, len(self.batches))
        if epoch not in self._orders:
            if len(self._orders) >= 2:  # the stream reads ahead; an epoch's order is fixed by
                self._orders.pop(min(self._orders))  # the seed, made again if asked again
            self._orders[epoch] = list(self.batches.epoch_indices(epoch))
        return self._orders[epoch][idx]


def _rows_from(orders: EpochOrders, step: int) -> Iterator[torch.Tensor]:
    """The rows of ``step``, ``step + 1``, ... (endless). It holds the orders, not the
    StepBatches that holds the stream: no reference cycle keeps a finished stream's DataLoader
    workers alive until the garbage collector runs (which then waits 5 s for each worker, the
    queues it would signal them through being closed by then)."""
    while True:
        yield orders.rows(step)
        step += 1


class StepBatches:
    """Step-indexed batches of one split (a search's stream): the batch of step t is given by
    :class:`EpochOrders`. Image files are streamed (module doc): steps asked for in order come
    from one DataLoader's workers."""

    def __init__(self, split, batch_size: int, seed: int):
        self.split = split
        self.batches = Batches(split, batch_size, seed=seed, drop_last=len(split) >= batch_size)
        self.orders = EpochOrders(self.batches)
        self._stream: Iterator | None = None  # image files: the stream, and the step it is at
        self._next = -1
        self._last: tuple[int, tuple] | None = None

    def __len__(self):
        return len(self.batches)

    def rows(self, step: int) -> torch.Tensor:
        """The rows of the split that make the batch of ``step``."""
        return self.orders.rows(step)

    def at(self, step: int):
        """The (images, labels) batch of ``step``."""
        if self._last is not None and self._last[0] == step:
            return self._last[1]
        rows = self.rows(step)
        if not streamed(self.split.images):
            return self.split.images[rows], self.split.labels[rows]
        stream = self._stream
        if stream is None or step != self._next:
            stream = self._stream = read_rows(self.split.images, _rows_from(self.orders, step))
        x = next(stream)
        self._next = step + 1
        self._last = (step, (x, self.split.labels[rows]))
        return self._last[1]
