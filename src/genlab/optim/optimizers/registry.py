"""The optimiser registry: one entry per name, carrying every fact about that optimiser.

An :class:`OptimizerEntry` holds the class, the constructor arguments the name fixes
(``asam`` is SAM with ``adaptive=True``), whether its closure returns per-sample losses,
the training option that sets its radius, whether it needs ``model=`` and which of the
studies' options its constructor accepts (declared here, not read from signatures).
``make_optimizer`` and the studies read the entry; ``OPTIMIZERS`` and
``PER_SAMPLE_CLOSURE`` are derived from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from genlab.core.registry import Registry
from genlab.optim.optimizers.cov import COV
from genlab.optim.optimizers.csam import CSAM, ACSAM_Identity, CSAM_Identity
from genlab.optim.optimizers.sam import SAM
from genlab.optim.optimizers.samgcm import SAMGCM


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

    def build(self, params, **kw) -> torch.optim.Optimizer:
        """The optimiser over ``params``; ``model=`` is dropped where it is not accepted."""
        if "model" not in self.accepts:
            kw.pop("model", None)
        return self.cls(params, **self.fixed, **kw)


OPTIMIZER_REGISTRY: Registry[OptimizerEntry] = Registry("optimizer")
_SAM_OPTIONS = ("rho", "model")
_CSAM_OPTIONS = ("rho1", "rho2", "model")
OPTIMIZER_REGISTRY.register("sgd", OptimizerEntry(torch.optim.SGD))
OPTIMIZER_REGISTRY.register("sam", OptimizerEntry(SAM, radius="rho", accepts=_SAM_OPTIONS))
OPTIMIZER_REGISTRY.register("asam", OptimizerEntry(SAM, fixed={"adaptive": True}, radius="rho",
                                                   accepts=_SAM_OPTIONS))
OPTIMIZER_REGISTRY.register("cov", OptimizerEntry(COV, per_sample=True, radius="lam",
                                                  needs_model=True,
                                                  accepts=("lam", "n_total", "model")))
OPTIMIZER_REGISTRY.register("samgcm", OptimizerEntry(SAMGCM, per_sample=True, radius="rho",
                                                     needs_model=True,
                                                     accepts=("rho", "xi", "model")))
OPTIMIZER_REGISTRY.register("csam_identity", OptimizerEntry(CSAM_Identity, radius="rho",
                                                            accepts=_CSAM_OPTIONS))
OPTIMIZER_REGISTRY.register("csam", OptimizerEntry(CSAM, radius="rho", needs_model=True,
                                                   accepts=_CSAM_OPTIONS))
OPTIMIZER_REGISTRY.register("acsam_identity", OptimizerEntry(ACSAM_Identity, radius="rho",
                                                             accepts=_CSAM_OPTIONS))

#: every optimiser name, in registration order
OPTIMIZERS = OPTIMIZER_REGISTRY.names()
#: optimisers whose closure returns per-sample losses (shape (b,)) instead of calling backward
PER_SAMPLE_CLOSURE = tuple(n for n, e in OPTIMIZER_REGISTRY.items() if e.per_sample)


def make_optimizer(name: str, params, **kw) -> torch.optim.Optimizer:
    """Optimiser ``name`` (one of OPTIMIZERS) over ``params``; ``kw`` go to its constructor.

    Every name accepts ``model=`` (ignored by those that do not take it); COV and SAMGCM
    need it for their fast per-sample gradients (or ``per_sample="autograd"``).
    """
    return OPTIMIZER_REGISTRY.get(name).build(params, **kw)
