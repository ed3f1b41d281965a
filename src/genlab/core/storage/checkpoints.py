"""Checkpoints: atomic, the last two kept, verified before use, loaded with weights_only.

A checkpoint is a plain ``torch.save`` file (a zip archive whose members carry CRC-32
checksums). torch.load does not check those sums, so :func:`verify_checkpoint` reads
every member and compares them: a truncated file, or one with a flipped byte anywhere,
is rejected before it is unpickled. :func:`save_checkpoint` with ``keep_previous``
renames the checkpoint it replaces, so a resume whose newest checkpoint is damaged
falls back to the one before (:func:`load_latest`).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import torch

from genlab.core.errors import CheckpointError
from genlab.core.registry import import_path
from genlab.core.storage.files import atomic_write_bytes

CHECKPOINT = "checkpoint.pt"
PREVIOUS = "checkpoint.prev.pt"


def checkpoint_bytes(state: dict) -> bytes:
    """``state`` serialised by torch.save (with CRC-32 sums) into memory."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def save_checkpoint(path: Path, state: dict, *, keep_previous: Path | None = None) -> None:
    """torch.save ``state`` atomically (temp file + rename); see atomic_write_bytes."""
    atomic_write_bytes(Path(path), checkpoint_bytes(state), keep_previous=keep_previous)


def verify_checkpoint(path: Path) -> None:
    """CheckpointError unless ``path`` is a complete archive whose every CRC-32 matches."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise CheckpointError(f"{path}: truncated or not a checkpoint ({exc})") from exc
    if bad is not None:
        raise CheckpointError(f"{path}: corrupt (checksum mismatch in {bad})")


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict:
    """Verify, then load with ``weights_only=True``; a bad file raises CheckpointError."""
    path = Path(path)
    verify_checkpoint(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CheckpointError(f"{path}: not a readable genlab checkpoint ({exc})") from exc


def load_latest(folder: Path, names: tuple[str, ...] = (CHECKPOINT, PREVIOUS)
                ) -> tuple[dict | None, str | None, list[str]]:
    """(state, file name, problems) of the newest good checkpoint among ``names`` in ``folder``.

    State and name are None when no file exists; CheckpointError when files exist but
    none is good. ``problems`` lists the rejected newer files (for a warning).
    """
    problems: list[str] = []
    present = False
    for name in names:
        path = Path(folder) / name
        if not path.exists():
            continue
        present = True
        try:
            return load_checkpoint(path), name, problems
        except CheckpointError as exc:
            problems.append(str(exc))
    if present:
        raise CheckpointError("no usable checkpoint: " + "; ".join(problems))
    return None, None, problems


# -- checkpoints that rebuild their model ----------------------------------------------------

MODEL_RECORD = "model_record"


def model_record(kind: str, builder: str, args: dict, *, state_key: str = "model",
                 inference: dict | None = None) -> dict:
    """What rebuilds a run's model from its checkpoint alone (nanoGPT's ``model_args``).

    ``kind`` names the command that trained it; ``builder`` is the
    ``"package.module:function"`` that ``builder(**args)`` returns the untrained model;
    ``state_key`` is the checkpoint entry holding its state dict; ``inference`` (a
    classifier of images): what predicting on new images needs
    (genlab.core.data.imagefolder.inference_record). ``args`` must be plain values
    (numbers, strings, lists, dicts) so the record survives ``weights_only`` loading.
    """
    record = {"kind": kind, "builder": builder, "args": dict(args), "state_key": state_key}
    if inference is not None:
        record["inference"] = dict(inference)
    return record


def build_from_record(record: dict, state: dict | None = None, *, source: str = "checkpoint"):
    """The model a record describes; with ``state``, its weights loaded from ``state``."""
    try:
        builder = import_path(record["builder"])
        model = builder(**record["args"])
    except (KeyError, TypeError) as exc:
        raise CheckpointError(f"{source}: its model record cannot rebuild the model "
                              f"({type(exc).__name__}: {exc})") from exc
    if state is not None:
        key = record.get("state_key", "model")
        if key not in state:
            raise CheckpointError(f"{source}: no {key!r} entry for the model's weights")
        try:
            model.load_state_dict(state[key])
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0]
            raise CheckpointError(f"{source}: the weights do not fit the rebuilt model "
                                  f"({first})") from exc
    return model
