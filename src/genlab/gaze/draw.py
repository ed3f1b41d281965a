"""Gaze arrows drawn on images: labels in green, predictions in red, tiled into one grid
(with captions and a legend on request); images written through a temporary file."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

from genlab.core.errors import ConfigError, DataError, OutputError
from genlab.core.storage.files import atomic_write_bytes, output_errors
from genlab.gaze.geometry import pitchyaw_to_vector


def _to_uint8_hwc(images) -> np.ndarray:
    """Accept (N,H,W,3) uint8/float or (N,3,H,W) float tensors/arrays; return (N,H,W,3) uint8."""
    if hasattr(images, "detach"):
        images = images.detach().cpu().numpy()
    a = np.asarray(images)
    if a.ndim != 4:
        raise ConfigError(f"images must be (N, H, W, 3) or (N, 3, H, W), got shape {a.shape}")
    if a.shape[-1] != 3 and a.shape[1] == 3:
        a = a.transpose(0, 2, 3, 1)
    if a.shape[-1] != 3:
        raise ConfigError(f"images must have 3 channels, got shape {a.shape}")
    if a.dtype != np.uint8:
        a = np.clip(a.astype(np.float32) * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return a


def draw_arrow(image: np.ndarray, pitchyaw, colour=(0, 200, 0), scale: float = 0.4,
               thickness: int = 1) -> np.ndarray:
    """Draw one gaze arrow from the image centre along the projected gaze (image copy)."""
    img = np.ascontiguousarray(image.copy())
    H, W = img.shape[:2]
    v = pitchyaw_to_vector(np.asarray(pitchyaw, dtype=np.float64))
    length = scale * min(H, W) * 1.6
    start = (W / 2.0, H / 2.0)
    end = (start[0] + length * v[0], start[1] + length * v[1])
    cv2.arrowedLine(img, tuple(int(round(c)) for c in start), tuple(int(round(c)) for c in end),
                    colour, thickness, cv2.LINE_AA, tipLength=0.25)
    return img


LABEL_COLOUR, PREDICTION_COLOUR = (0, 220, 0), (230, 0, 0)  # RGB
_FONT, _TEXT_SCALE, _LINE = cv2.FONT_HERSHEY_SIMPLEX, 0.5, 20  # caption font, px per line


def _text(img: np.ndarray, text: str, x: int, y: int, colour=(0, 0, 0)) -> None:
    cv2.putText(img, text, (x, y), _FONT, _TEXT_SCALE, colour, 1, cv2.LINE_AA)


def _fit(text: str, width: int) -> str:
    """``text`` cut from the left ("...") to fit ``width`` pixels in the caption font."""
    if cv2.getTextSize(text, _FONT, _TEXT_SCALE, 1)[0][0] <= width:
        return text
    while len(text) > 1 and cv2.getTextSize("..." + text, _FONT, _TEXT_SCALE, 1)[0][0] > width:
        text = text[1:]
    return "..." + text


def _legend(entries: list[tuple[tuple[int, int, int], str]], width: int) -> np.ndarray:
    """A white strip with one line per (colour, meaning): a short arrow and its text."""
    strip = np.full((_LINE * len(entries) + 8, width, 3), 255, np.uint8)
    for i, (colour, meaning) in enumerate(entries):
        y = 4 + _LINE * i + _LINE // 2
        cv2.arrowedLine(strip, (6, y), (36, y), colour, 2, cv2.LINE_AA, tipLength=0.3)
        _text(strip, meaning, 44, y + 5)
    return strip


def draw_gaze_arrows(images, gaze=None, pred=None, ncols: int = 6, upscale: int = 2, *,
                     captions: list[str] | None = None, legend: bool = False) -> np.ndarray:
    """A grid (uint8 RGB) of images with true gaze arrows (green) and predictions (red).

    ``gaze`` and ``pred`` are (N, 2) (pitch, yaw) radians, numpy or torch; either may be
    None (not drawn). ``captions``: one line of text under each tile; ``legend``: a strip
    on top saying which arrow is which.
    """
    imgs = _to_uint8_hwc(images)
    as_np = lambda g: None if g is None else np.asarray(  # noqa: E731
        g.detach().cpu().numpy() if hasattr(g, "detach") else g, dtype=np.float64)
    gaze, pred = as_np(gaze), as_np(pred)
    n, H, W, _ = imgs.shape
    if any(g is not None and g.shape != (n, 2) for g in (gaze, pred)):
        raise ConfigError(f"gaze/pred must be ({n}, 2) pitch-yaw to match the images")
    if captions is not None and len(captions) != n:
        raise ConfigError(f"{len(captions)} captions for {n} images")
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    h, w = H * upscale, W * upscale
    cell_h = h + 2 + (_LINE if captions else 0)
    grid = np.full((nrows * cell_h, ncols * (w + 2), 3), 255, np.uint8)
    for i in range(n):
        tile = cv2.resize(imgs[i], (w, h), interpolation=cv2.INTER_NEAREST)
        if gaze is not None:
            tile = draw_arrow(tile, gaze[i], LABEL_COLOUR, thickness=2)
        if pred is not None:
            tile = draw_arrow(tile, pred[i], PREDICTION_COLOUR, thickness=2)
        r, c = divmod(i, ncols)
        y, x = r * cell_h, c * (w + 2)
        grid[y:y + h, x:x + w] = tile
        if captions:
            _text(grid, _fit(captions[i], w - 4), x + 2, y + h + _LINE - 6)
    if not legend:
        return grid
    entries = [(colour, meaning) for colour, meaning, g in (
        (LABEL_COLOUR, "true gaze (label)", gaze),
        (PREDICTION_COLOUR, "predicted gaze (from the image centre; angles in degrees)", pred),
    ) if g is not None]
    strip = _legend(entries, max(grid.shape[1], 480))
    if strip.shape[1] > grid.shape[1]:
        grid = np.pad(grid, ((0, 0), (0, strip.shape[1] - grid.shape[1]), (0, 0)),
                      constant_values=255)
    return np.concatenate([strip, grid])


def write_image(path: str | Path, rgb: np.ndarray) -> Path:
    """Write an (H, W, 3) uint8 RGB image to ``path`` (format from its .png/.jpg name)
    through a temporary file; an unwritable place is one OutputError naming it."""
    path = Path(path)
    check_image_name(path)
    ok, data = cv2.imencode(path.suffix.lower(), np.ascontiguousarray(rgb[..., ::-1]))
    if not ok:
        raise DataError(f"{path}: OpenCV could not encode the image")
    with output_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data.tobytes())
    return path


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def check_image_name(path: str | Path, option: str = "--out") -> Path:
    """``path`` unless it cannot take a picture: ConfigError for a name without .png/.jpg
    or a folder, OutputError where the nearest existing folder above it is not writable
    (checked before any work, so a refused command writes nothing)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a folder; give an image file name in it, "
                          f"e.g. {option} {path / 'predicted.png'}")
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise ConfigError(f"{option} {path}: no image file name; use a .png or .jpg name")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputError(f"{path}: cannot write there ({folder} is a file, not a folder); "
                          f"choose another {option}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write there ({folder} is read-only or not yours); "
                          f"choose an {option} in a folder you can write")
    return path
