"""The gaze models by name (:data:`MODELS`): each entry is the model class and its options.

``build_gaze_model(name, **hparams)`` passes a model the options its entry lists and
ignores the others, so one set of training hyper-parameters builds any model. It takes
plain values only, so it is the builder of gaze training checkpoints' model records
(genlab.core.storage.checkpoints.model_record): ``genlab.load`` rebuilds a trained model with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from genlab.core.registry import Registry
from genlab.gaze.models.baseline import GazeBaseline
from genlab.gaze.models.gaze_model import GazeModel
from genlab.gaze.models.moegaze import MoEGaze

BACKBONE_OPTIONS = ("width", "stem", "input_norm")


@dataclass(frozen=True)
class ModelEntry:
    """A registered model: its builder and the options it takes."""

    builder: Callable[..., GazeModel]
    options: tuple[str, ...]


MODELS: Registry[ModelEntry] = Registry("model")
MODELS.register("baseline", ModelEntry(GazeBaseline, (*BACKBONE_OPTIONS, "gaze_feat_dim",
                                                      "expert_hidden", "init_seed")))
MODELS.register("moegaze", ModelEntry(MoEGaze, (
    *BACKBONE_OPTIONS, "num_experts", "appearance_dim", "gaze_feat_dim", "expert_hidden",
    "temperature", "routing", "balance", "appearance_stage", "appearance_grad",
    "router_grad", "contrastive_tau", "rebalance_momentum", "router_input", "group_train",
    "shared_expert", "init_seed")))

BUILDER = "genlab.gaze.models.registry:build_gaze_model"  # for checkpoints' model records


def build_gaze_model(name: str, **hparams) -> GazeModel:
    """A gaze model by name from its hyper-parameters (options it does not take are ignored)."""
    entry = MODELS.get(name)
    return entry.builder(**{k: v for k, v in hparams.items() if k in entry.options})
