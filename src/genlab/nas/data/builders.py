"""The registered data sets of the NAS commands: digits, CIFAR, ImageNet16-120, the digits
proxies (noisy, clutter), shapes and the user's image folders (the package doc lists them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from genlab.core.data import (
    ImageData,
    Split,
    batch_arrays,
    digit_splits,
    find_folder,
    imagefolder,
    load_cifar,
    load_digits_data,
    split_arrays,
    standardise,
)
from genlab.core.data.shapes import NATIVE_SIZE, load_shapes_data
from genlab.core.seeding import make_generator
from genlab.nas.data.clutter import corrupt, on_clutter
from genlab.nas.data.registry import register_dataset


def load_imagenet16(root: str | Path, seed: int = 0, val_fraction: float = 0.5,
                    num_classes: int = 120) -> ImageData:
    """ImageNet16 batches (train_data_batch_1..10, val_data; labels 1-based), first classes."""
    train_files = [f"train_data_batch_{i}" for i in range(1, 11)]
    folder = find_folder(Path(root), train_files + ["val_data"])
    xtr, ytr = zip(*(batch_arrays(folder / f, "labels", 16) for f in train_files), strict=True)
    xte, yte = batch_arrays(folder / "val_data", "labels", 16)
    xtr, ytr = np.concatenate(xtr), np.concatenate(ytr) - 1
    yte = yte - 1
    keep_tr, keep_te = ytr < num_classes, yte < num_classes
    return split_arrays("imagenet16", xtr[keep_tr], ytr[keep_tr], xte[keep_te], yte[keep_te],
                        num_classes, seed, val_fraction)


@register_dataset("digits", "scikit-learn digits (embedded), 1,797 grey 8x8 images")
def _digits(root, size: int, seed: int) -> ImageData:
    return load_digits_data(size=size, seed=seed)


@register_dataset("cifar10", "CIFAR-10 python batches", needs_root=True)
def _cifar10(root, size: int, seed: int) -> ImageData:
    return load_cifar("cifar10", root, seed=seed)


@register_dataset("cifar100", "CIFAR-100 python batches", needs_root=True)
def _cifar100(root, size: int, seed: int) -> ImageData:
    return load_cifar("cifar100", root, seed=seed)


@register_dataset("imagenet16", "ImageNet16-120 batches", needs_root=True)
def _imagenet16(root, size: int, seed: int) -> ImageData:
    return load_imagenet16(root, seed=seed)


@register_dataset("digits-noisy", "digits with lowered contrast, strong noise and occlusion")
def _digits_noisy(root, size: int, seed: int) -> ImageData:
    xs, ys = digit_splits(size, seed)
    xs = standardise([corrupt(x, make_generator(seed, 101, k)) for k, x in enumerate(xs)])
    return ImageData("digits-noisy", Split(xs[0], ys[0]), Split(xs[1], ys[1]),
                     Split(xs[2], ys[2]), 10, 1, size)


CLUTTER_COPIES = (3, 3, 1)  # composites per source image in train, val, test


@register_dataset("digits-clutter", "digits as coloured figures on 1/f clutter, 3 channels")
def _digits_clutter(root, size: int, seed: int) -> ImageData:
    xs, ys = digit_splits(8, seed)
    out_x, out_y = [], []
    for k, (x, y, copies) in enumerate(zip(xs, ys, CLUTTER_COPIES, strict=True)):
        gen = make_generator(seed, 202, k)
        out_x.append(torch.cat([on_clutter(x, gen, size=size) for _ in range(copies)]))
        out_y.append(y.repeat(copies))
    out_x = standardise(out_x)
    return ImageData("digits-clutter", Split(out_x[0], out_y[0]), Split(out_x[1], out_y[1]),
                     Split(out_x[2], out_y[2]), 10, 3, size)


@register_dataset("shapes", "synthetic shapes (embedded): 10 classes of objects made of "
                  "parts on textured clutter, 5,000 colour images, 32x32 by default",
                  size=NATIVE_SIZE)
def _shapes(root, size: int, seed: int) -> ImageData:
    return load_shapes_data(size, seed)


@register_dataset(imagefolder.NAME, "your images: PATH/CLASS/*.png or .jpg, one sub-folder "
                  "per class, grey or colour, any size, resized to --size (docs/cli.md)")
def _folder(root, size: int, seed: int) -> ImageData:
    return imagefolder.folder_data(root, size, seed)


