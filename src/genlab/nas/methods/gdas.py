"""GDAS (Dong & Yang, CVPR-19): a Gumbel hard sample per forward, only the drawn op runs.

D-X-Y/AutoDL-Projects, ``xautodl/models/cell_searchs/search_model_gdas.py`` (NB201) and
``search_model_gdas_nasnet.py`` (DARTS space): per forward and alpha tensor (shared by all
cells of a type) g = -log(Exp(1)) noise, p = softmax((log_softmax(alpha) + g) / tau),
hard = one_hot(argmax p) - p.detach() + p (straight through), redrawn while g or p is not
finite; the cells run only the drawn op (``search_cells.py``: NB201's ``forward_gdas`` adds
the other ops' weights as scalars, the NASNet cell's does not). tau = 10 -> 0.1 linearly,
tau_max - (tau_max - tau_min) x epoch / (epochs - 1) (``exps/NAS-Bench-201-algos/GDAS.py``,
``scripts-search/NAS-Bench-201-algos/GDAS.sh``); here step / (steps - 1). Alpha: Adam lr 3e-4,
weight decay 1e-3; weights: decay 5e-4 (``configs/nas-benchmark/algos/GDAS.config``); first
order. Not training (evaluation, derivation): softmax, and the supernet runs the dense mixture.
"""

from __future__ import annotations

import torch

from genlab.nas.methods.base import RELAXATIONS, Method, Relaxation, register_method


def gumbel_noise(alpha: torch.Tensor) -> torch.Tensor:
    """-log(E), E ~ Exp(1), of alpha's shape (one place to replace in tests)."""
    return -torch.empty_like(alpha).exponential_().log()


class Gumbel(Relaxation):
    """GDAS' hard Gumbel-softmax with straight-through gradients (module docstring)."""

    name = "gumbel"

    def __init__(self, tau_max: float = 10.0, tau_min: float = 0.1, **params):
        super().__init__(tau_max=tau_max, tau_min=tau_min, **params)
        self.tau_max, self.tau_min = float(tau_max), float(tau_min)
        self.tau = self.tau_max

    def at(self, step: int, total: int) -> None:
        frac = step / (total - 1) if total > 1 else 1.0
        self.tau = self.tau_max - (self.tau_max - self.tau_min) * min(frac, 1.0)

    def probs(self, alpha: torch.Tensor, gumbels: torch.Tensor) -> torch.Tensor:
        """softmax((log_softmax(alpha) + gumbels) / tau) per row."""
        return torch.softmax((alpha.log_softmax(dim=-1) + gumbels) / self.tau, dim=-1)

    @staticmethod
    def hard(probs: torch.Tensor) -> torch.Tensor:
        """One-hot of each row's argmax, with the straight-through gradient of ``probs``."""
        index = probs.max(-1, keepdim=True)[1]
        one_hot = torch.zeros_like(probs).scatter_(-1, index, 1.0)
        return one_hot - probs.detach() + probs

    def sample(self, alpha: torch.Tensor, gumbels: torch.Tensor) -> torch.Tensor:
        """The hard straight-through weights for one draw ``gumbels`` (rows of alpha)."""
        return self.hard(self.probs(alpha, gumbels))

    def __call__(self, name: str, alpha: torch.Tensor, training: bool) -> torch.Tensor:
        if not training:
            return torch.softmax(alpha, dim=-1)
        while True:  # redrawn while the noise or the probabilities are not finite (upstream)
            gumbels = gumbel_noise(alpha)
            probs = self.probs(alpha, gumbels)
            if not torch.isinf(gumbels).any() and torch.isfinite(probs).all():
                return self.hard(probs)

    def state_dict(self) -> dict:
        return {"tau": self.tau}

    def load_state_dict(self, state: dict) -> None:
        self.tau = float(state.get("tau", self.tau))


RELAXATIONS.register(Gumbel.name, Gumbel)

GDAS = register_method(Method(
    "gdas", "D-X-Y/AutoDL-Projects: xautodl/models/cell_searchs/search_model_gdas.py, "
    "search_cells.py",
    "Gumbel hard sample per forward, only the drawn op runs, tau 10 -> 0.1 "
    "(Dong & Yang, CVPR-19)",
    relaxation="gumbel", relaxation_params={"tau_max": 10.0, "tau_min": 0.1},
    supernet={"sampled": True}, w_weight_decay=5e-4, arch_weight_decay=0.0, orders=(1,),
    tuning=({}, {"relaxation_params": {"tau_max": 10.0, "tau_min": 1.0}},
            {"relaxation_params": {"tau_max": 5.0, "tau_min": 0.1}},
            {"relaxation_params": {"tau_max": 20.0, "tau_min": 0.1}}),
    ours="MobileNet: only the drawn block runs",
    title="GDAS"))
