"""Seeded mini-batches over a split (:class:`Batches`) and the batched augmentation of the
digits proxy (:func:`augment_images`), whose draws come from one generator."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from genlab.core.data.splits import Split, read_rows
from genlab.core.errors import DataError, require_positive
from genlab.core.seeding import make_generator


class Batches:
    """Seeded mini-batches over a Split; epoch ``e`` is shuffled by its own stream (a split of
    image files is decoded batch by batch by DataLoader workers: :func:`read_rows`).

    Iterating is deterministic given (seed, epoch): a resumed run sees the same batches.
    """

    def __init__(self, split: Split, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False):
        require_positive("batch_size", batch_size)
        if len(split) == 0:
            raise DataError("cannot make batches from an empty split")
        self.split, self.batch_size, self.shuffle = split, batch_size, shuffle
        self.seed, self.drop_last = seed, drop_last

    def __len__(self) -> int:
        n = len(self.split)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def epoch_indices(self, epoch: int):
        """The rows of each batch of ``epoch``, in order."""
        n = len(self.split)
        if self.shuffle:
            order = torch.randperm(n, generator=make_generator(self.seed, epoch))
        else:
            order = torch.arange(n)
        for b in range(len(self)):
            yield order[b * self.batch_size : (b + 1) * self.batch_size]

    def epoch(self, epoch: int):
        rows = list(self.epoch_indices(epoch))
        for idx, x in zip(rows, read_rows(self.split.images, rows), strict=True):
            yield x, self.split.labels[idx]

    def __iter__(self):
        return self.epoch(0)


def augment_images(x: torch.Tensor, generator: torch.Generator, *, shift: float = 1.5,
                   rotate_deg: float = 15.0, noise: float = 0.2,
                   erase: float = 0.5) -> torch.Tensor:
    """Batched random shift (pixels), rotation, Gaussian noise and random erasing.

    One affine grid_sample for the whole batch; erasing blanks a random square of a
    quarter of the side in a fraction ``erase`` of the images. Draws come only from
    ``generator`` so a run is reproducible.
    """
    n, _, h, w = x.shape
    dev = x.device
    u = lambda *s: torch.rand(*s, generator=generator).to(dev)  # noqa: E731
    if shift > 0 or rotate_deg > 0:
        ang = (u(n) * 2 - 1) * math.radians(rotate_deg)
        tx = (u(n) * 2 - 1) * shift * 2 / w
        ty = (u(n) * 2 - 1) * shift * 2 / h
        cos, sin = torch.cos(ang), torch.sin(ang)
        theta = torch.stack([torch.stack([cos, -sin, tx], 1), torch.stack([sin, cos, ty], 1)], 1)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    if noise > 0:
        x = x + noise * torch.randn(x.shape, generator=generator).to(dev)
    if erase > 0:
        side = max(1, h // 4)
        hit = (u(n) < erase).view(n, 1, 1, 1)
        top = (u(n) * (h - side + 1)).long().view(n, 1, 1)
        left = (u(n) * (w - side + 1)).long().view(n, 1, 1)
        rows = torch.arange(h, device=dev).view(1, h, 1)
        cols = torch.arange(w, device=dev).view(1, 1, w)
        box = ((rows >= top) & (rows < top + side) & (cols >= left) & (cols < left + side))
        x = torch.where(hit & box.unsqueeze(1), torch.zeros((), device=dev), x)
    return x
