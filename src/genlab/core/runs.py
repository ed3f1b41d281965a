"""Run folders: config.json, metrics.jsonl, atomic checkpoint.pt, summary.json, plots.

Layout of a run folder (every command that produces results writes one)::

    config.json     every resolved option, genlab version, seed
    metrics.jsonl   one JSON object per epoch or step
    checkpoint.pt   written to a temporary file, then renamed (never half-written)
    summary.json    final figures (written last: its presence marks a finished run)
    *.png           plots; report.html / report.md where the command makes a report

A run killed at any point restarts with ``resume=True``: metrics logged after the
last checkpoint are dropped, and the state saved in the checkpoint is restored.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from genlab import __version__
from genlab.core.errors import CheckpointError, RunExistsError

CONFIG = "config.json"
METRICS = "metrics.jsonl"
CHECKPOINT = "checkpoint.pt"
SUMMARY = "summary.json"

# Options that may differ between a run and its resumption.
_RESUME_FREE_KEYS = {"resume", "out", "progress", "device", "nb201_table"}


def _jsonable(value: Any) -> Any:
    """Turn tensors, numpy scalars, paths and non-finite floats into JSON-safe values."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return _jsonable(value.detach().cpu().tolist())
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else (1e308 if value > 0 else -1e308)
    return value


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON."""
    text = json.dumps(_jsonable(obj), indent=2, sort_keys=False) + "\n"
    atomic_write_bytes(Path(path), text.encode())


def read_json(path: Path) -> Any:
    with open(path) as fh:
        return json.load(fh)


def save_checkpoint(path: Path, state: dict) -> None:
    """torch.save ``state`` atomically (temp file + rename)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint with ``weights_only=True``; corrupt files raise CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CheckpointError(f"{path}: not a readable genlab checkpoint ({exc})") from exc


class RunDir:
    """One run's output folder.

    ``RunDir(out, config)`` creates the folder and writes config.json. A folder that
    already holds a run is never overwritten: pass ``resume=True`` to continue it
    (its config must match, apart from options such as the device) or choose
    another folder.
    """

    def __init__(self, path: str | Path, config: dict, *, resume: bool = False):
        self.path = Path(path)
        self.config = dict(_jsonable(config))
        self.config.setdefault("genlab_version", __version__)
        self.resumed_state: dict | None = None
        existing = self.path / CONFIG
        if existing.exists():
            if not resume:
                raise RunExistsError(
                    f"{self.path} already holds a run; pass --resume to continue it "
                    "or choose another --out"
                )
            self._check_same_config(read_json(existing))
            if (self.path / CHECKPOINT).exists():
                self.resumed_state = load_checkpoint(self.path / CHECKPOINT)
                self._truncate_metrics(self.resumed_state.get("metrics_lines", 0))
            else:
                self._truncate_metrics(0)
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            write_json(existing, self.config)

    def _check_same_config(self, old: dict) -> None:
        diffs = [
            k
            for k in set(old) | set(self.config)
            if k not in _RESUME_FREE_KEYS and k != "genlab_version"
            and old.get(k) != self.config.get(k)
        ]
        if diffs:
            detail = ", ".join(
                f"{k}: {old.get(k)!r} -> {self.config.get(k)!r}" for k in sorted(diffs)
            )
            raise CheckpointError(
                f"{self.path}: cannot resume with different options ({detail})"
            )

    def _truncate_metrics(self, keep: int) -> None:
        """Drop metric lines written after the checkpoint, so resumed logs have no duplicates."""
        metrics = self.path / METRICS
        if not metrics.exists():
            return
        lines = metrics.read_text().splitlines(keepends=True)
        complete = [ln for ln in lines if ln.endswith("\n")]
        atomic_write_bytes(metrics, "".join(complete[:keep]).encode())

    # -- writing -----------------------------------------------------------------
    def file(self, name: str) -> Path:
        return self.path / name

    def log(self, record: dict) -> None:
        """Append one JSON object to metrics.jsonl (flushed at once)."""
        with open(self.path / METRICS, "a") as fh:
            fh.write(json.dumps(_jsonable(record)) + "\n")
            fh.flush()

    def metrics(self) -> list[dict]:
        path = self.path / METRICS
        if not path.exists():
            return []
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]

    def metrics_lines(self) -> int:
        path = self.path / METRICS
        return len(path.read_text().splitlines()) if path.exists() else 0

    def save(self, state: dict) -> None:
        """Write checkpoint.pt atomically, remembering how many metric lines it covers."""
        state = dict(state)
        state["metrics_lines"] = self.metrics_lines()
        save_checkpoint(self.path / CHECKPOINT, state)

    def write_summary(self, summary: dict) -> None:
        write_json(self.path / SUMMARY, summary)

    def save_figure(self, fig, name: str) -> Path:
        """Save a matplotlib figure as PNG in the run folder and close it."""
        import matplotlib.pyplot as plt

        target = self.path / name
        fig.savefig(target, dpi=110, bbox_inches="tight")
        plt.close(fig)
        return target
