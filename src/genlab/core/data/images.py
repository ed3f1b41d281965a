"""An image classification data set (:class:`ImageData`: its splits and what predicting on new
image files needs) and the lines a run prints about its data."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch

from genlab.core.data.splits import Split, streamed


def announce(data) -> None:
    """The data's description (ImageData or TaskData), one line on stderr (rank 0), once the
    run's folder is open: every refusal comes before it, as one line alone."""
    from genlab.core.parallel.distributed import is_main_process

    text = getattr(data, "description", None)
    if text and is_main_process():
        print(f"genlab: {text}", file=sys.stderr)


def warn_batch(batch_size: int, images: int, split: str) -> None:
    """A warning line (stderr, rank 0) when a batch is larger than the split it is drawn from:
    each batch is then the whole split, ``images`` images."""
    from genlab.core.parallel.distributed import is_main_process

    if batch_size > images and is_main_process():
        print(f"genlab: warning: --batch-size {batch_size} is larger than the {images} {split} "
              f"images: each batch is all {images}", file=sys.stderr)


RESIZE = "bilinear"  # how an image file is brought to a run's side (torchvision's Resize)


def floats(values) -> list[float]:
    """A tensor or sequence of numbers as a list of Python floats."""
    if isinstance(values, torch.Tensor):
        return values.flatten().tolist()
    return [float(v) for v in values]


CROP = "shorter-side-crop"  # the ImageNet evaluation: shorter side to crop_from, centre crop


def inference_record(classes, mode: str, size: int, mean, std,
                     crop_from: int | None = None) -> dict:
    """What predicting on a new image file needs, as plain values (a checkpoint keeps it):
    the class names (label order), the PIL mode images are read in (``L`` grey, ``RGB``),
    the side of the square input, the resize (``bilinear`` to the square; with
    ``crop_from``, the ImageNet evaluation's: the shorter side to ``crop_from``, then the
    centre square), and the channels' mean and std."""
    facts = {"classes": [str(c) for c in classes], "mode": mode, "size": int(size),
             "channels": 3 if mode == "RGB" else 1, "resize": RESIZE if crop_from is None
             else CROP, "mean": floats(mean), "std": floats(std)}
    if crop_from is not None:
        facts["crop_from"] = int(crop_from)
    return facts


@dataclass
class ImageData:
    """A classification data set split for bilevel search: train, val (search halves), test;
    ``inference``: what predicting on new image files needs (class names, side, mode, the
    standardisation; imagefolder.inference_record), None where the data are not images read
    from files; ``description``: one line a run prints once its folder is open (announce)."""

    name: str
    train: Split
    val: Split
    test: Split
    num_classes: int
    in_channels: int
    size: int
    inference: dict | None = None
    description: str | None = None  # what a run says of its data (a folder: split, resize)

    def train_full(self) -> Split:
        """train + val: what plain (non-bilevel) training uses."""
        images: Any = self.train.images  # a tensor, or image files (streamed)
        if streamed(images):  # image files read batch by batch stay unread
            joined = images.concat([images, self.val.images])
        else:
            joined = torch.cat([images, self.val.images])
        return Split(joined, torch.cat([self.train.labels, self.val.labels]))


