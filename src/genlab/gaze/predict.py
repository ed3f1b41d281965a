"""Load a trained gaze run (through ``genlab.load``) and predict the gaze of image files.

An image is read with OpenCV (BGR, converted to RGB); grey images are replicated
to three channels and an alpha channel is dropped; it is resized to the model's
input size (config.json ``size`` = [height, width]) with area interpolation. It must
show one eye (or face) as the run was trained on: an image whose height/width is more
than :data:`SHAPE_TOLERANCE` times off the run's (a grid of eyes such as ``gaze
render``'s samples.png) is refused, naming the expected size. Several images are one
batch (:func:`predict_images`); its picture shows them scaled up, each with its
predicted arrow, file name and angles, under a legend.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from genlab.core.devices import resolve_device
from genlab.core.errors import CheckpointError, ConfigError, DataError
from genlab.core.options import check_options, option
from genlab.core.runs import CHECKPOINT, CONFIG
from genlab.core.storage.checkpoints import MODEL_RECORD
from genlab.gaze.data.images import resize_rgb, rgb_to_tensor
from genlab.gaze.draw import check_image_name, draw_gaze_arrows, write_image
from genlab.gaze.train import RUN_KIND, config_from_dict
from genlab.loading import LoadedRun, load


def resolve_run(path: str | Path) -> Path:
    """The run folder of a run folder or of its checkpoint.pt path."""
    path = Path(path)
    folder = path.parent if path.is_file() else path
    if not (folder / CONFIG).is_file():
        raise CheckpointError(f"{path}: not a gaze run (no {CONFIG} next to the checkpoint)")
    return folder


def read_run_config(folder: Path) -> dict:
    """A run folder's config.json as a dict; undecodable or unparsable: CheckpointError."""
    file = folder / CONFIG
    hint = "pass the folder gaze train wrote, or restore its config.json"
    try:
        values = json.loads(file.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise CheckpointError(f"{file}: unreadable ({exc.strerror or exc}); {hint}") from exc
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{file}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                              f"offset {exc.start}); {hint}") from exc
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{file}: not valid JSON ({exc.msg} at line {exc.lineno}, "
                              f"column {exc.colno}); {hint}") from exc
    if not isinstance(values, dict):
        raise CheckpointError(f"{file}: holds a JSON {type(values).__name__}, not a run's "
                              f"options; {hint}")
    return values


def _check_config(file: Path, cfg: dict) -> None:
    """CheckpointError unless a config.json has what prediction reads (model, size)."""
    size = cfg.get("size")
    if not isinstance(cfg.get("model"), str) or not isinstance(size, list):
        raise CheckpointError(f"{file}: not a gaze training config (no model or size); pass "
                              "the folder gaze train wrote")
    if len(size) != 2 or not all(isinstance(v, int) and v >= 8 for v in size):
        raise CheckpointError(f"{file}: size must be [height, width] of at least 8 pixels, "
                              f"got {size!r}; restore the config.json gaze train wrote")


def open_run(path: str | Path, device: str | torch.device = "cpu", *,
             command: str = "gaze predict") -> LoadedRun:
    """A gaze training run (folder or checkpoint) through ``genlab.load``, in eval mode on
    ``device``; its ``config`` is the run's config.json.

    The model is rebuilt from the checkpoint's model record; a run of another kind
    ("X is a nas train run; ``command`` needs a gaze train run"), an unreadable
    config.json, or one that describes another model than the checkpoint holds is
    refused (CheckpointError).
    """
    folder = resolve_run(path)
    read_run_config(folder)
    file = Path(path) if Path(path).is_file() else folder / CHECKPOINT
    run = load(file, map_location=str(device))
    if run.kind != RUN_KIND:
        article = "an" if run.kind[:1] in "aeiou" else "a"
        raise CheckpointError(f"{path} is {article} {run.kind} run; {command} needs a "
                              f"{RUN_KIND} run")
    cfg = run.config
    _check_config(folder / CONFIG, cfg)
    want = config_from_dict(cfg).model_record()["args"]
    # options newer than the checkpoint are absent from its record: they had their defaults
    have = {**config_from_dict({}).model_record()["args"], **run.state[MODEL_RECORD]["args"]}
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


SHAPE_TOLERANCE = 1.25  # an image's height/width may be this factor off the run's


def check_eye_shape(path: str | Path, image: np.ndarray, size) -> None:
    """DataError unless ``image`` has about the shape of the run's input ``size`` (h, w)."""
    h, w = image.shape[:2]
    want = int(size[0]) / int(size[1])
    lo, hi = want / SHAPE_TOLERANCE, want * SHAPE_TOLERANCE
    if not lo <= h / w <= hi:
        raise DataError(f"{path}: {h}x{w} pixels is not one eye image for this run: it takes "
                        f"{int(size[0])}x{int(size[1])} (height x width) or any size of about "
                        f"that shape (height/width {lo:.2f} to {hi:.2f}); a grid of eyes "
                        "(gaze render's samples.png) holds several: pass single-eye images "
                        "(gaze render --png N writes them)")


def read_eye(path: str | Path, size) -> np.ndarray:
    """:func:`read_image_rgb` of an image that :func:`check_eye_shape` accepts."""
    rgb = read_image_rgb(path)
    check_eye_shape(path, rgb, size)
    return rgb


def to_input(image_rgb: np.ndarray, size) -> torch.Tensor:
    """(H,W,3) uint8 RGB -> (1,3,h,w) float [0,1] at the model's input size (h, w)."""
    h, w = int(size[0]), int(size[1])
    return rgb_to_tensor(cv2.resize(image_rgb, (w, h), interpolation=cv2.INTER_AREA))[None]


@torch.no_grad()
def predict_arrays(model: nn.Module, images_rgb: list[np.ndarray], size,
                   batch_size: int = 256) -> np.ndarray:
    """(N, 2) (pitch, yaw) radians for RGB uint8 images (any sizes), in batches."""
    model.eval()
    device = next(model.parameters()).device
    out = [model(torch.cat([to_input(img, size) for img in images_rgb[i:i + batch_size]])
                 .to(device)).cpu()
           for i in range(0, len(images_rgb), batch_size)]
    return torch.cat(out).double().numpy()


def predict_array(model: nn.Module, image_rgb: np.ndarray, size) -> tuple[float, float]:
    """(pitch, yaw) in radians for one RGB uint8 image."""
    pitch, yaw = predict_arrays(model, [image_rgb], size)[0].tolist()
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


PICTURE_TILE_HEIGHT = 192  # pixels of each image in predict_images' picture (at least)


def draw_predictions(images_rgb: list[np.ndarray], pitchyaw: np.ndarray, names: list[str],
                     size) -> np.ndarray:
    """The batch picture: every image scaled to a tile of the run's input shape at least
    :data:`PICTURE_TILE_HEIGHT` high, its predicted arrow (red), a caption (name, angles
    in degrees) and a legend."""
    scale = max(1, math.ceil(PICTURE_TILE_HEIGHT / int(size[0])))
    tile = (int(size[0]) * scale, int(size[1]) * scale)
    tiles = np.stack([resize_rgb(img, tile) for img in images_rgb])
    deg = np.degrees(pitchyaw)
    captions = [f"{name}: pitch {p:+.1f}, yaw {y:+.1f}"
                for name, (p, y) in zip(names, deg, strict=True)]
    return draw_gaze_arrows(tiles, pred=pitchyaw, ncols=4, upscale=1, captions=captions,
                            legend=True)


def _result(image: Path, pitch: float, yaw: float) -> dict:
    return {"image": str(image), "pitch_rad": pitch, "yaw_rad": yaw,
            "pitch_deg": math.degrees(pitch), "yaw_deg": math.degrees(yaw)}


@dataclass
class PredictConfig:
    """The options of `genlab gaze predict`."""

    checkpoint: str = option(None, argument=True, required=True,
                             help="Run folder of gaze train or its checkpoint.pt.")
    images: list[str] = option(factory=list, argument=True, required=True, parse="list",
                               help="Image files (PNG/JPEG; colour or grey), each one eye of "
                                    "about the run's input shape (gaze render --png N writes "
                                    "such files); several are predicted as one batch.")
    out: str | None = option(None, help="Write a picture of the images with their predicted "
                             "gaze arrows (scaled up, with a legend) here: a .png or .jpg "
                             "name (then the last line is `outputs in` it; without --out "
                             "nothing is written).")
    device: str = option("cpu", help="cpu | cuda | cuda:N | auto (cuda when there is one).")

    def run(self) -> list[dict]:
        check_options(self)
        return predict_images(self.checkpoint, self.images, self.out, device=self.device)


def predict_images(run: str | Path, images, out: str | Path | None = None, *,
                   device: str = "cpu", command: str = "gaze predict") -> list[dict]:
    """Predict the gaze of image files as one batch on ``device`` (cpu, cuda, cuda:N or
    auto); one result dict per image.

    ``out``: a .png/.jpg picture of the batch (:func:`draw_predictions`). Every input is
    checked (``out``'s name and folder, the run, each image and its shape) before
    anything is written.
    """
    images = [Path(p) for p in images]
    if not images:
        raise ConfigError("no image given; pass one or more image files")
    if out is not None:
        out = check_image_name(out)
    loaded = open_run(run, resolve_device(device), command=command)
    size = loaded.config["size"]
    rgbs = [read_eye(p, size) for p in images]
    pitchyaw = predict_arrays(loaded.model, rgbs, size)
    results = [_result(p, *py) for p, py in zip(images, pitchyaw.tolist(), strict=True)]
    if out is not None:
        write_image(out, draw_predictions(rgbs, pitchyaw, [p.name for p in images], size))
        for r in results:
            r["out"] = str(out)
    return results


def predict_file(run: str | Path, image: str | Path, out: str | Path | None = None) -> dict:
    """Predict the gaze of an image file; optionally write the image with its arrow (at
    the image's own size) to ``out`` (.png or .jpg)."""
    if out is not None:
        out = check_image_name(out)
    model, cfg = load_run(run)
    rgb = read_eye(image, cfg["size"])
    pitch, yaw = predict_array(model, rgb, cfg["size"])
    result = _result(Path(image), pitch, yaw)
    if out is not None:
        write_image(out, draw_arrow(rgb, pitch, yaw))
        result["out"] = str(out)
    return result
