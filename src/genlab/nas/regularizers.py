"""Regularisers of the architecture step: none (DARTS), beta (beta-DARTS) and BER.

Every regulariser adds ``lambda_t * R`` to the validation loss that the architecture
parameters alpha (one row of K logits per edge, |E| rows) minimise:

- ``none``  DARTS (Liu et al. 2019): R = 0.
- ``beta``  beta-decay (Ye et al., CVPR 2022, Eq. 5 and official code):
            R = (1/|E|) sum_e logsumexp(alpha_e); lambda_t rises linearly from 0 at
            ``strength``/100 per epoch (their code: 50 * epoch / 100), counted per
            batch step here (epoch = step / steps_per_epoch).
- ``ber-kl`` BER, architecture-side (our reconstruction; the paper's formula is not
            public): R = (1/|E|) sum_e KL(p_e || uniform) = (1/|E|) sum_e (log K - H(p_e)),
            p_e = softmax(alpha_e). It restrains compression: the architecture
            distribution may not lose entropy faster than the schedule allows.
            lambda_t = ``strength`` * s(t) with s rising (``up``: t/T) or falling
            (``down``: 1 - t/T, releasing the restraint so alpha can commit at the
            bifurcation point).
- ``ber-batch`` BER, feature-side (our reconstruction after the batch entropy of Peer
            et al., TMLR 2022, with genlab's earlier estimator, not theirs; see
            genlab.nas.entropy): H_B(T) = mean_j 0.5 log(2 pi e Var_batch(T_j) + 1) over
            the units j of a cell's output T (population variance); R = mean over cells of
            relu(H_B(cell input) - H_B(cell output)), the compression a cell performs.
            Same schedules as ber-kl. Applied to alpha only (the architecture step).

``ber`` is an alias of the variant kept after the ablation (see ``BER_DEFAULT``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError, require_choice, require_positive
from genlab.nas.entropy import edge_entropy, gaussian_batch_entropy

SCHEDULES = ("up", "down", "constant")


def schedule_factor(kind: str, step: int, total_steps: int) -> float:
    """Fraction of lambda_0 in force at ``step``: rising, falling or constant."""
    frac = min(max(step / max(total_steps, 1), 0.0), 1.0)
    if kind == "up":
        return frac
    if kind == "down":
        return 1.0 - frac
    return 1.0


@dataclass
class Regularizer:
    """A named penalty on alpha with its strength schedule (see the module docstring)."""

    name: str
    strength: float = 0.0
    schedule: str = "up"
    steps_per_epoch: int = 1

    needs_cells: bool = False

    def __post_init__(self):
        require_choice("regulariser", self.name, REGULARIZERS)
        require_choice("schedule", self.schedule, SCHEDULES)
        require_positive("reg-strength", self.strength, allow_zero=True)
        require_positive("steps_per_epoch", self.steps_per_epoch)
        self.needs_cells = self.name == "ber-batch"

    def lam(self, step: int, total_steps: int) -> float:
        """lambda_t at this batch step."""
        if self.name == "none":
            return 0.0
        if self.name == "beta":  # beta-DARTS: strength * epoch / 100, epoch counted per step
            return self.strength * (step / self.steps_per_epoch) / 100.0
        return self.strength * schedule_factor(self.schedule, step, total_steps)

    def penalty(self, arch_params: torch.Tensor, cells=None) -> torch.Tensor:
        """R(alpha) (unweighted); ``cells`` = [(cell_input, cell_output), ...] for ber-batch."""
        if self.name == "none":
            return arch_params.sum() * 0.0
        if self.name == "beta":
            return torch.logsumexp(arch_params, dim=-1).mean()
        if self.name == "ber-kl":
            k = arch_params.shape[-1]
            return (math.log(k) - edge_entropy(arch_params)).mean()
        if cells is None:
            raise ConfigError("ber-batch needs the cell inputs and outputs (return_cells=True)")
        drops = [F.relu(gaussian_batch_entropy(i) - gaussian_batch_entropy(o)) for i, o in cells]
        return torch.stack(drops).mean()

    def __call__(self, arch_params, step: int, total_steps: int, cells=None) -> torch.Tensor:
        lam = self.lam(step, total_steps)
        if lam == 0.0:
            return arch_params.sum() * 0.0
        return lam * self.penalty(arch_params, cells)


REGULARIZERS = ("none", "beta", "ber-kl", "ber-batch")

# The BER variant and settings kept by benchmarks/nas_ber_ablation.py: the best mean
# digits-validation accuracy of the retrained cell among candidates whose search
# committed (docs/ber.md, "Choosing BER"); ``--reg ber`` means exactly this.
BER_DEFAULT = {"name": "ber-kl", "strength": 0.3, "schedule": "down"}
BETA_DEFAULT_STRENGTH = 50.0


def make_regularizer(name: str, strength: float | None = None, schedule: str | None = None,
                     steps_per_epoch: int = 1) -> Regularizer:
    """Build a regulariser from CLI values; ``ber`` resolves to BER_DEFAULT."""
    require_choice("regulariser", name, REGULARIZERS + ("ber",))
    if name == "ber":
        name = BER_DEFAULT["name"]
        strength = BER_DEFAULT["strength"] if strength is None else strength
        schedule = schedule or BER_DEFAULT["schedule"]
    if strength is None:
        strength = BETA_DEFAULT_STRENGTH if name == "beta" else (0.0 if name == "none" else 1.0)
    return Regularizer(name, float(strength), schedule or "up", steps_per_epoch)
