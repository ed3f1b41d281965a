"""The interface every gaze model offers, and the seeded parts the models share.

Every model is a :class:`GazeModel`: ``forward(x)`` returns (pitch, yaw) in radians;
``outputs(x, labels)`` returns a :class:`GazeOutput` (gaze, auxiliary losses, router
weights) for training and evaluation; ``prepare(data, device, seed)`` runs once before
training and ``after_step(out)`` after each optimiser step. Trainers call these and
never ask which model they hold. Models are built by name from
:data:`genlab.gaze.models.registry.MODELS`.

Paired initialisation: the backbone and the head are drawn from their own seeded
streams (``init_seed``), so a baseline and a MoEGaze built with the same seed start
from identical shared parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from genlab.gaze.data.gazeset import GazeLabels
from genlab.gaze.models.backbones import ResNetBackbone


@dataclass
class GazeOutput:
    """What a model returns for a batch: gaze (N, 2), loss terms, router internals."""

    gaze: torch.Tensor
    losses: dict[str, torch.Tensor] = field(default_factory=dict)
    router_weights: torch.Tensor | None = None
    router_probs: torch.Tensor | None = None
    appearance: torch.Tensor | None = None


def seeded(seed: int, stream: int, build: Callable[[], nn.Module]) -> nn.Module:
    """Build a module from its own seeded RNG stream, leaving the global RNG untouched."""
    mixed = int(np.random.SeedSequence([int(seed), int(stream)]).generate_state(1)[0])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(mixed)
        return build()


def gaze_head(feat_dim: int) -> nn.Sequential:
    """The shared head: gaze features -> (pitch, yaw), one hidden layer."""
    return nn.Sequential(nn.Linear(feat_dim, feat_dim), nn.ReLU(), nn.Linear(feat_dim, 2))


def mlp(in_dim: int, hidden: int, out_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))


class GazeModel(nn.Module):
    """The interface trainers and evaluation use (see the module docstring)."""

    hparams: dict

    def outputs(self, x: torch.Tensor, labels: GazeLabels | None = None) -> GazeOutput:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.outputs(x).gaze

    def prepare(self, data, device, seed: int, batch_size: int = 256) -> None:
        """Called once before training with the training data (default: nothing)."""

    def after_step(self, out: GazeOutput) -> None:
        """Called after every optimiser step with that step's outputs (default: nothing)."""

    def regroup(self, data, device, seed: int, batch_size: int = 256) -> dict:
        """Called part-way through training when asked (default: nothing; see MoEGaze)."""
        return {}


def seeded_backbone(width: int, stem: str, input_norm: str, init_seed: int) -> ResNetBackbone:
    """The shared backbone, drawn from its own seeded stream (stream 1)."""
    return seeded(init_seed, 1, lambda: ResNetBackbone(width, stem=stem, input_norm=input_norm))
