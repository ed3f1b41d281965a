"""``ber-pt``: round four's candidate (docs/ber.md, "Round four: the reasoning"; ours).

Round three's ber-anchor held alpha with beta-DARTS' penalty at a strength calibrated on
NB201, turned when the nodes' batch entropy levelled off (fixed step counts) and committed
to alpha's argmax at the turn. Each part is replaced by one that no single space calibrates:

- **the turn** (PlateauTurn.for_budget): the plateau rule with its warm-up, window and
  smoothing as fractions of the budget (NB201's values unchanged), so a 300-step search
  reaches it as a 1,800-step one does;
- **the hold** until the turn: a hinge on each edge's entropy,
  R_hold = sum over alpha tensors of mean_e max(0, rho log K - H(softmax(alpha_e))),
  at ``hold`` (large: a constraint, not a trade-off), zero while every edge is within
  rho of uniform, whatever K and whatever the data's pull;
- **the commitment** after the turn: to each edge's op whose masking raises the validation
  loss most on the supernet of the turn step (DARTS-PT's reading of op strength: every other
  op of the edge keeps its mixing weight, nothing is fine-tuned), measured on ``batches``
  validation batches (default ``VAL_BATCHES``), then R = sum over tensors of mean_e
  -log softmax(alpha_e)[k*_e] at the given strength, as ber-anchor's.

The search hands the penalty its supernet (``setup``) and the validation batches it asks
for (``val_batches_needed``); the leaders are checkpointed, so a resumed search commits to
the same ops.
"""

from __future__ import annotations

import math

import torch

from genlab.core.errors import ConfigError
from genlab.nas.regularizers.base import per_alpha_sum, register_penalty, zero_like
from genlab.nas.regularizers.decay import PlateauTurn, TurnPenalty

VAL_BATCHES = 2  # validation batches of each masking measurement (the default of ``batches``)


def entropy_hinge(alpha: torch.Tensor, rho: float) -> torch.Tensor:
    """mean over rows of max(0, rho log K - H(softmax(row))), K the row's length."""
    logp = torch.log_softmax(alpha, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return torch.clamp(rho * math.log(alpha.shape[-1]) - entropy, min=0).mean()


def masked_losses(net, name: str, row: int, batches) -> list[float]:
    """The validation loss of ``net`` with op k of alpha row ``row`` of ``name`` masked
    (its mixing weight set to 0, the others kept), for every k; in train mode (batch
    statistics) without gradients, as DARTS-PT's projection measures."""
    from genlab.nas.methods.pt import Projection, evaluate

    projection = Projection(net)  # nothing decided: the supernet's own mixing weights
    losses = []
    for op in range(net.alphas()[name].shape[1]):
        weights = projection.weights()
        weights[name][row, op] = 0.0
        losses.append(evaluate(net, weights, batches)[1])
    return losses


def perturbation_leaders(net, batches) -> dict[str, torch.Tensor]:
    """Each alpha row's op whose masking raises the validation loss most (first on a tie)."""
    leaders = {}
    for name, alpha in net.alphas().items():
        rows = [int(torch.tensor(masked_losses(net, name, r, batches)).argmax())
                for r in range(alpha.shape[0])]
        leaders[name] = torch.tensor(rows, device=alpha.device)
    return leaders


@register_penalty
class PerturbationCommit(TurnPenalty):
    """ber-pt: an entropy-hinge hold until a budget-relative turn, then commitment to the
    ops whose masking hurts the validation loss most there (see the module docstring)."""

    name = "ber-pt"
    preset = {"strength": 1.75, "schedule": "constant"}
    params = {"rho": 0.95, "hold": 100.0, "batches": float(VAL_BATCHES)}
    tuning = ({}, {"reg_strength": 0.875}, {"reg_strength": 3.5})
    kept_key = "leaders"

    def __init__(self, **params: float):
        super().__init__(**params)
        if not 0 < self.rho < 1 or not self.hold > 0:
            raise ConfigError(f"ber-pt needs 0 < rho < 1 and hold > 0, got rho {self.rho}, "
                              f"hold {self.hold}")
        if self.batches < 1 or self.batches != int(self.batches):
            raise ConfigError(f"ber-pt: batches is a count of validation batches (>= 1), got "
                              f"{self.batches:g}")
        self.net = None
        self.val_batches: list | None = None
        self.turn = None  # made for the budget at the first lam()

    @property
    def val_batches_needed(self) -> int:
        """Validation batches of each masking measurement (``--reg-param batches=N``)."""
        return int(self.batches)

    def setup(self, net, x: torch.Tensor, space) -> None:
        self.net = net

    def lam(self, strength, schedule, step, total_steps, steps_per_epoch) -> float:
        if self.turn is None:
            self.turn = PlateauTurn.for_budget(total_steps)
            if self._pending is not None:
                self.turn.load_state_dict(self._pending)
        lam = super().lam(strength, schedule, step, total_steps, steps_per_epoch)
        return lam if self.committing(step) else self.hold

    _pending: dict | None = None

    def committing(self, step: int) -> bool:
        """True from the step after the turn on (lambda_t is read at the step's start)."""
        return self.turn is not None and self.turn_step is not None and step > self.turn_step

    @property
    def turn_step(self) -> int | None:
        return None if self.turn is None else self.turn.turn_step

    def penalty(self, alphas, probe, val_loss=None, labels=None) -> torch.Tensor:
        if self.turn is not None and self.turn.update(self.step, probe):
            if self.net is None or not self.val_batches:
                raise ConfigError("ber-pt measures its leaders on the supernet and validation "
                                  "batches the search hands it (setup, val_batches)")
            self.kept = perturbation_leaders(self.net, self.val_batches)
        if not self.committing(self.step):
            return per_alpha_sum(lambda a: entropy_hinge(a, self.rho), alphas)
        total = zero_like(alphas)
        for name, a in alphas.items():
            logp = torch.log_softmax(a, dim=-1)
            total = total - logp.gather(-1, self.kept[name].unsqueeze(-1)).mean()
        return total

    def state_dict(self) -> dict:
        return super().state_dict() if self.turn is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if not state:
            return
        if self.turn is None:  # restored before the first lam(): kept for when it is made
            self._pending = {k: v for k, v in state.items() if k != self.kept_key}
            self.kept = {k: v.clone() for k, v in state[self.kept_key].items()}
            return
        super().load_state_dict(state)


__all__ = ["PerturbationCommit", "entropy_hinge", "masked_losses", "perturbation_leaders"]
