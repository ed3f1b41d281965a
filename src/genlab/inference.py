"""Class predictions of a trained image classifier from its inference facts
(:class:`Predictor`; ``genlab.load(run).predict(images)`` is one).

A run that trains a classifier on images (`nas train`, `nas search`, `optim train` on
``folder:PATH``, the digits, the shapes, CIFAR or ImageNet16; `nas train --dataset imagenet`)
keeps in its checkpoint's model record what inference needs
(``inference``: genlab.core.data.inference_record): the class names in label order, the PIL
mode its images were read in, the side of its square input, the resize and the channels'
mean and std. A new image is read as the training read its files (the file read in that
mode, resized bilinearly to that square, or for an ImageNet run its shorter side resized and
the centre square cut, scaled to [0, 1], standardised), so a file of the
run's own test split is predicted as the run's test accuracy scored it. A run whose
checkpoint lacks the record (written by an earlier genlab, or trained on a data set that is
not images, such as digits-clutter) is refused in one line naming what is missing.

Images may be file paths, PIL images or tensors in [0, 1] (C x H x W, or N x C x H x W for N
images; uint8 tensors are divided by 255; a tensor is resized by torch's antialiased
bilinear interpolation, a file or PIL image by torchvision's); they are predicted in batches
of ``batch_size``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from genlab.core.data.imagefolder import image_transform, read_image
from genlab.core.errors import CheckpointError, DataError

INFERENCE = "inference"  # the model record's entry
FACTS = ("classes", "mode", "size", "mean", "std")  # what predicting reads from it


@dataclass(frozen=True)
class Prediction:
    """One image's prediction: its class name (and label index), that class's probability,
    and every class's probability by name."""

    image: str
    label: str
    index: int
    probability: float
    probabilities: dict[str, float]


def inference_facts(record: dict | None, source: str) -> dict:
    """The inference facts of a model record; CheckpointError naming what is missing."""
    facts = record.get(INFERENCE) if isinstance(record, dict) else None
    if not isinstance(facts, dict):
        raise CheckpointError(
            f"{source}: keeps no inference facts ({', '.join(FACTS)}): written by an earlier "
            "genlab, or trained on data that are not images; train it again to predict")
    missing = [k for k in FACTS if k not in facts]
    if missing:
        raise CheckpointError(f"{source}: its inference facts lack {', '.join(missing)}; "
                              "train it again to predict")
    return facts


class Predictor:
    """A classifier in eval mode and its inference facts: :meth:`predict`."""

    def __init__(self, model: nn.Module, facts: dict, device: str | torch.device = "cpu"):
        self.model, self.facts = model.eval(), facts
        self.device = torch.device(device)
        self.classes = [str(c) for c in facts["classes"]]
        self.size, self.mode = int(facts["size"]), str(facts["mode"])
        self.crop_from = facts.get("crop_from")  # the ImageNet evaluation's resize and crop
        self.transform = image_transform(self.size, facts["mean"], facts["std"], self.crop_from)
        self.mean = torch.tensor(facts["mean"], dtype=torch.float32).view(-1, 1, 1)
        self.std = torch.tensor(facts["std"], dtype=torch.float32).view(-1, 1, 1)

    def _items(self, images) -> Iterator[tuple[str, Any]]:
        """(name, one image) of every input (module doc)."""
        if isinstance(images, (str, Path)) or not isinstance(images, Iterable) or (
                isinstance(images, torch.Tensor) and images.dim() == 3):
            images = [images]
        for k, image in enumerate(images):
            if isinstance(image, (str, Path)):
                yield str(image), image
            else:
                yield f"image {k}", image

    def tensor(self, image) -> torch.Tensor:
        """One image (a path, a PIL image or a C x H x W tensor) as the network's input."""
        if isinstance(image, (str, Path)):
            if not Path(image).is_file():
                raise DataError(f"{image}: no such image file")
            return self.transform(read_image(str(image), self.mode))
        if isinstance(image, torch.Tensor):
            return self._from_tensor(image)
        if hasattr(image, "convert"):  # a PIL image
            return self.transform(image.convert(self.mode))
        raise DataError(f"cannot predict a {type(image).__name__}: give image paths, PIL "
                        "images or tensors")

    def _from_tensor(self, x: torch.Tensor) -> torch.Tensor:
        channels = 3 if self.mode == "RGB" else 1
        if x.dim() != 3 or x.shape[0] not in (1, 3):
            raise DataError(f"an image tensor must be C x H x W with C 1 or 3, got shape "
                            f"{tuple(x.shape)}")
        x = x.detach().cpu()
        x = x.float() / 255 if x.dtype == torch.uint8 else x.float()
        if x.shape[0] != channels:  # grey <-> colour as PIL converts
            x = x.expand(3, -1, -1) if channels == 3 else \
                (0.299 * x[0] + 0.587 * x[1] + 0.114 * x[2]).unsqueeze(0)
        if self.crop_from is None:
            x = nn.functional.interpolate(x[None], size=(self.size, self.size),
                                          mode="bilinear", align_corners=False,
                                          antialias=True)[0]
        else:  # the shorter side to crop_from, then the centre square (torchvision's)
            from torchvision.transforms import functional as TF

            x = TF.center_crop(TF.resize(x, self.crop_from, antialias=True), [self.size])
        return (x - self.mean) / self.std

    @torch.no_grad()
    def predict(self, images, batch_size: int = 64) -> list[Prediction]:
        """The class of each image (module doc), predicted in batches of ``batch_size``."""
        items = list(self._items(images))
        out: list[Prediction] = []
        for start in range(0, len(items), batch_size):
            chunk = items[start:start + batch_size]
            x = torch.stack([self.tensor(image) for _, image in chunk]).to(self.device)
            logits = self.model(x)
            if isinstance(logits, tuple):  # a network with an auxiliary head
                logits = logits[0]
            probs = torch.softmax(logits.float(), dim=1).cpu()
            for (name, _), p in zip(chunk, probs, strict=True):
                k = int(p.argmax())
                out.append(Prediction(name, self.classes[k], k, float(p[k]),
                                      dict(zip(self.classes, p.tolist(), strict=True))))
        return out
