"""Nonuniformity and sharpness: SAM-family optimisers, measures, training, studies.

``make_optimizer(name, params, **kw)`` builds any optimiser by name; names are
listed in ``OPTIMIZERS`` (the registry ``OPTIMIZER_REGISTRY`` holds each one's facts).
Each takes the keyword arguments of its class (e.g. ``lr``, ``momentum`` for the base
SGD, ``rho``); every name accepts ``model=`` (BatchNorm/DDP care, K-FAC hooks, the
per-layer per-sample gradients of COV and SAMGCM), ignored by those that do not need it.
"""

from __future__ import annotations

from genlab.optim.optimizers.cov import COV
from genlab.optim.optimizers.csam import CSAM, ACSAM_Identity, CSAM_Identity
from genlab.optim.optimizers.per_sample_source import per_sample_closure
from genlab.optim.optimizers.perturb import bn_update_disabled, disable_sync
from genlab.optim.optimizers.registry import (
    OPTIMIZER_REGISTRY,
    OPTIMIZERS,
    PER_SAMPLE_CLOSURE,
    OptimizerEntry,
    make_optimizer,
)
from genlab.optim.optimizers.sam import SAM
from genlab.optim.optimizers.samgcm import SAMGCM

ASAM = SAM  # ASAM is SAM(..., adaptive=True); make_optimizer("asam", ...) sets the flag.

__all__ = ["ACSAM_Identity", "ASAM", "COV", "CSAM", "CSAM_Identity", "OPTIMIZERS",
           "OPTIMIZER_REGISTRY", "OptimizerEntry", "PER_SAMPLE_CLOSURE", "SAM", "SAMGCM",
           "bn_update_disabled", "disable_sync", "make_optimizer", "per_sample_closure"]
