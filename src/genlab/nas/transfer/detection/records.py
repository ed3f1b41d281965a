"""One image of a detection set, its pixels, and the tensors the Trainer moves.

The Trainer moves one input tensor and one target tensor per batch (it shards rows under
torchrun and moves both to the device), so a detection batch travels packed:

- images ``(N, 3, H, W)``, float in [0, 1], each image at its top-left corner of a canvas as
  large as the batch's largest (zeros elsewhere);
- targets ``(N, 1 + M, 5)``, float: row 0 of image i is ``(height, width, boxes, index, 0)``
  (its own size, its box count and its index in the data set), rows 1.. its boxes
  ``(x1, y1, x2, y2, label)`` and then padding (label -1).

``unpack`` gives back what torchvision's detection models take: a list of ``(3, h, w)``
images and a list of ``{"boxes", "labels"}`` dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class DetectionImage:
    """An image's file (or its pixels, for embedded data), size and boxes.

    ``boxes`` are continuous xyxy pixel coordinates, ``labels`` contiguous 0..C-1;
    ``ignore`` marks boxes left out of training (VOC ``difficult``, COCO ``iscrowd``; VOC's
    evaluation ignores its difficult boxes, COCOeval reads crowds from its own file).
    """

    file: str
    height: int
    width: int
    boxes: np.ndarray
    labels: np.ndarray
    ignore: np.ndarray
    image_id: int = 0
    pixels: np.ndarray | None = field(default=None, repr=False)  # (H, W, 3) uint8

    def target(self) -> dict:
        """Evaluation truth: boxes, labels, difficult (the ignored ones)."""
        return {"boxes": self.boxes, "labels": self.labels, "difficult": self.ignore}

    def training_boxes(self) -> tuple[np.ndarray, np.ndarray]:
        """The boxes a detector trains on: not ignored, with positive width and height."""
        b = self.boxes
        keep = ~self.ignore & (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
        return b[keep], self.labels[keep]


def image_tensor(item: DetectionImage) -> torch.Tensor:
    """The image as a float (3, H, W) tensor in [0, 1]."""
    if item.pixels is not None:
        array = item.pixels
    else:
        from PIL import Image

        with Image.open(item.file) as im:
            array = np.asarray(im.convert("RGB"))
    return torch.from_numpy(np.array(array, copy=True)).permute(2, 0, 1).float() / 255.0


def sample(item: DetectionImage, index: int, flip: bool, train: bool):
    """(image, boxes (n, 5) with labels) of one item, mirrored left-right when ``flip``."""
    image = image_tensor(item)
    boxes, labels = item.training_boxes() if train else (item.boxes, item.labels)
    rows = np.concatenate([boxes.reshape(-1, 4), labels.reshape(-1, 1)], 1).astype(np.float32)
    rows = torch.from_numpy(rows)
    if flip:
        image = image.flip(-1)
        w = float(image.shape[-1])
        rows[:, [0, 2]] = w - rows[:, [2, 0]]
    return image, rows, index


def pack(samples) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch ``sample`` results into the padded (images, targets) tensors (module docstring)."""
    h = max(s[0].shape[1] for s in samples)
    w = max(s[0].shape[2] for s in samples)
    m = max(len(s[1]) for s in samples)
    images = torch.zeros(len(samples), 3, h, w)
    targets = torch.zeros(len(samples), 1 + m, 5)
    targets[:, 1:, 4] = -1
    for i, (image, rows, index) in enumerate(samples):
        images[i, :, : image.shape[1], : image.shape[2]] = image
        targets[i, 0, :4] = torch.tensor([image.shape[1], image.shape[2], len(rows), index])
        targets[i, 1: 1 + len(rows)] = rows
    return images, targets


def unpack(images: torch.Tensor, targets: torch.Tensor):
    """(list of (3, h, w) images, list of {"boxes", "labels"}, data-set indices)."""
    out_images, out_targets, indices = [], [], []
    for x, t in zip(images, targets, strict=True):
        h, w, n, index = (int(v) for v in t[0, :4].tolist())
        out_images.append(x[:, :h, :w])
        rows = t[1: 1 + n]
        out_targets.append({"boxes": rows[:, :4].float(), "labels": rows[:, 4].long()})
        indices.append(index)
    return out_images, out_targets, indices
