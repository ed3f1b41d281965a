"""The baseline gaze model (the paper's comparison).

Backbone -> MLP -> shared-shape head -> (pitch, yaw). Its MLP has the shape of one
MoEGaze expert, so MoEGaze with K=1 and the baseline compute the same function class.
"""

from __future__ import annotations

import torch

from genlab.core.errors import require_positive
from genlab.gaze.data.gazeset import GazeLabels
from genlab.gaze.models.gaze_model import (
    GazeModel,
    GazeOutput,
    gaze_head,
    mlp,
    seeded,
    seeded_backbone,
)


class GazeBaseline(GazeModel):
    """ResNet-18-style backbone + MLP + head regressing (pitch, yaw) in radians."""

    def __init__(self, width: int = 16, gaze_feat_dim: int = 64, expert_hidden: int = 64,
                 stem: str = "small", input_norm: str = "half", init_seed: int = 0):
        super().__init__()
        for name, v in (("width", width), ("gaze_feat_dim", gaze_feat_dim),
                        ("expert_hidden", expert_hidden)):
            require_positive(name, v)
        self.hparams = {"width": width, "gaze_feat_dim": gaze_feat_dim,
                        "expert_hidden": expert_hidden, "stem": stem, "input_norm": input_norm}
        self.backbone = seeded_backbone(width, stem, input_norm, init_seed)
        self.features = seeded(init_seed, 2,
                               lambda: mlp(self.backbone.out_dim, expert_hidden, gaze_feat_dim))
        self.head = seeded(init_seed, 3, lambda: gaze_head(gaze_feat_dim))

    def outputs(self, x: torch.Tensor, labels: GazeLabels | None = None) -> GazeOutput:
        return GazeOutput(self.head(self.features(self.backbone(x))))
