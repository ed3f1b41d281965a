"""What a differentiable-search method is: a composition of parts the search loop already has.

A method (``Method``, one module per method in this package, registered in ``METHODS``) is
its authors' preset over six parts, each from its own registry, so that the search loop
(genlab.nas.search) never branches on a method's name:

- a **relaxation** (``RELAXATIONS``): how a row of alpha becomes the mixing weights of one
  forward (softmax; a Dirichlet sample; a Gumbel hard sample). Set on the supernet
  (``AlphaSupernet.relaxation``); ``at(step, total)`` moves its schedule (GDAS' tau);
- **supernet options** (``SUPERNET_OPTIONS``, genlab.nas.methods.supernet_options):
  structural changes the spaces build (``partial_channels`` and ``edge_norm`` for PC-DARTS,
  ``aux_skip`` for DARTS-, ``sampled`` (only the drawn op runs) for GDAS, ``drop_path`` for
  R-DARTS (DP)) and PC-DARTS' warm-up (``arch_start``); plain values, so a checkpoint's model
  record rebuilds the same supernet; the knobs that move over a search (the auxiliary skip's
  beta, the drop-path probability) are set each step through ``net.set_knobs``;
- a **weight-step perturbation** (``PERTURBATIONS``): the mixing weights the weight step
  uses instead of the relaxation's (SDARTS-RS / -ADV);
- a **regulariser** (``--reg``, genlab.nas.regularizers): the method's own, or any other on
  top (so BER composes with every method);
- a **stopping rule** (``STOPS``): reads each epoch's record and may end the search, naming
  the epoch whose architecture is returned (DARTS-ES);
- a **selection rule** (``SELECTIONS``): how the discrete architecture is taken from the
  trained supernet (argmax by the space's rule; DARTS-PT's perturbation-based projection).

``SearchConfig`` fields left None take the method's preset; every part is also settable on
its own (the supernet options with ``--supernet-param KEY=VALUE``). The proxy rule
(docs/nas_methods.md): schedules are fractions of the search's step budget (an upstream
"epoch 15 of 50" is 30% of the steps), learning rates keep the ratio to DARTS' that the
authors used (``arch_lr_scale``), and DARTS' own alpha weight decay (1e-3 upstream) is the
proxy's 0 (docs/ber.md) for every method that inherits it; DrNAS keeps its 1e-3, which its
authors present as the method's regulariser.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from genlab.core.errors import ConfigError
from genlab.core.registry import Registry
from genlab.nas.methods.supernet_options import (
    SUPERNET_OPTIONS,
    active,
    builder_options,
    resolve_supernet,
    supernet_values,
)

#: the most settings a method's tuning grid may hold (the same budget for every method)
TUNING_MAX = 4


def check_tuning(what: str, tuning) -> None:
    """ConfigError unless ``tuning`` is 1..TUNING_MAX distinct mappings of options."""
    if not 1 <= len(tuning) <= TUNING_MAX or not all(isinstance(s, dict) for s in tuning):
        raise ConfigError(f"{what}: its tuning grid is 1 to {TUNING_MAX} settings (mappings "
                          f"of search options), got {tuning!r}")
    if len({repr(sorted(s.items())) for s in tuning}) != len(tuning):
        raise ConfigError(f"{what}: a tuning setting is repeated")


# -- parts ----------------------------------------------------------------------------------
class Relaxation:
    """Mixing weights of one row of alpha per forward; softmax unless a subclass says else."""

    name: ClassVar[str] = "softmax"
    # this class's forward reads no host value (genlab.nas.captured reads the claim from the
    # class's own body: a subclass does not inherit it)
    capturable: ClassVar[bool] = True

    def __init__(self, **params):
        self.params = params

    def at(self, step: int, total: int) -> None:
        """Move the relaxation's schedule to ``step`` of ``total`` (nothing by default)."""

    def __call__(self, name: str, alpha: torch.Tensor, training: bool) -> torch.Tensor:
        return torch.softmax(alpha, dim=-1)

    def expected(self, name: str, alpha: torch.Tensor) -> torch.Tensor:
        """The weights' expectation (what entropy and derivation diagnostics read)."""
        return torch.softmax(alpha.detach(), dim=-1)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class Perturbation:
    """The weights of the weight step (None: the relaxation's, as in DARTS)."""

    name: ClassVar[str] = "none"
    # this class's forward reads no host value (genlab.nas.captured reads the claim from the
    # class's own body: a subclass does not inherit it)
    capturable: ClassVar[bool] = True

    def __init__(self, **params):
        self.params = params

    def weights(self, net, batch, step: int, total: int) -> dict[str, torch.Tensor] | None:
        return None


class StopRule:
    """Reads each epoch's record; ``update`` returns True to end the search."""

    name: ClassVar[str] = "none"
    needs_hessian: ClassVar[bool] = False  # the Hessian eigenvalue every epoch

    def __init__(self, **params):
        self.params = params
        self.stopped_epoch: int | None = None  # the epoch at which the rule fired
        self.chosen: dict | None = None  # the record whose architecture is returned

    def at(self, step: int, total: int) -> None:
        """Called with each step of the ``total`` (nothing by default; DARTS-ES reads the
        budget's end from it)."""

    def update(self, record: dict) -> bool:
        return False

    def state_dict(self) -> dict:
        return {"stopped_epoch": self.stopped_epoch, "chosen": self.chosen}

    def load_state_dict(self, state: dict) -> None:
        self.stopped_epoch = state.get("stopped_epoch")
        self.chosen = state.get("chosen")


@dataclass
class SelectionContext:
    """What a selection rule may use after the search: the trained supernet and its data."""

    space: Any
    net: Any
    cfg: Any  # the resolved SearchConfig
    train: Any  # step-indexed batches (genlab.nas.data.StepBatches)
    val: Any
    device: Any
    w_opt: Any  # the weight optimiser (its state, e.g. momentum, at the end of the search)
    train_batch: Any  # callable(step) -> augmented (x, y) on the device
    val_batch: Any
    progress: Any = None  # a progress tick, or None
    log: Any = None  # callable(record): writes one record to the run's log


class Selection:
    """The discrete architecture from the trained supernet: the space's rule (argmax)."""

    name: ClassVar[str] = "argmax"

    def __init__(self, **params):
        if params and type(self).__init__ is Selection.__init__:
            raise ConfigError(f"selection {self.name} takes no parameters, got "
                              f"{sorted(params)}")
        self.params = params

    def select(self, ctx: SelectionContext):
        return derive(ctx.space, ctx.net)


RELAXATIONS: Registry[type[Relaxation]] = Registry("relaxation")
PERTURBATIONS: Registry[type[Perturbation]] = Registry("weight-step perturbation")
STOPS: Registry[type[StopRule]] = Registry("stopping rule")
SELECTIONS: Registry[type[Selection]] = Registry("selection rule")
RELAXATIONS.register(Relaxation.name, Relaxation)
PERTURBATIONS.register(Perturbation.name, Perturbation)
STOPS.register(StopRule.name, StopRule)
SELECTIONS.register(Selection.name, Selection)


def derive(space, net):
    """The genotype that the space's rule derives from the supernet's alphas (with the
    supernet's edge scales where it has them: PC-DARTS' betas)."""
    scales = net.edge_scales() if hasattr(net, "edge_scales") else None
    if scales is None:
        return space.derive(net.alphas())
    return space.derive(net.alphas(), edge_scales=scales)


# -- a method: its authors' preset over the parts --------------------------------------------
@dataclass(frozen=True)
class Method:
    """One DAS method as its authors run it (facts from their code; docs/nas_methods.md)."""

    name: str
    source: str  # the authors' repository and the file the facts come from
    summary: str
    reg: str = "none"
    relaxation: str = "softmax"
    relaxation_params: dict[str, Any] = field(default_factory=dict)
    perturb: str = "none"
    perturb_params: dict[str, Any] = field(default_factory=dict)
    stop: str = "none"
    stop_params: dict[str, Any] = field(default_factory=dict)
    # SUPERNET_OPTIONS values over their defaults (drop_path: the final drop-path
    # probability; arch_start: the fraction of the steps before alpha is first updated)
    supernet: dict[str, Any] = field(default_factory=dict)
    w_weight_decay: float = 3e-4
    arch_weight_decay: float = 0.0
    arch_lr_scale: float = 1.0  # the authors' alpha learning rate over DARTS' (3e-4)
    orders: tuple[int, ...] = (1, 2)  # 2 where the authors had the second-order step
    ours: str = ""  # where genlab extends the method beyond what its authors defined
    title: str = ""  # its name in its paper, for tables and claims (the name where empty)
    # the settings `nas bench --tune` tries (SearchConfig options over the preset; the preset
    # itself is the empty one): at most TUNING_MAX, around the authors' values (ours)
    tuning: tuple[dict[str, Any], ...] = ({},)

    def __post_init__(self):
        supernet_values(self.supernet, f"method {self.name}: supernet")
        check_tuning(f"method {self.name}", self.tuning)


METHODS: Registry[Method] = Registry("search method")


def register_method(method: Method) -> Method:
    """Add ``method`` to the registry (called in the module that defines it)."""
    return METHODS.register(method.name, method)


@dataclass
class SearchMethod:
    """The parts of one search, built from a method's preset and the config's overrides."""

    method: Method
    relaxation: Relaxation
    perturbation: Perturbation
    stop: StopRule
    selection: Selection
    supernet_params: dict[str, Any]  # every supernet option's value (SUPERNET_OPTIONS)

    @property
    def supernet_options(self) -> dict[str, Any]:
        """The space builder's keywords of the supernet options (those away from their
        defaults)."""
        return builder_options(self.supernet_params)

    def attach(self, net) -> None:
        """Set the relaxation on a freshly built supernet."""
        if self.relaxation.name != "softmax":
            net.relaxation = self.relaxation

    def begin_step(self, net, step: int, total: int) -> None:
        """Move the schedules (relaxation, the supernet options' knobs: auxiliary skip,
        drop-path) to ``step``."""
        self.relaxation.at(step, total)
        self.stop.at(step, total)
        knobs = {}
        for opt, value in active(self.supernet_params):
            if opt.knobs is not None:
                knobs.update(opt.knobs(value, step, total))
        if knobs:
            net.set_knobs(**knobs)

    def arch_active(self, step: int, total: int) -> bool:
        """False while a supernet option holds alpha still (PC-DARTS' warm-up)."""
        return all(opt.arch_active(value, step, total)
                   for opt, value in active(self.supernet_params)
                   if opt.arch_active is not None)

    def architecture(self, ctx: SelectionContext):
        """The search's architecture: the stopping rule's choice when it fired (the genotype
        of the epoch it names), else the selection rule's on the trained supernet (which reads
        the expected weights: the relaxation is off meanwhile)."""
        if self.stop.chosen is not None:
            return ctx.space.parse(self.stop.chosen["genotype"])
        net = ctx.net
        net.relaxation, relaxation = None, net.relaxation
        try:
            return self.selection.select(ctx)
        finally:
            net.relaxation = relaxation

    def state_dict(self) -> dict:
        return {"relaxation": self.relaxation.state_dict(), "stop": self.stop.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.relaxation.load_state_dict(state.get("relaxation", {}))
        self.stop.load_state_dict(state.get("stop", {}))


def check_part_params(what: str, cls: type, params: Mapping[str, Any]) -> None:
    """ConfigError unless every key of ``params`` is a named parameter of ``cls``'s
    constructor (a part's settings; ``what`` names the part in the message)."""
    if not params:
        return
    names = [p.name for p in inspect.signature(cls.__init__).parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"]
    unknown = sorted(set(params) - set(names))
    if unknown:
        takes = ", ".join(names) if names else "no parameters"
        raise ConfigError(f"{what} has no parameter(s) {unknown}; it takes {takes}")


def build_parts(method: Method, *, relaxation: str | None = None, perturb: str | None = None,
                stop: str | None = None, select: str = "argmax",
                supernet: Mapping[str, Any] | None = None,
                select_params: Mapping[str, Any] | None = None,
                part_params: Mapping[str, Mapping[str, Any]] | None = None) -> SearchMethod:
    """The parts of ``method`` with the config's overrides (None keeps the preset's);
    ``supernet``: supernet options over the method's (``--supernet-param``, each checked
    against SUPERNET_OPTIONS); ``part_params``: "relaxation" / "perturb" / "stop" ->
    settings over the part's preset (the method's, where the part is the method's own), each
    refused unless the part's class takes it."""
    options = resolve_supernet(method.supernet, supernet or {})
    given = part_params or {}

    def part(kind: str, registry: Registry, chosen: str | None, preset: str, params: dict):
        cls = registry.get(chosen or preset)
        own = dict(given.get(kind) or {})
        check_part_params(f"{kind} {cls.name}", cls, own)
        same = chosen is None or chosen == preset
        return cls(**{**(params if same else {}), **own})

    rel = part("relaxation", RELAXATIONS, relaxation, method.relaxation,
               method.relaxation_params)
    per = part("perturb", PERTURBATIONS, perturb, method.perturb, method.perturb_params)
    stp = part("stop", STOPS, stop, method.stop, method.stop_params)
    sel = SELECTIONS.get(select)(**dict(select_params or {}))
    return SearchMethod(method, rel, per, stp, sel, options)


__all__ = ["METHODS", "PERTURBATIONS", "RELAXATIONS", "SELECTIONS", "STOPS", "SUPERNET_OPTIONS",
           "Method", "Perturbation", "Relaxation", "SearchMethod", "Selection",
           "SelectionContext", "StopRule", "build_parts", "derive", "register_method"]
