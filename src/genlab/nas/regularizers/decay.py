"""``ber-decay`` and ``ber-commit``: the bifurcation reading of BER (ours; not the paper's code).

The abstract's "entropy-decay": the search cells first fit (their nodes' batch entropy rises)
and then compress (it falls); the turn is the bifurcation point. This candidate detects the
turn and from there restrains alpha's movement in proportion to the batch-entropy decay:

- H_t: the mean batch entropy (Peer et al., genlab.nas.entropy.batch_entropy) of every node
  of every search cell on the step's validation batch, smoothed by an exponential moving
  average with weight ``SMOOTHING`` (a time constant of ~50 steps); P_t its running peak;
- the turn: the first step t >= ``WARMUP`` at which the smoothed H_t has fallen
  ``TURN_DROP`` (relative) below P_t; alpha at that step is kept as the anchor a* (fixed,
  never learnt);
- after the turn, R = d_t x sum over alpha tensors of mean_e ||alpha_e - a*_e||^2 with
  d_t = max(0, P_t - H_t) / P_t, the relative decay; before it R = 0 (plain DARTS).

``ber-commit`` (the composition with beta-DARTS, the bench's method that does not collapse):
beta-DARTS' penalty, the mean logsumexp of every edge's alphas, at a constant strength until
the turn, then released linearly to 0 at the end of the search, so alpha commits from the
ordering it kept while it was held near uniform. (lambda_t is read at the step's start, so
the release begins on the step after the turn.)

``ber-anchor`` (round three's addendum, docs/ber_round3.md): beta-DARTS' hold at the fixed
strength ``HOLD_STRENGTH`` until the turn, here the end of the rise (PlateauTurn: a held
alpha's cells level off without falling, so EntropyTurn's fall never comes); at the turn
each edge's leading op k*_e (the argmax of alpha there) is fixed, and after it the hold
stops and alpha is pulled to those ops with
R = sum over alpha tensors of mean_e -log softmax(alpha_e)[k*_e] at the given strength: the
ordering kept while held is committed to, not released to the data's drift.

The state (smoothed entropy, peak, turn step, anchors) is updated once per search step (the
second-order step evaluates the penalty several times per step) and is checkpointed, so a
resumed search continues the same curve. Presets (constant schedule): ber-decay's and
ber-commit's calibrated middle points (docs/ber_round3.md, "Calibration"); ber-anchor's
selected setting, the one ``ber`` names.
"""

from __future__ import annotations

from collections import deque

import torch

from genlab.nas.regularizers.base import Penalty, per_alpha_sum, register_penalty, zero_like
from genlab.nas.regularizers.layerwise import node_entropy_reading
from genlab.nas.supernet.probe import CellTraces

SMOOTHING = 0.02  # EMA weight of the newest step (time constant ~50 steps)
WARMUP = 100  # steps before a turn may be detected (the EMA has settled)
TURN_DROP = 0.01  # relative fall below the running peak that marks the turn
PLATEAU_WINDOW = 100  # ber-anchor: the rise is measured over this many steps (2 time constants)
# ber-anchor's hold until the turn: ber-commit's strongest calibrated grid point (3 / 2.099),
# the one whose cells kept the fewest parameter-free edges (docs/ber_round3.md, "Selection")
HOLD_STRENGTH = 1.43


class EntropyTurn:
    """The smoothed mean node batch entropy, its running peak and the step of the turn,
    updated once per search step (see the module docstring)."""

    def __init__(self, *, smoothing: float = SMOOTHING, warmup: int = WARMUP):
        self.smoothing, self.warmup = smoothing, warmup
        self.smoothed: float | None = None
        self.peak = 0.0
        self.turn_step: int | None = None
        self.updated_at: int | None = None

    def update(self, step: int, probe: CellTraces) -> bool:
        """Take this step's node entropies (once per step); True when the turn is this step."""
        if self.updated_at == step:
            return False
        with torch.no_grad():  # a reading, never a force: no graph on the hot path
            h = float(node_entropy_reading(probe))
        self.smoothed = h if self.smoothed is None else (
            (1 - self.smoothing) * self.smoothed + self.smoothing * h)
        self.peak = max(self.peak, self.smoothed)
        self.updated_at = step
        if self.turn_step is None and step >= self.warmup and self.fires():
            self.turn_step = step
            return True
        return False

    def fires(self) -> bool:
        """The turn's rule: the smoothed entropy has fallen TURN_DROP below its peak."""
        return self.smoothed < (1 - TURN_DROP) * self.peak

    def decay(self) -> float:
        """d_t, the relative fall of the smoothed node batch entropy below its peak."""
        if self.smoothed is None or self.peak <= 0:
            return 0.0
        return max(0.0, self.peak - self.smoothed) / self.peak

    def state_dict(self) -> dict:
        return {"smoothed": self.smoothed, "peak": self.peak, "turn_step": self.turn_step,
                "updated_at": self.updated_at}

    def load_state_dict(self, state: dict) -> None:
        self.smoothed, self.peak = state["smoothed"], state["peak"]
        self.turn_step, self.updated_at = state["turn_step"], state["updated_at"]


class PlateauTurn(EntropyTurn):
    """The end of the rise: the first step t >= ``WARMUP`` at which the smoothed entropy has
    risen less than ``TURN_DROP`` (relative) over the last ``PLATEAU_WINDOW`` steps. It fires
    where EntropyTurn would (a fall is a rise below 1%) or earlier, and also on a curve that
    rises and levels off without falling (ber-anchor: the cells of a held alpha)."""

    def __init__(self, *, smoothing: float = SMOOTHING, warmup: int = WARMUP,
                 window: int = PLATEAU_WINDOW):
        super().__init__(smoothing=smoothing, warmup=warmup)
        self.window = window
        # smoothed values of the ``window`` steps before this one
        self.history: deque[float] = deque(maxlen=window)

    @classmethod
    def for_budget(cls, total_steps: int) -> PlateauTurn:
        """The rule with its warm-up, window and smoothing time constant as fractions of the
        budget: NB201's 100, 100 and 50 of 1,800 steps (1/18, 1/18, 1/36; round four)."""
        span = max(2, round(total_steps / 18))
        return cls(smoothing=min(1.0, 36 / max(total_steps, 1)), warmup=span, window=span)

    def fires(self) -> bool:
        return (len(self.history) == self.window
                and self.smoothed - self.history[0] < TURN_DROP * self.smoothed)

    def update(self, step: int, probe: CellTraces) -> bool:
        if self.updated_at == step:
            return False
        fired = super().update(step, probe)
        self.history.append(self.smoothed)
        return fired

    def state_dict(self) -> dict:
        return {**super().state_dict(), "history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.history = deque(state["history"], maxlen=self.window)


class TurnPenalty(Penalty):
    """A penalty that reads the entropy turn: keeps the step that lam() was asked for."""

    needs_probe = True
    turn_rule: type[EntropyTurn] = EntropyTurn
    # the checkpoint key of the per-alpha tensors kept at the turn (``kept``); None: none kept
    kept_key: str | None = None

    def __init__(self, **params: float):
        super().__init__(**params)
        self.turn = self.turn_rule()
        self.step = 0
        self.kept: dict[str, torch.Tensor] = {}

    @property
    def turn_step(self) -> int | None:
        return self.turn.turn_step

    def make_probe(self) -> CellTraces:
        return CellTraces()

    def lam(self, strength, schedule, step, total_steps, steps_per_epoch) -> float:
        self.step = step  # the step the next penalty() belongs to
        return super().lam(strength, schedule, step, total_steps, steps_per_epoch)

    def state_dict(self) -> dict:
        state = self.turn.state_dict()
        if self.kept_key:
            state[self.kept_key] = {k: v.clone() for k, v in self.kept.items()}
        return state

    def load_state_dict(self, state: dict) -> None:
        if state:
            self.turn.load_state_dict(state)
            if self.kept_key:
                self.kept = {k: v.clone() for k, v in state[self.kept_key].items()}


@register_penalty
class EntropyDecayRestraint(TurnPenalty):
    """ber-decay: after the nodes' batch entropy turns, restrain alpha as much as it decays."""

    name = "ber-decay"
    preset = {"strength": 101.0, "schedule": "constant"}
    kept_key = "anchors"

    @property
    def anchors(self) -> dict[str, torch.Tensor]:
        """a*, alpha at the turn (by alpha name)."""
        return self.kept

    def penalty(self, alphas, probe, val_loss=None, labels=None) -> torch.Tensor:
        if self.turn.update(self.step, probe):
            self.kept = {name: a.detach().clone() for name, a in alphas.items()}
        if self.turn_step is None:
            return zero_like(alphas)
        d = self.turn.decay()
        total = zero_like(alphas)
        for name, a in alphas.items():
            total = total + d * ((a - self.anchors[name]) ** 2).sum(-1).mean()
        return total


def _hold(alphas) -> torch.Tensor:
    """beta-DARTS' penalty: the mean logsumexp of every edge's alphas, summed over tensors."""
    return per_alpha_sum(lambda a: torch.logsumexp(a, dim=-1).mean(), alphas)


@register_penalty
class BetaUntilTurn(TurnPenalty):
    """ber-commit: beta-DARTS' restraint until the entropy turn, released linearly after it."""

    name = "ber-commit"
    preset = {"strength": 0.476, "schedule": "constant"}

    def lam(self, strength, schedule, step, total_steps, steps_per_epoch) -> float:
        lam = super().lam(strength, schedule, step, total_steps, steps_per_epoch)
        t0 = self.turn_step
        if t0 is None or step <= t0:
            return lam
        return lam * max(0.0, 1.0 - (step - t0) / max(total_steps - t0, 1))

    def penalty(self, alphas, probe, val_loss=None, labels=None) -> torch.Tensor:
        self.turn.update(self.step, probe)
        return _hold(alphas)


@register_penalty
class HoldThenAnchor(TurnPenalty):
    """ber-anchor: beta-DARTS' hold until the entropy turn, then commitment to the ops that
    led at the turn (see the module docstring)."""

    name = "ber-anchor"
    # the selected setting (docs/ber_round3.md, "Selection of ber-anchor"), which `ber` names
    preset = {"strength": 1.75, "schedule": "constant"}
    tuning = ({}, {"reg_strength": 0.875}, {"reg_strength": 3.5})
    turn_rule = PlateauTurn
    kept_key = "leaders"

    @property
    def leaders(self) -> dict[str, torch.Tensor]:
        """k*, each edge's leading op at the turn (by alpha name)."""
        return self.kept

    def committing(self, step: int) -> bool:
        """True from the step after the turn on (lambda_t is read at the step's start)."""
        return self.turn_step is not None and step > self.turn_step

    def lam(self, strength, schedule, step, total_steps, steps_per_epoch) -> float:
        lam = super().lam(strength, schedule, step, total_steps, steps_per_epoch)
        return lam if self.committing(step) else HOLD_STRENGTH

    def penalty(self, alphas, probe, val_loss=None, labels=None) -> torch.Tensor:
        if self.turn.update(self.step, probe):
            self.kept = {name: a.detach().argmax(-1) for name, a in alphas.items()}
        if not self.committing(self.step):
            return _hold(alphas)
        total = zero_like(alphas)
        for name, a in alphas.items():
            logp = torch.log_softmax(a, dim=-1)
            total = total - logp.gather(-1, self.leaders[name].unsqueeze(-1)).mean()
        return total
