"""The penalty-object protocol of the architecture step's regularisers, and their registry.

A regulariser family member is a :class:`Penalty` subclass registered in ``PENALTIES``
(a core.registry Registry) under its name; its class attributes carry its facts:
``needs_probe`` (it reads the cells through a probe, genlab.nas.supernet.probe), ``preset`` (the
settings its name stands for when the command line leaves them unset) and
``default_strength`` and ``params``, its own settings with their defaults (ber-lbe's floor
``h_min``; a search passes them as ``--reg-param KEY=VALUE``). A member registers itself
where it is defined (``@register_penalty``; the package imports every module of its own).
An instance is made per search from its params (unknown names are refused, listing the
member's) and gives ``penalty(alphas, probe, val_loss, labels)`` (R, unweighted)
and ``lam(...)`` (lambda_t). Members with state (ber-lbe's targets) are set up once before
the search (``setup(net, x, space)``), give their extra parameters to the alpha optimiser
(``parameters()``) and their state to the checkpoint (``state_dict()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from genlab.core.errors import ConfigError
from genlab.core.registry import Registry
from genlab.nas.supernet.probe import Probe

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


class Penalty:
    """One regulariser: R(alpha) and its strength rule (see the module docstring)."""

    name: ClassVar[str] = ""
    needs_probe: ClassVar[bool] = False
    uses_val_loss: ClassVar[bool] = False
    preset: ClassVar[dict[str, Any]] = {}
    default_strength: ClassVar[float] = 1.0
    params: ClassVar[dict[str, float]] = {}  # its own settings and their defaults
    val_batches_needed: ClassVar[int] = 0  # validation batches the search hands it
    # True where the penalty and its lambda_t read no value on the host, so that the search
    # step may be captured in a CUDA graph (genlab.nas.captured); a class claims it in its own
    # body, a subclass does not inherit it
    capturable: ClassVar[bool] = False
    # the settings `nas bench --tune` tries for a row of this penalty on DARTS (search
    # options over its preset, which is {}; genlab.nas.bench.tuning)
    tuning: ClassVar[tuple[dict[str, Any], ...]] = ({},)

    def __init__(self, **params: float):
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            known = ", ".join(self.params) or "none"
            raise ConfigError(f"--reg-param {unknown[0]}: {self.name} has no such setting; "
                              f"its settings: {known}")
        for key, default in self.params.items():
            setattr(self, key, float(params.get(key, default)))

    def make_probe(self) -> Probe | None:
        """The probe to pass to the supernet's forward (None when the penalty needs none)."""
        return None

    def setup(self, net, x: torch.Tensor, space) -> None:
        """Once before the search (x: the first validation batch); stateless by default."""

    def parameters(self) -> list[torch.Tensor]:
        """Extra parameters the alpha optimiser trains with alpha."""
        return []

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def lam(self, strength: float, schedule: str, step: int, total_steps: int,
            steps_per_epoch: int) -> float:
        """lambda_t at this batch step: ``strength`` times the schedule's factor."""
        return strength * schedule_factor(schedule, step, total_steps)

    def penalty(self, alphas: Alphas, probe: Probe | None = None,
                val_loss: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        """R (unweighted), summed over the named alpha tensors."""
        raise NotImplementedError


# name -> Penalty subclass, filled by the modules of genlab.nas.regularizers
PENALTIES: Registry[type[Penalty]] = Registry("regulariser")


def register_penalty(cls: type[Penalty]) -> type[Penalty]:
    """Class decorator: register a Penalty under its ``name``."""
    PENALTIES.register(cls.name, cls)
    return cls
