"""R-DARTS (L2) and DARTS-ES (Zela et al., ICLR-20): a stronger weight decay; early stopping
on the dominant eigenvalue of the validation-loss Hessian w.r.t. alpha.

Source: automl/RobustDARTS, ``src/search/train_search.py`` (``--weight_decay``, the loop and
``--early_stop 1``), ``src/search/args.py`` (defaults), ``src/utils.py`` (``EVLocalAvg``) and
``scripts/start_search.sh`` / ``scripts/DARTS_search.sh`` (the weight-decay grid 3e-4 x 3^k,
k = 0..4, and ``--report_freq_hessian 2``).

**R-DARTS (L2)** is DARTS with the weights' L2 factor raised. The paper picks the factor per
benchmark from the grid by validation error, so no single value is "the" L2 result; the
preset takes the grid's largest, 3e-4 x 3^4 = 0.0243 (the most regularised end, where the
paper's curves have the smallest eigenvalues).

**DARTS-ES** (``HessianEarlyStop``, upstream ``EVLocalAvg`` with its defaults: window 5,
factor 1.3, ``es_start_epoch`` 10, delta 4, and the eigenvalue every ``ev_freq`` = 2 epochs
as in the authors' scripts, plus the last epoch). With ev the eigenvalues so far (one per
``ev_freq`` epochs): from the 3rd on, each new one appends a local average (the mean of all
so far while fewer than 5, then of a sliding window of 5), which belongs to the epoch
``ev_freq * 2`` earlier (the window's centre). At a Hessian epoch e other than the last,
with c = e - 2 ev_freq the centre of the newest average: if c - delta * ev_freq >= 10 and
newest / (the average ``delta`` entries earlier) > 1.3, the search stops, and the returned
architecture is the genotype of epoch c - delta * ev_freq (the centre of the earlier
average; ``chosen`` is that epoch's record). The rule never fires at the last epoch
(upstream skips the check there) and so needs at least 24 epochs with these defaults; a
shorter run is DARTS. At the digits proxy an epoch is one pass of the train split (11
batches at batch 64): the default budgets give 164 epochs (nb201), 28 (darts), 55 (s1-s4).
"""

from __future__ import annotations

import math

from genlab.nas.methods.base import STOPS, Method, StopRule, register_method

L2_GRID = tuple(3e-4 * 3 ** k for k in range(5))  # scripts/start_search.sh


class HessianEarlyStop(StopRule):
    """DARTS-ES: upstream's local-average rule on the per-epoch ``hessian_eig`` (module doc)."""

    name = "hessian-es"
    needs_hessian = True

    def __init__(self, window: int = 5, factor: float = 1.3, start_epoch: int = 10,
                 delta: int = 4, ev_freq: int = 2, **params):
        super().__init__(window=window, factor=factor, start_epoch=start_epoch, delta=delta,
                         ev_freq=ev_freq, **params)
        self.window, self.factor, self.start_epoch = window, factor, start_epoch
        self.delta, self.ev_freq = delta, ev_freq
        self.total_steps: int | None = None
        self.ev: list[float] = []
        self.local_avg: list[float] = []
        self.la_epochs: dict[int, int] = {}  # Hessian epoch -> epoch of its newest average
        self.records: dict[int, dict] = {}  # Hessian epoch -> its record
        self.la_start = 0

    def at(self, step: int, total: int) -> None:
        self.total_steps = total

    def update(self, record: dict) -> bool:
        epoch, ev = int(record["epoch"]), record.get("hessian_eig")
        last = self.total_steps is not None and record["step"] >= self.total_steps
        if ev is None or (epoch % self.ev_freq and not last):
            return False  # upstream computes the eigenvalue every ev_freq epochs and the last
        self.ev.append(float(ev))
        self.records[epoch] = record
        half = math.ceil(self.window / 2)
        if len(self.ev) >= half and not last:
            if len(self.ev) < self.window:
                self.local_avg.append(sum(self.ev) / len(self.ev))
            else:
                chunk = self.ev[self.la_start:self.la_start + self.window]
                self.local_avg.append(sum(chunk) / len(chunk))
                self.la_start += 1
            self.la_epochs[epoch] = epoch - self.ev_freq * (self.window // 2)
        elif len(self.ev) < half:
            self.la_epochs[epoch] = -1
        if last:
            return False  # upstream does not check at the last epoch
        return self._check(epoch)

    def _check(self, epoch: int) -> bool:
        stop_epoch = self.la_epochs[epoch] - self.ev_freq * self.delta
        if stop_epoch < self.start_epoch or len(self.local_avg) <= self.delta:
            return False
        current, previous = self.local_avg[-1], self.local_avg[-1 - self.delta]
        if previous == 0 or not current / previous > self.factor:
            return False
        self.stopped_epoch = epoch
        self.chosen = self.records[stop_epoch]
        return True

    def state_dict(self) -> dict:
        return {**super().state_dict(), "ev": self.ev, "local_avg": self.local_avg,
                "la_epochs": self.la_epochs, "records": self.records, "la_start": self.la_start}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.ev = list(state.get("ev", []))
        self.local_avg = list(state.get("local_avg", []))
        self.la_epochs = {int(k): v for k, v in state.get("la_epochs", {}).items()}
        self.records = {int(k): v for k, v in state.get("records", {}).items()}
        self.la_start = int(state.get("la_start", 0))


STOPS.register(HessianEarlyStop.name, HessianEarlyStop)

SOURCE = "automl/RobustDARTS: src/search/train_search.py, src/search/args.py"
RDARTS_L2 = register_method(Method(
    "rdarts-l2", SOURCE + ", scripts/start_search.sh (weight-decay grid)",
    "DARTS with the weights' L2 factor 0.0243, the largest of the authors' grid "
    "(Zela et al., ICLR-20)", w_weight_decay=L2_GRID[-1],
    tuning=({}, *({"w_weight_decay": v} for v in L2_GRID[-3:-1])),
    title="R-DARTS (L2)"))
RDARTS_ES = register_method(Method(
    "rdarts-es", SOURCE + ", src/utils.py (EVLocalAvg)",
    "DARTS stopped early when the local average of the alpha-Hessian's dominant eigenvalue "
    "grows by 1.3x; returns the architecture of the earlier epoch (Zela et al., ICLR-20)",
    stop=HessianEarlyStop.name,
    tuning=({}, {"stop_params": {"factor": 1.1}}, {"stop_params": {"factor": 1.5}}),
    title="R-DARTS (ES)"))
