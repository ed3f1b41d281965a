"""A small embedded detection set: shapes on textured backgrounds, boxes known exactly.

``synthetic[:N]`` (ours): N training and max(16, N // 4) test images of 64x64 pixels, made
from a seed (train and test from different streams). Each image is a texture (a 4x4 grid of
random colours, bilinearly interpolated to 64x64, plus per-pixel noise) with 1 to 3 shapes
that do not touch (a shape that finds no free place in 50 draws is left out): a filled
square, a disk or an upward triangle (the three classes), 22 to 40 pixels across, each in a
random colour. A shape's box is the tight box of its pixel mask in continuous coordinates
(first column to last column + 1), so boxes are exact.
"""

from __future__ import annotations

import numpy as np

from genlab.nas.transfer.detection.records import DetectionImage

CLASSES = ("square", "disk", "triangle")
SIDE = 64
DEFAULT_IMAGES = 256
MIN_SHAPE, MAX_SHAPE = 22, 40  # pixels across: the 32-50 px anchors of P3 fit them


def _mask(kind: int, size: int) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size] + 0.5
    if kind == 0:
        return np.ones((size, size), dtype=bool)
    if kind == 1:
        r = size / 2
        return (xx - r) ** 2 + (yy - r) ** 2 <= r * r
    return np.abs(xx - size / 2) <= yy / 2  # apex at the top, base at the bottom


def _background(rng: np.random.Generator) -> np.ndarray:
    """A smooth texture: a 4x4 grid of colours, bilinearly interpolated, plus pixel noise."""
    coarse = rng.uniform(40, 215, (4, 4, 3))
    t = (np.arange(SIDE) + 0.5) / SIDE * 3  # grid coordinates 0..3
    i = np.minimum(t.astype(int), 2)
    f = (t - i)[:, None]
    rows = coarse[i] * (1 - f[..., None]) + coarse[i + 1] * f[..., None]  # (SIDE, 4, 3)
    img = rows[:, i] * (1 - f.T[..., None]) + rows[:, i + 1] * f.T[..., None]
    return img + rng.normal(0, 10, img.shape)


def _place(rng, taken: list, size: int):
    for _ in range(50):
        x, y = (int(v) for v in rng.integers(0, SIDE - size + 1, 2))
        box = (x, y, x + size, y + size)
        if all(box[2] + 1 < t[0] or t[2] + 1 < box[0] or box[3] + 1 < t[1]
               or t[3] + 1 < box[1] for t in taken):
            return box
    return None


def make_image(rng: np.random.Generator) -> DetectionImage:
    img = _background(rng)
    taken, boxes, labels = [], [], []
    for _ in range(int(rng.integers(1, 4))):
        kind, size = int(rng.integers(0, 3)), int(rng.integers(MIN_SHAPE, MAX_SHAPE + 1))
        spot = _place(rng, taken, size)
        if spot is None:
            continue
        taken.append(spot)
        m = _mask(kind, size)
        x, y = spot[0], spot[1]
        img[y:y + size, x:x + size][m] = rng.uniform(0, 255, 3)
        rows, cols = np.nonzero(m)
        boxes.append([x + cols.min(), y + rows.min(), x + cols.max() + 1, y + rows.max() + 1])
        labels.append(kind)
    pixels = np.clip(img, 0, 255).astype(np.uint8)
    return DetectionImage("", SIDE, SIDE, np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
                          np.asarray(labels, dtype=np.int64), np.zeros(len(labels), dtype=bool),
                          pixels=pixels)


def make_split(count: int, seed: int, stream: int) -> list[DetectionImage]:
    rng = np.random.default_rng([seed, stream])
    items = [make_image(rng) for _ in range(count)]
    for i, it in enumerate(items):
        it.file, it.image_id = f"synthetic/{stream}/{i}", i
    return items


def read_synthetic(count: int, seed: int = 0):
    """(train, test, class names) of the synthetic set (module docstring)."""
    return (make_split(count, seed, 0), make_split(max(16, count // 4), seed, 1),
            list(CLASSES))
