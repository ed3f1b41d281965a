"""``genlab.load`` (module genlab.loading): the trained model of any run, with its config.

Every genlab run that trains a model (``nas train``, ``nas search``, ``optim train``,
``gaze train``) stores a model record in its checkpoint (genlab.core.storage.checkpoints): the
builder and its arguments. ``load`` rebuilds the model from that record alone, loads its
weights and returns it in eval mode with the run's config.json and summary.json. A classifier
of images predicts on new ones: ``load(run).predict(images)`` (genlab.inference).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torch import nn

from genlab.core.errors import CheckpointError
from genlab.core.storage.checkpoints import (
    CHECKPOINT,
    MODEL_RECORD,
    build_from_record,
    load_checkpoint,
)
from genlab.core.storage.files import read_json
from genlab.inference import Predictor, inference_facts


@dataclass
class LoadedRun:
    """A run's trained model and what describes it."""

    model: nn.Module
    kind: str
    config: dict
    summary: dict = field(default_factory=dict)
    folder: Path | None = None
    checkpoint: Path | None = None
    state: dict = field(default_factory=dict, repr=False)  # the whole checkpoint

    def predictor(self, device=None):
        """A genlab.inference.Predictor of this run's model (on ``device``, default where
        the model is); CheckpointError when the run keeps no inference facts."""
        facts = inference_facts(self.state.get(MODEL_RECORD), str(self.checkpoint or "run"))
        if device is not None:
            self.model.to(device)
        where = next(self.model.parameters()).device
        return Predictor(self.model, facts, where)

    def predict(self, images, batch_size: int = 64):
        """The class name and probabilities of each image (paths, PIL images or tensors in
        [0, 1]), in batches: a list of genlab.inference.Prediction (module doc there)."""
        return self.predictor().predict(images, batch_size)


def _a(kind: str) -> str:
    """``kind`` with its indefinite article: "a nas train", "an optim train"."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def checkpoint_path(path: str | Path) -> Path:
    """The checkpoint file behind a run folder or a checkpoint path (CheckpointError if none)."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint; give a run folder or its "
                              f"{CHECKPOINT}")
    return path


def read_run_files(folder: Path) -> tuple[dict, dict]:
    """(config.json, summary.json) of a run folder; {} where a file is absent."""
    out: list[dict] = []
    for name in ("config.json", "summary.json"):
        file = folder / name
        if not file.is_file():
            out.append({})
            continue
        try:
            out.append(read_json(file))
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{file}: unreadable ({exc})") from exc
    return out[0], out[1]


def load(path: str | Path, *, map_location: str = "cpu", kind: str | None = None) -> LoadedRun:
    """The trained model of the run folder (or checkpoint file) ``path``.

    ``kind`` ("nas train", "nas search", "optim train", "gaze train"), when given, must
    match the run's: CheckpointError otherwise, naming both.
    """
    file = checkpoint_path(path)
    state = load_checkpoint(file, map_location=map_location)
    record = state.get(MODEL_RECORD) if isinstance(state, dict) else None
    if not isinstance(record, dict):
        raise CheckpointError(f"{file}: holds no model record (written by an earlier genlab, "
                              "or not a training checkpoint); rerun the training to load it")
    if kind is not None and record.get("kind") != kind:
        other = str(record.get("kind"))
        raise CheckpointError(f"{file}: is {_a(other)} run; {_a(kind)} run is needed")
    model = build_from_record(record, state, source=str(file)).eval()
    config, summary = read_run_files(file.parent)
    return LoadedRun(model=model, kind=str(record.get("kind")), config=config,
                     summary=summary, folder=file.parent, checkpoint=file, state=state)
