"""Image helpers shared by the readers and prediction: resizing and uint8 -> float [0, 1].

The uint8 -> float conversion is torchvision's ``to_tensor`` (the same ``x / 255`` as
before, bit for bit), imported when first called so that importing the readers does not
import torchvision (batches of stored images use ``gazeset.to_float_image``). The resize
stays cv2's: its area filter (``INTER_AREA``) has no torchvision equivalent, and
torchvision's antialiased bilinear resize gives different pixels.
"""

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
    """(H, W, 3) uint8 RGB -> (3, H, W) float32 in [0, 1], NCHW-contiguous (torchvision).

    Contiguous on purpose (``to_tensor`` makes it so): a permuted tensor keeps HWC strides,
    which sends convolutions down torch's channels-last CPU path (heap corruption seen
    there with 2 threads).
    """
    from torchvision.transforms.functional import to_tensor  # ~3 s import: on first use

    return to_tensor(np.ascontiguousarray(rgb))

