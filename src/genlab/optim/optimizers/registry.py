"""The optimiser registry: one entry per name, carrying every fact about that optimiser.

An :class:`OptimizerEntry` holds the class, the constructor arguments the name fixes
(``asam`` is SAM with ``adaptive=True``), whether its closure returns per-sample losses,
the training option that sets its radius, whether it needs ``model=`` and which of the
studies' options its constructor accepts (declared here, not read from signatures).
It also carries what the studies need: the radii its full search grid tries and whether
it is in the standard comparison. Each optimiser registers itself in the module that
defines it (``register_optimizer``); this module imports every module of the package, so a
new optimiser is one new module (docs/contributing.md). ``make_optimizer`` and the studies
read the entry; ``OPTIMIZERS``, ``PER_SAMPLE_CLOSURE`` and ``STANDARD_OPTIMIZERS`` are
derived from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from genlab.core.errors import ConfigError
from genlab.core.registry import Registry, import_submodules


@dataclass(frozen=True)
class OptimizerEntry:
    """What genlab knows about one optimiser name."""

    cls: type[torch.optim.Optimizer]
    #: constructor arguments the name fixes (asam: adaptive=True)
    fixed: dict = field(default_factory=dict)
    #: the closure returns per-sample losses (shape (b,)) instead of calling backward
    per_sample: bool = False
    #: TrainConfig field of its radius, searched with the learning rate (None: lr only)
    radius: str | None = None
    #: needs ``model=`` (K-FAC hooks, or the per-layer per-sample gradients)
    needs_model: bool = False
    #: the studies' options its constructor takes besides lr, momentum, weight_decay
    #: (rho, rho1, rho2, lam, xi, n_total, model)
    accepts: tuple[str, ...] = ()
    #: the radii its search grid ("full") tries with each learning rate (needed with a radius)
    search_radii: tuple[float, ...] = ()
    #: its place in the standard comparison (the paper's list, the studies' default
    #: optimisers, in this order); 0: not in it
    standard: int = 0

    def build(self, params, **kw) -> torch.optim.Optimizer:
        """The optimiser over ``params``; ``model=`` is dropped where it is not accepted."""
        if "model" not in self.accepts:
            kw.pop("model", None)
        return self.cls(params, **self.fixed, **kw)


OPTIMIZER_REGISTRY: Registry[OptimizerEntry] = Registry("optimizer")


def register_optimizer(name: str, entry: OptimizerEntry) -> OptimizerEntry:
    """Register ``entry`` under ``name``; an entry with a radius must say which radii its
    search grid tries (a study would otherwise find no grid row for it)."""
    if entry.radius is not None and not entry.search_radii:
        raise ConfigError(f"optimizer {name!r} has a radius ({entry.radius}) but no "
                          "search_radii: give the radii its search grid tries")
    return OPTIMIZER_REGISTRY.register(name, entry)


register_optimizer("sgd", OptimizerEntry(torch.optim.SGD, standard=1))
# the optimisers' modules register theirs (sam, asam, cov, samgcm, the CSAM family)
import_submodules("genlab.optim.optimizers", [str(Path(__file__).parent)],
                  skip=("registry", "perturb", "kfac", "per_sample_source"))

def __getattr__(name: str):
    """The names derived from the registry, read when asked for (an optimiser's module may be
    the first one imported and register itself after this module has run):
    ``OPTIMIZERS`` (every name, in registration order), ``PER_SAMPLE_CLOSURE`` (those whose
    closure returns per-sample losses) and ``STANDARD_OPTIMIZERS`` (the standard comparison,
    in its order)."""
    if name == "OPTIMIZERS":
        return OPTIMIZER_REGISTRY.names()
    if name == "PER_SAMPLE_CLOSURE":
        return tuple(n for n, e in OPTIMIZER_REGISTRY.items() if e.per_sample)
    if name == "STANDARD_OPTIMIZERS":
        return tuple(sorted((n for n, e in OPTIMIZER_REGISTRY.items() if e.standard),
                            key=lambda n: OPTIMIZER_REGISTRY.get(n).standard))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_optimizer(name: str, params, **kw) -> torch.optim.Optimizer:
    """Optimiser ``name`` (one of OPTIMIZERS) over ``params``; ``kw`` go to its constructor.

    Every name accepts ``model=`` (ignored by those that do not take it); COV and SAMGCM
    need it for their fast per-sample gradients (or ``per_sample="autograd"``). A setting
    the optimiser does not take, or a required one left out, is a ConfigError naming it
    and its default.
    """
    from genlab.optim.optimizers.perturb import refuse_settings

    refuse_settings(f"optimizer {name}", [k for k in kw if k != "model"],
                    optimizer_settings(name))
    return OPTIMIZER_REGISTRY.get(name).build(params, **kw)


def optimizer_settings(name: str) -> dict:
    """name -> default of every setting optimiser ``name`` takes: its constructors' keyword
    arguments (a perturbed optimiser's include its base SGD's), less those its registry
    entry fixes (asam's adaptive); a setting without a default maps to ``REQUIRED``."""
    from genlab.optim.optimizers.perturb import PerturbedOptimizer, settings_of

    entry = OPTIMIZER_REGISTRY.get(name)
    inits = [c.__init__ for c in entry.cls.__mro__ if "__init__" in vars(c)
             and c not in (PerturbedOptimizer, torch.optim.Optimizer, object)]
    if issubclass(entry.cls, PerturbedOptimizer):  # the base optimiser's (SGD's) settings
        inits.append(torch.optim.SGD.__init__)
    return {k: v for k, v in settings_of(*inits).items() if k not in entry.fixed}
