"""Image helpers shared by the readers and prediction: resizing and HWC uint8 -> CHW float."""

from __future__ import annotations

import cv2
import numpy as np
import torch


def resize_rgb(rgb: np.ndarray, size: tuple[int, int] | None) -> np.ndarray:
    """Resize (H, W, 3) to ``size`` = (height, width): area filter when shrinking, else linear."""
    if size is None or tuple(rgb.shape[:2]) == tuple(size):
        return rgb
    shrink = rgb.shape[0] > size[0]
    return cv2.resize(rgb, (int(size[1]), int(size[0])),
                      interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def rgb_to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 RGB -> (3, H, W) float32 in [0, 1], NCHW-contiguous.

    Contiguous on purpose: a permuted tensor keeps HWC strides, which sends convolutions
    down torch's channels-last CPU path (heap corruption seen there with 2 threads).
    """
    return torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1).contiguous().float() / 255.0
