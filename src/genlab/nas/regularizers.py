"""Regularisers of the architecture step: none (DARTS), beta (beta-DARTS) and BER.

Every regulariser adds ``lambda_t * R`` to the validation loss that the architecture
parameters alpha minimise. Alphas come named (``net.alphas()``: "cell" on NB201, "normal"
and "reduce" in the DARTS spaces, ...), each a tensor of one row of K logits per edge (|E|
rows); a penalty defined on one tensor is applied per tensor and summed over them, as
beta-DARTS applies its penalty per cell type in the DARTS space:

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
            Same schedules as ber-kl. Applied to alpha only (the architecture step). Needs
            the cells' inputs and outputs: it declares ``needs_probe`` and gives the probe
            (genlab.nas.probe.CellPairs) that the search passes to the supernet.

- ``ber-lbe``, ``ber-op``, ``ber-ib`` the batch-entropy candidates of genlab.nas.ber
            (ours): Peer's layerwise batch-entropy loss on the cell nodes with learnable
            targets, a per-op compression penalty, and a per-op penalty on the label
            information an op loses (it needs the validation labels). Constant schedule by
            default; ``h_min`` is ber-lbe's floor on the targets.

Candidates with state (ber-lbe's targets) are set up once before the search
(``setup(net, x, space)``), give their extra parameters to the alpha optimiser
(``parameters()``) and their state to the checkpoint (``state_dict()``).

``ber`` is an alias of the variant kept after the selection (see ``BER_DEFAULT``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError, require_choice, require_positive
from genlab.nas.ber import CANDIDATES
from genlab.nas.entropy import edge_entropy, gaussian_batch_entropy
from genlab.nas.probe import CellPairs, Probe

SCHEDULES = ("up", "down", "constant")


Alphas = Mapping[str, torch.Tensor]


def named(alphas: Alphas | torch.Tensor) -> Alphas:
    """Named alphas; a bare tensor is one alpha called "alpha"."""
    return {"alpha": alphas} if isinstance(alphas, torch.Tensor) else alphas


def per_alpha_sum(fn, alphas: Alphas) -> torch.Tensor:
    """sum over the alpha tensors of fn(tensor) (just fn(tensor) for a single one)."""
    terms = [fn(a) for a in named(alphas).values()]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def zero_like(alphas: Alphas) -> torch.Tensor:
    """A zero connected to every alpha (so backward reaches them)."""
    return per_alpha_sum(torch.sum, alphas) * 0.0


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
    h_min: float = 0.0  # ber-lbe: floor of the learnable node targets

    needs_probe: bool = False

    def __post_init__(self):
        require_choice("regulariser", self.name, REGULARIZERS)
        require_choice("schedule", self.schedule, SCHEDULES)
        require_positive("reg-strength", self.strength, allow_zero=True)
        require_positive("steps_per_epoch", self.steps_per_epoch)
        # not a dataclass field: asdict() of a regulariser stays its plain settings
        self._candidate = CANDIDATES[self.name](self.h_min) if self.name in CANDIDATES else None
        self.needs_probe = self.name == "ber-batch" or self._candidate is not None

    def make_probe(self) -> Probe | None:
        """The probe to pass to the supernet's forward (None when the penalty needs none)."""
        if self._candidate is not None:
            return self._candidate.make_probe()
        return CellPairs() if self.needs_probe else None

    def setup(self, net, x: torch.Tensor, space) -> None:
        """Once before the search: candidates with state read the network (x: first val batch)."""
        if self._candidate is not None:
            self._candidate.setup(net, x, space)

    def parameters(self) -> list[torch.Tensor]:
        """Extra parameters the alpha optimiser trains with alpha (ber-lbe's targets)."""
        return [] if self._candidate is None else self._candidate.parameters()

    def state_dict(self) -> dict:
        return {} if self._candidate is None else self._candidate.state_dict()

    def load_state_dict(self, state: dict) -> None:
        if self._candidate is not None:
            self._candidate.load_state_dict(state)

    def lam(self, step: int, total_steps: int) -> float:
        """lambda_t at this batch step."""
        if self.name == "none":
            return 0.0
        if self.name == "beta":  # beta-DARTS: strength * epoch / 100, epoch counted per step
            return self.strength * (step / self.steps_per_epoch) / 100.0
        return self.strength * schedule_factor(self.schedule, step, total_steps)

    def penalty(self, alphas: Alphas | torch.Tensor, probe: Probe | None = None,
                val_loss: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        """R(alpha) (unweighted), summed over the alpha tensors; ``probe`` for the feature
        penalties, ``val_loss`` (CE_val with its graph) for ber-lbe, ``labels`` (those of
        the validation batch) for ber-ib."""
        if self._candidate is not None:
            return self._candidate.penalty(named(alphas), probe, val_loss, labels)
        if self.name == "none":
            return zero_like(alphas)
        if self.name == "beta":
            return per_alpha_sum(lambda a: torch.logsumexp(a, dim=-1).mean(), alphas)
        if self.name == "ber-kl":
            return per_alpha_sum(lambda a: (math.log(a.shape[-1]) - edge_entropy(a)).mean(),
                                 alphas)
        if not isinstance(probe, CellPairs) or not probe.pairs:
            raise ConfigError("ber-batch needs the cell inputs and outputs: pass the probe "
                              "from make_probe() to the supernet's forward")
        drops = [F.relu(gaussian_batch_entropy(i) - gaussian_batch_entropy(o))
                 for i, o in probe.pairs]
        return torch.stack(drops).mean()

    def __call__(self, alphas: Alphas | torch.Tensor, step: int, total_steps: int,
                 probe: Probe | None = None, val_loss: torch.Tensor | None = None,
                 labels: torch.Tensor | None = None) -> torch.Tensor:
        lam = self.lam(step, total_steps)
        if lam == 0.0:
            return zero_like(alphas)
        return lam * self.penalty(alphas, probe, val_loss, labels)


REGULARIZERS = ("none", "beta", "ber-kl", "ber-batch", *CANDIDATES)

# Settings a regulariser's name stands for when the command line leaves them unset:
# ber-kl at the earlier ablation's choice (docs/ber.md, "Choosing BER"), each batch-entropy
# candidate at its calibrated mid-point (docs/ber.md, "Calibration"), constant schedule.
PRESETS = {
    "ber-kl": {"strength": 0.3, "schedule": "down"},
    "ber-lbe": {"strength": 36.2, "schedule": "constant", "h_min": 0.0},
    "ber-op": {"strength": 2.66, "schedule": "constant"},
    "ber-ib": {"strength": 17.3, "schedule": "constant"},
}
# What ``--reg ber`` means: the winner of the selection protocol (docs/ber.md, "Selection
# protocol"); as long as no candidate is eligible, the earlier ablation's ber-kl.
BER_DEFAULT = {"name": "ber-kl", **PRESETS["ber-kl"]}
BETA_DEFAULT_STRENGTH = 50.0


def make_regularizer(name: str, strength: float | None = None, schedule: str | None = None,
                     steps_per_epoch: int = 1, h_min: float | None = None) -> Regularizer:
    """Build a regulariser from CLI values; ``ber`` resolves to BER_DEFAULT and the unset
    options of a named variant to its preset (PRESETS)."""
    require_choice("regulariser", name, REGULARIZERS + ("ber",))
    preset = BER_DEFAULT if name == "ber" else PRESETS.get(name, {})
    name = preset.get("name", name)
    strength = preset.get("strength") if strength is None else strength
    schedule = schedule or preset.get("schedule")
    h_min = preset.get("h_min", 0.0) if h_min is None else h_min
    if strength is None:
        strength = BETA_DEFAULT_STRENGTH if name == "beta" else (0.0 if name == "none" else 1.0)
    return Regularizer(name, float(strength), schedule or "up", steps_per_epoch, float(h_min))
