"""Small image folders in the ImageFolder layout (``--dataset folder:PATH``), written by the
tests that read them; the pixels they should load, read independently with PIL; and one bad
folder for each check that refuses one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

CLASSES = ("circle", "cross", "square")
PER_CLASS = 5  # images per class: the split gives 2 train, 2 val, 1 test of each


def shape(kind: str, h: int, w: int) -> np.ndarray:
    """A white ``kind`` on black, h x w, uint8."""
    a = np.zeros((h, w), np.uint8)
    yy, xx = np.mgrid[:h, :w]
    if kind == "circle":
        a[(yy - h / 2) ** 2 + (xx - w / 2) ** 2 < (min(h, w) / 3) ** 2] = 255
    elif kind == "square":
        a[h // 4: 3 * h // 4, w // 4: 3 * w // 4] = 255
    else:
        a[h // 2 - 1: h // 2 + 2, :] = 255
        a[:, w // 2 - 1: w // 2 + 2] = 255
    return a


def write_folder(root: Path, per_class: int = PER_CLASS) -> Path:
    """Grey PNGs, every one of another size (h and w differ too), one sub-folder per class."""
    for c, kind in enumerate(CLASSES):
        (root / kind).mkdir(parents=True)
        for i in range(per_class):
            image = shape(kind, 9 + 2 * i + c, 11 + i)
            image = np.clip(image.astype(int) + 7 * i + 3 * c, 0, 255).astype(np.uint8)
            Image.fromarray(image).save(root / kind / f"{i}.png")
    return root


def pil_pixels(path: str, size: int, mode: str) -> np.ndarray:
    """(C, size, size) float32 in [0, 1]: the file read with PIL in ``mode`` ('L' or 'RGB'),
    resized bilinearly (16-bit grey: scaled by 65535 first)."""
    with Image.open(path) as im:
        if im.mode == "I;16":
            im = Image.fromarray(np.asarray(im, np.float32) / 65535)
            scale = 1.0
        else:
            im = im.convert(mode)
            scale = 255.0
        a = np.asarray(im.resize((size, size), Image.Resampling.BILINEAR), np.float32) / scale
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


def _two(root: Path, n: int = 3) -> None:
    """Two good grey classes a and b of ``n`` images each."""
    for c in "ab":
        (root / c).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(shape("circle", 9 + i, 9)).save(root / c / f"{i}.png")


def write_bad(kind: str, root: Path) -> None:
    """The bad folder ``kind`` (a key of BAD) at ``root`` ('missing': nothing)."""
    if kind == "no-classes":
        root.mkdir()
        Image.fromarray(shape("circle", 9, 9)).save(root / "loose.png")
    elif kind == "one-class":
        (root / "a").mkdir(parents=True)
        for i in range(3):
            Image.fromarray(shape("circle", 9, 9)).save(root / "a" / f"{i}.png")
    elif kind == "empty-class":
        _two(root)
        (root / "c").mkdir()
        (root / "c" / "notes.txt").write_text("not an image")
    elif kind == "few":
        _two(root)
        (root / "c").mkdir()
        Image.fromarray(shape("circle", 9, 9)).save(root / "c" / "0.png")
    elif kind == "unreadable":
        _two(root)
        (root / "b" / "broken.png").write_bytes(b"not an image at all")
    elif kind == "mixed":
        _two(root)
        Image.new("RGB", (9, 9), (200, 10, 10)).save(root / "b" / "colour.png")
    elif kind == "float":
        _two(root)
        Image.fromarray(np.ones((9, 9), np.float32)).save(root / "b" / "depth.tif")


# kind -> words of its one line
BAD = {
    "missing": "no such folder",
    "no-classes": "no class sub-folders",
    "one-class": "one class (a)",
    "empty-class": "class folder c holds no image",
    "few": "class c has 1 image; every class needs at least 3",
    "unreadable": "broken.png is not a readable image",
    "mixed": "grey and colour images mixed",
    "float": "depth.tif is a 32-bit float image",
}
