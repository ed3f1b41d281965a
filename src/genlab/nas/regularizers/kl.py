"""``ber-kl``: BER on the architecture side (our reconstruction; the paper's formula is not public).

R = (1/|E|) sum_e KL(p_e || uniform) = (1/|E|) sum_e (log K - H(p_e)), p_e = softmax(alpha_e),
per alpha tensor. It restrains compression: the architecture distribution may not lose
entropy faster than the schedule allows. lambda_t = ``strength`` * s(t) with s rising
(``up``: t/T) or falling (``down``: 1 - t/T, releasing the restraint so alpha can commit at
the bifurcation point). Preset: the earlier ablation's choice (docs/ber.md, "Choosing BER").
"""

from __future__ import annotations

import math

import torch

from genlab.nas.entropy import edge_entropy
from genlab.nas.regularizers.base import Penalty, per_alpha_sum, register_penalty


@register_penalty
class KLToUniform(Penalty):
    """ber-kl: the mean KL divergence of the edges' op distributions from uniform."""

    name = "ber-kl"
    capturable = True
    preset = {"strength": 0.3, "schedule": "down"}

    def penalty(self, alphas, probe=None, val_loss=None, labels=None) -> torch.Tensor:
        return per_alpha_sum(lambda a: (math.log(a.shape[-1]) - edge_entropy(a)).mean(), alphas)
