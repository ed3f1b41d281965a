"""Nonuniformity and sharpness: SAM-family optimisers (this file's registry), measures, studies.

``make_optimizer(name, params, **kw)`` builds any optimiser by name; names are
listed in ``OPTIMIZERS``. Each takes the keyword arguments of its class (e.g.
``lr``, ``momentum`` for the base SGD, ``rho``); every name accepts ``model=``
(BatchNorm/DDP care, K-FAC hooks), ignored by those that do not need it.
"""

from __future__ import annotations

import torch

from genlab.core.errors import require_choice
from genlab.optim.csam import CSAM, ACSAM_Identity, CSAM_Identity
from genlab.optim.nonuniform import COV, SAMGCM, per_sample_closure
from genlab.optim.perturb import bn_update_disabled, disable_sync
from genlab.optim.sam import SAM

ASAM = SAM  # ASAM is SAM(..., adaptive=True); make_optimizer("asam", ...) sets the flag.

_BUILDERS = {
    "sgd": lambda params, model=None, **kw: torch.optim.SGD(params, **kw),
    "sam": lambda params, **kw: SAM(params, **kw),
    "asam": lambda params, **kw: SAM(params, adaptive=True, **kw),
    "cov": lambda params, **kw: COV(params, **kw),
    "samgcm": lambda params, **kw: SAMGCM(params, **kw),
    "csam_identity": lambda params, **kw: CSAM_Identity(params, **kw),
    "csam": lambda params, **kw: CSAM(params, **kw),
    "acsam_identity": lambda params, **kw: ACSAM_Identity(params, **kw),
}
OPTIMIZERS = tuple(_BUILDERS)
#: optimisers whose closure returns per-sample losses (shape (b,)) instead of calling backward
PER_SAMPLE_CLOSURE = ("cov", "samgcm")


def make_optimizer(name: str, params, **kw) -> torch.optim.Optimizer:
    """Optimiser ``name`` (one of OPTIMIZERS) over ``params``; ``kw`` go to its constructor."""
    require_choice("optimizer", name, OPTIMIZERS)
    return _BUILDERS[name](params, **kw)


__all__ = ["ACSAM_Identity", "ASAM", "COV", "CSAM", "CSAM_Identity", "OPTIMIZERS",
           "PER_SAMPLE_CLOSURE", "SAM", "SAMGCM", "bn_update_disabled", "disable_sync",
           "make_optimizer", "per_sample_closure"]
