"""Load a trained gaze run (through ``genlab.load``) and predict the gaze of one image file.

The image is read with OpenCV (BGR, converted to RGB); grey images are replicated
to three channels and an alpha channel is dropped; it is resized to the model's
input size (config.json ``size`` = [height, width]) with area interpolation.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from genlab.core.checkpoints import MODEL_RECORD
from genlab.core.errors import CheckpointError, DataError
from genlab.core.runs import CHECKPOINT, CONFIG
from genlab.gaze.data.images import rgb_to_tensor
from genlab.gaze.train import RUN_KIND, config_from_dict
from genlab.loading import LoadedRun, load


def resolve_run(path: str | Path) -> Path:
    """The run folder of a run folder or of its checkpoint.pt path."""
    path = Path(path)
    folder = path.parent if path.is_file() else path
    if not (folder / CONFIG).is_file():
        raise CheckpointError(f"{path}: not a gaze run (no {CONFIG} next to the checkpoint)")
    return folder


def open_run(path: str | Path, device: str | torch.device = "cpu") -> LoadedRun:
    """A gaze training run (folder or checkpoint) through ``genlab.load``, in eval mode on
    ``device``; its ``config`` is the run's config.json.

    The model is rebuilt from the checkpoint's model record; a config.json that describes
    another model than the checkpoint holds is refused (CheckpointError).
    """
    folder = resolve_run(path)
    file = Path(path) if Path(path).is_file() else folder / CHECKPOINT
    run = load(file, map_location=str(device), kind=RUN_KIND)
    cfg = run.config
    if "model" not in cfg or "size" not in cfg:
        raise CheckpointError(f"{folder / CONFIG}: not a gaze training config")
    want = config_from_dict(cfg).model_record()["args"]
    have = run.state[MODEL_RECORD]["args"]
    diffs = [k for k in want if k != "init_seed" and have.get(k) != want[k]]
    if diffs:
        raise CheckpointError(f"{file}: its weights do not match {CONFIG} ("
                              + ", ".join(f"{k}: {have.get(k)!r} vs {want[k]!r}"
                                          for k in diffs[:4]) + ")")
    run.model.to(device)
    return run


def load_run(path: str | Path, device: str | torch.device = "cpu") -> tuple[nn.Module, dict]:
    """(model in eval mode, config.json dict) of a gaze training run (see :func:`open_run`)."""
    run = open_run(path, device)
    return run.model, run.config


def read_image_rgb(path: str | Path) -> np.ndarray:
    """An image file as (H, W, 3) uint8 RGB; grey -> 3 channels, alpha dropped."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such image file")
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise DataError(f"{path}: not a readable image (expected PNG/JPEG/BMP)")
    if img.dtype != np.uint8:
        if img.dtype == np.uint16:
            img = (img / 257).astype(np.uint8)
        else:
            raise DataError(f"{path}: expected an 8- or 16-bit image, got {img.dtype}")
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=2)
    elif img.ndim == 3 and img.shape[2] == 4:
        img = img[..., :3]
    elif img.ndim == 3 and img.shape[2] == 1:
        img = np.repeat(img, 3, axis=2)
    if img.ndim != 3 or img.shape[2] != 3:
        raise DataError(f"{path}: expected 1, 3 or 4 channels, got shape {img.shape}")
    return np.ascontiguousarray(img[..., ::-1])


def to_input(image_rgb: np.ndarray, size) -> torch.Tensor:
    """(H,W,3) uint8 RGB -> (1,3,h,w) float [0,1] at the model's input size (h, w)."""
    h, w = int(size[0]), int(size[1])
    return rgb_to_tensor(cv2.resize(image_rgb, (w, h), interpolation=cv2.INTER_AREA))[None]


@torch.no_grad()
def predict_array(model: nn.Module, image_rgb: np.ndarray, size) -> tuple[float, float]:
    """(pitch, yaw) in radians for one RGB uint8 image."""
    model.eval()
    device = next(model.parameters()).device
    pitch, yaw = model(to_input(image_rgb, size).to(device))[0].tolist()
    return pitch, yaw


def draw_arrow(image_rgb: np.ndarray, pitch: float, yaw: float) -> np.ndarray:
    """A copy of the image with the gaze drawn as an arrow from its centre (image plane)."""
    img = image_rgb.copy()
    h, w = img.shape[:2]
    length = 0.4 * min(h, w)
    cx, cy = w / 2, h / 2
    # projection of g = (-cos p sin y, -sin p, -cos p cos y) on the image plane
    dx, dy = -math.cos(pitch) * math.sin(yaw), -math.sin(pitch)
    tip = (int(round(cx + length * dx)), int(round(cy + length * dy)))
    thickness = max(1, round(min(h, w) / 40))
    cv2.arrowedLine(
        img,
        (int(round(cx)), int(round(cy))),
        tip,
        (255, 220, 0),
        thickness,
        cv2.LINE_AA,
        tipLength=0.25,
    )
    return img


def predict_file(run: str | Path, image: str | Path, out: str | Path | None = None) -> dict:
    """Predict the gaze of an image file; optionally write the image with its arrow to ``out``."""
    model, cfg = load_run(run)
    rgb = read_image_rgb(image)
    pitch, yaw = predict_array(model, rgb, cfg["size"])
    result = {
        "image": str(image),
        "pitch_rad": pitch,
        "yaw_rad": yaw,
        "pitch_deg": math.degrees(pitch),
        "yaw_deg": math.degrees(yaw),
    }
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not cv2.imwrite(str(out), draw_arrow(rgb, pitch, yaw)[..., ::-1]):
            raise DataError(f"{out}: could not write the image (use a .png or .jpg name)")
        result["out"] = str(out)
    return result
