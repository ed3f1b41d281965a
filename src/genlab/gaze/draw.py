"""Gaze arrows drawn on images: labels in green, predictions in red, tiled into one grid."""

from __future__ import annotations

import cv2
import numpy as np

from genlab.core.errors import ConfigError
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


def draw_gaze_arrows(images, gaze, pred=None, ncols: int = 6, upscale: int = 2) -> np.ndarray:
    """A grid (uint8 RGB) of images with true gaze arrows (green) and predictions (red).

    ``gaze`` and ``pred`` are (N, 2) (pitch, yaw) radians, numpy or torch.
    """
    imgs = _to_uint8_hwc(images)
    as_np = lambda g: None if g is None else np.asarray(  # noqa: E731
        g.detach().cpu().numpy() if hasattr(g, "detach") else g, dtype=np.float64)
    gaze, pred = as_np(gaze), as_np(pred)
    n, H, W, _ = imgs.shape
    if gaze.shape != (n, 2) or (pred is not None and pred.shape != (n, 2)):
        raise ConfigError(f"gaze/pred must be ({n}, 2) pitch-yaw to match the images")
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    h, w = H * upscale, W * upscale
    grid = np.full((nrows * (h + 2), ncols * (w + 2), 3), 255, np.uint8)
    for i in range(n):
        tile = cv2.resize(imgs[i], (w, h), interpolation=cv2.INTER_NEAREST)
        tile = draw_arrow(tile, gaze[i], (0, 220, 0), thickness=2)
        if pred is not None:
            tile = draw_arrow(tile, pred[i], (230, 0, 0), thickness=2)
        r, c = divmod(i, ncols)
        grid[r * (h + 2):r * (h + 2) + h, c * (w + 2):c * (w + 2) + w] = tile
    return grid
