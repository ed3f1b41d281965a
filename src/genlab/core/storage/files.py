"""Writing files so that a crash, a kill or a full disk never leaves a half-written one.

Every write goes to a temporary file in the same folder, is flushed to disk, then
renamed over the target (a rename within a folder is atomic on POSIX). An OSError on
the way (no space left, read-only file system, no permission) removes the temporary
file and becomes one OutputError naming the file: what was there before is intact.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from genlab.core.errors import OutputError


def jsonable(value: Any) -> Any:
    """Turn tensors, numpy scalars, paths and non-finite floats into JSON-safe values."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return jsonable(value.detach().cpu().tolist())
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else (1e308 if value > 0 else -1e308)
    return value


@contextlib.contextmanager
def output_errors(path: Path, what: str = "cannot write"):
    """Turn an OSError raised inside the block into OutputError naming ``path``."""
    try:
        yield
    except OutputError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OutputError(f"{path}: {what} ({reason}); files written before are intact"
                          ) from exc


def _default_mode() -> int:
    """Permissions of a new file under the process's umask (mkstemp alone gives 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _default_mode()


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, keep_previous: Path | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename.

    ``keep_previous``: the file ``path`` held before is renamed to it (the last two
    versions are kept; at every instant at least one complete version exists).
    """
    path = Path(path)
    with output_errors(path):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), _FILE_MODE)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            if keep_previous is not None and path.exists():
                os.replace(path, keep_previous)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        _fsync_folder(path.parent)


def append_line(path: Path, line: str) -> None:
    """Append one line (flushed at once); a line cut by a crash is dropped on resume."""
    with output_errors(path), open(path, "a") as fh:
        fh.write(line + "\n")
        fh.flush()


def write_json(path: Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON."""
    text = json.dumps(jsonable(obj), indent=2, sort_keys=False) + "\n"
    atomic_write_bytes(Path(path), text.encode())


def read_json(path: Path) -> Any:
    with open(path) as fh:
        return json.load(fh)
