"""Metrics where people look: every metrics.jsonl record mirrored as TensorBoard scalars.

Optional (``pip install 'genlab[tensorboard]'``). Each numeric field of a record
becomes a scalar tag (nested dicts join their keys with "/"; lists and strings are
skipped), at the record's "step", else its "epoch", else its line number. Events go to
``<run folder>/tensorboard`` and are flushed after every record, so a killed run keeps
them; a resumed run purges the events after its checkpoint, as metrics.jsonl drops its
lines. View with ``tensorboard --logdir RUN_FOLDER``.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path

from genlab.core.errors import ConfigError

EVENTS_DIR = "tensorboard"


def tensorboard_available() -> bool:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


def x_key(record: dict) -> str | None:
    """The field that is a record's x value: "step", else "epoch", else none."""
    for key in ("step", "epoch"):
        value = record.get(key)
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return key
    return None


def record_step(record: dict, index: int) -> int:
    """The x value of a record: its step, else its epoch, else its line number."""
    key = x_key(record)
    return int(record[key]) if key is not None else index


def scalars(record: dict, prefix: str = "", skip: tuple[str, ...] = ()) -> dict[str, float]:
    """The finite numeric fields of ``record`` as {tag: value} (nested keys joined by "/")."""
    out = {}
    for key, value in record.items():
        if key in skip:
            continue
        tag = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(scalars(value, tag + "/"))
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            if math.isfinite(float(value)):
                out[tag] = float(value)
    return out


class TensorBoardMirror:
    """Writes records as TensorBoard scalars into ``folder/tensorboard``."""

    def __init__(self, folder: Path, purge_step: int | None = None):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise ConfigError("--tensorboard needs the optional extra: "
                              "pip install 'genlab[tensorboard]'") from exc
        self.writer = SummaryWriter(log_dir=str(Path(folder) / EVENTS_DIR),
                                    purge_step=purge_step)

    def write(self, record: dict, index: int) -> None:
        step = record_step(record, index)
        key = x_key(record)
        for tag, value in scalars(record, skip=(key,) if key else ()).items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
