"""Regularisers of the architecture step: none (DARTS), beta (beta-DARTS) and BER.

Every regulariser adds ``lambda_t * R`` to the validation loss that the architecture
parameters alpha minimise. Alphas come named (``net.alphas()``: "cell" on NB201, "normal"
and "reduce" in the DARTS spaces, ...), each a tensor of one row of K logits per edge (|E|
rows); a penalty defined on one tensor is applied per tensor and summed over them, as
beta-DARTS applies its penalty per cell type in the DARTS space.

The penalties are objects (genlab.nas.regularizers.base.Penalty) in one registry,
``PENALTIES``; each module registers its own (``@register_penalty``) and this package imports
every module it holds, so a new penalty is a new module (docs/contributing.md). One module
per family:

- ``none``, ``beta``       genlab.nas.regularizers.baselines (DARTS, beta-DARTS);
- ``ber-kl``               genlab.nas.regularizers.kl (BER on the architecture side);
- ``ber-batch``            genlab.nas.regularizers.batch (BER on the cells' features);
- ``ber-lbe``              genlab.nas.regularizers.layerwise (Peer's layerwise batch entropy);
- ``ber-op``, ``ber-ib``, ``ber-xu``
                           genlab.nas.regularizers.per_op (per-op compression / information);
- ``ber-decay``, ``ber-commit``, ``ber-anchor``
                           genlab.nas.regularizers.decay (what changes at the entropy turn);
- ``ber-pt``               genlab.nas.regularizers.perturb_commit (round four's candidate).

Each entry carries its preset: the settings its name stands for when the command line leaves
them unset (``PRESETS``: ber-kl at the earlier ablation's choice, docs/ber.md "Choosing BER";
each batch-entropy candidate at its calibrated mid-point, docs/ber.md "Calibration";
ber-anchor at its selected setting, docs/ber_round3.md). ``ber`` is a registry alias of the
variant kept after the selection protocol (genlab.nas.studies.ber_select; docs/ber.md,
"Selection protocol") at ``BER_DEFAULT``: since round three ber-anchor, the first eligible
candidate; before it the earlier ablation's ber-kl.

:class:`Regularizer` is one configured regulariser (name, strength, schedule); its dataclass
fields are the plain settings that a search stores as ``reg_resolved``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from genlab.core.errors import require_choice, require_positive
from genlab.core.registry import import_submodules
from genlab.nas.regularizers.base import (
    PENALTIES,
    SCHEDULES,
    Alphas,
    Penalty,
    named,
    per_alpha_sum,
    schedule_factor,
    zero_like,
)
from genlab.nas.regularizers.baselines import BetaDecay
from genlab.nas.supernet.probe import Probe

import_submodules(__name__, __path__)  # every module registers its penalties

REGULARIZERS = PENALTIES.names()
PRESETS = {name: dict(entry.preset) for name, entry in PENALTIES.items() if entry.preset}
BER = "ber"
# What ``--reg ber`` means: the winner of the selection protocol, ber-anchor at lambda 1.75
# (round three, docs/ber_round3.md; until then the earlier ablation's ber-kl).
BER_DEFAULT = {"name": "ber-anchor", **PRESETS["ber-anchor"]}
PENALTIES.alias(BER, BER_DEFAULT["name"])
BETA_DEFAULT_STRENGTH = BetaDecay.default_strength


@dataclass
class Regularizer:
    """A named penalty on alpha with its strength schedule (see the module docstring)."""

    name: str
    strength: float = 0.0
    schedule: str = "up"
    steps_per_epoch: int = 1
    params: dict[str, float] = field(default_factory=dict)  # the penalty's own settings

    needs_probe: bool = False

    def __post_init__(self):
        require_choice("regulariser", self.name, PENALTIES.names())
        require_choice("schedule", self.schedule, SCHEDULES)
        require_positive("reg-strength", self.strength, allow_zero=True)
        require_positive("steps_per_epoch", self.steps_per_epoch)
        # not a dataclass field: asdict() of a regulariser stays its plain settings
        self.penalty_object: Penalty = PENALTIES.get(self.name)(**self.params)
        self.needs_probe = self.penalty_object.needs_probe

    def make_probe(self) -> Probe | None:
        """The probe to pass to the supernet's forward (None when the penalty needs none)."""
        return self.penalty_object.make_probe()

    def setup(self, net, x: torch.Tensor, space) -> None:
        """Once before the search: penalties with state read the network (x: first val batch)."""
        self.penalty_object.setup(net, x, space)

    def parameters(self) -> list[torch.Tensor]:
        """Extra parameters the alpha optimiser trains with alpha (ber-lbe's targets)."""
        return self.penalty_object.parameters()

    def state_dict(self) -> dict:
        return self.penalty_object.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.penalty_object.load_state_dict(state)

    def lam(self, step: int, total_steps: int) -> float:
        """lambda_t at this batch step."""
        return self.penalty_object.lam(self.strength, self.schedule, step, total_steps,
                                       self.steps_per_epoch)

    def penalty(self, alphas: Alphas | torch.Tensor, probe: Probe | None = None,
                val_loss: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        """R(alpha) (unweighted), summed over the alpha tensors; ``probe`` for the feature
        penalties, ``val_loss`` (CE_val with its graph) for ber-lbe, ``labels`` (those of
        the validation batch) for ber-ib."""
        return self.penalty_object.penalty(named(alphas), probe, val_loss, labels)

    def __call__(self, alphas: Alphas | torch.Tensor, step: int, total_steps: int,
                 probe: Probe | None = None, val_loss: torch.Tensor | None = None,
                 labels: torch.Tensor | None = None) -> torch.Tensor:
        lam = self.lam(step, total_steps)
        if lam == 0.0:
            return zero_like(alphas)
        return lam * self.penalty(alphas, probe, val_loss, labels)


def preset_of(name: str) -> dict:
    """The settings ``name`` stands for: BER_DEFAULT for ``ber``, else its entry's preset
    (ConfigError listing the regularisers and aliases for an unknown name)."""
    entry = PENALTIES.get(name)
    return dict(BER_DEFAULT) if name == BER else {"name": entry.name, **entry.preset}


def describe_setting(settings: dict) -> str:
    """``"ber-kl (strength 0.3, schedule down)"``: a preset_of() dict or a Regularizer's
    asdict(), in words (the settings that ``--reg`` help and the search's ber line show)."""
    parts = [f"{k} {settings[k]}" for k in ("strength", "schedule") if k in settings]
    parts += [f"{k} {v}" for k, v in settings.get("params", {}).items()]
    extra = ", ".join(parts)
    return f"{settings['name']} ({extra})" if extra else settings["name"]


def regularizer_help() -> str:
    """The ``--reg`` help: every registered regulariser, then each alias and what it stands for."""
    aliases = "; ".join(f"{alias} is an alias of the chosen setting, "
                        f"{describe_setting(preset_of(alias))}"
                        for alias in PENALTIES.aliases())
    return (f"none is DARTS, beta beta-DARTS, ber-* the BER variants (our reconstruction; "
            f"docs/ber.md); {aliases}.")


def make_regularizer(name: str, strength: float | None = None, schedule: str | None = None,
                     steps_per_epoch: int = 1, params: dict | None = None) -> Regularizer:
    """Build a regulariser from CLI values; ``ber`` resolves to BER_DEFAULT and the unset
    options of a named variant to its preset (PRESETS)."""
    preset = preset_of(name)
    name = preset["name"]
    strength = preset.get("strength") if strength is None else strength
    schedule = schedule or preset.get("schedule")
    params = {**preset.get("params", {}), **(params or {})}
    if strength is None:
        strength = PENALTIES.get(name).default_strength
    return Regularizer(name, float(strength), schedule or "up", steps_per_epoch,
                       {k: float(v) for k, v in params.items()})


__all__ = ["BER", "BER_DEFAULT", "PENALTIES", "PRESETS", "REGULARIZERS", "SCHEDULES", "Alphas",
           "Penalty", "Regularizer", "describe_setting", "make_regularizer", "named",
           "per_alpha_sum", "preset_of", "regularizer_help", "schedule_factor", "zero_like"]
