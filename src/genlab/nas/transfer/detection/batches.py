"""Training and evaluation batches of a detection set, as the Trainer draws them.

A run's schedule is counted in iterations: ``epochs x steps_per_epoch`` (or ``--max-steps``),
checkpointed every ``checkpoint_steps``. The Trainer's "epoch" is one such segment of
iterations (``TrainBatches.segment(k)``: iterations ``k * checkpoint_steps`` up to the next
checkpoint), so the Trainer checkpoints and resumes at segment ends. Iteration g belongs to
data epoch ``g // steps_per_epoch``; each data epoch's order and flips come from a generator
seeded by (seed, epoch), so a segment's batches depend on nothing but its index and a
resumed run sees the batches an uninterrupted one sees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from genlab.core.seeding import make_generator
from genlab.nas.transfer.detection.records import DetectionImage, pack, sample


class Samples(torch.utils.data.Dataset):
    """Map-style view for a DataLoader: key (index, flip) -> ``records.sample``."""

    def __init__(self, items: Sequence[DetectionImage], train: bool):
        self.items, self.train = items, train

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, key):
        index, flip = key
        return sample(self.items[index], index, flip, self.train)


class TrainBatches:
    """Segments of training iterations (module docstring); ``workers`` DataLoader processes."""

    def __init__(self, items: Sequence[DetectionImage], batch_size: int, total_steps: int,
                 checkpoint_steps: int, *, seed: int = 0, flip: bool = True, workers: int = 0):
        self.items, self.seed, self.flip, self.workers = items, seed, flip, workers
        self.batch_size = min(batch_size, len(items))
        self.steps_per_epoch = max(1, len(items) // self.batch_size)
        self.total_steps, self.checkpoint_steps = total_steps, checkpoint_steps
        self.segments = math.ceil(total_steps / checkpoint_steps)

    def epoch_keys(self, epoch: int) -> list[list[tuple[int, bool]]]:
        """The batches of one data epoch: (index, flip) keys, shuffled, last partial dropped."""
        g = make_generator(self.seed, epoch)
        order = torch.randperm(len(self.items), generator=g).tolist()
        flips = (torch.rand(len(self.items), generator=g) < 0.5).tolist()
        b = self.batch_size
        return [[(i, self.flip and flips[i]) for i in order[s * b:(s + 1) * b]]
                for s in range(self.steps_per_epoch)]

    def keys(self, segment: int) -> list[list[tuple[int, bool]]]:
        """The batches of the Trainer's ``segment``."""
        first = segment * self.checkpoint_steps
        last = min(self.total_steps, first + self.checkpoint_steps)
        out, cache = [], {}
        for it in range(first, last):
            epoch, pos = divmod(it, self.steps_per_epoch)
            if epoch not in cache:
                cache = {epoch: self.epoch_keys(epoch)}
            out.append(cache[epoch][pos])
        return out

    def segment(self, segment: int):
        """Iterable of packed (images, targets) batches: the Trainer's BatchSource."""
        return torch.utils.data.DataLoader(Samples(self.items, train=True),
                                           batch_sampler=self.keys(segment), collate_fn=pack,
                                           num_workers=self.workers)


def eval_batches(items: Sequence[DetectionImage], indices: Sequence[int], batch_size: int,
                 workers: int = 0):
    """Packed batches of ``indices`` in order, unflipped, every box kept."""
    keys = [(i, False) for i in indices]
    chunks = [keys[s:s + batch_size] for s in range(0, len(keys), batch_size)]
    return torch.utils.data.DataLoader(Samples(items, train=False), batch_sampler=chunks,
                                       collate_fn=pack, num_workers=workers)
