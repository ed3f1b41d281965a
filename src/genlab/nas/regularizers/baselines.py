"""The baselines: ``none`` (DARTS, Liu et al. 2019) and ``beta`` (beta-DARTS).

- ``none``: R = 0, lambda_t = 0.
- ``beta``: beta-decay (Ye et al., CVPR 2022, Eq. 5 and official code):
  R = (1/|E|) sum_e logsumexp(alpha_e) per alpha tensor; lambda_t rises linearly from 0 at
  ``strength``/100 per epoch (their code: 50 * epoch / 100), counted per batch step here
  (epoch = step / steps_per_epoch).
"""

from __future__ import annotations

import torch

from genlab.nas.regularizers.base import Penalty, per_alpha_sum, register_penalty, zero_like


@register_penalty
class NoPenalty(Penalty):
    """DARTS: no regulariser."""

    name = "none"
    capturable = True
    default_strength = 0.0

    def lam(self, strength, schedule, step, total_steps, steps_per_epoch) -> float:
        return 0.0

    def penalty(self, alphas, probe=None, val_loss=None, labels=None) -> torch.Tensor:
        return zero_like(alphas)


@register_penalty
class BetaDecay(Penalty):
    """beta-DARTS: mean logsumexp of every edge's alphas, strength * epoch / 100."""

    name = "beta"
    capturable = True
    default_strength = 50.0

    def lam(self, strength, schedule, step, total_steps, steps_per_epoch) -> float:
        return strength * (step / steps_per_epoch) / 100.0

    def penalty(self, alphas, probe=None, val_loss=None, labels=None) -> torch.Tensor:
        return per_alpha_sum(lambda a: torch.logsumexp(a, dim=-1).mean(), alphas)
