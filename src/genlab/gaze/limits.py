"""Upper limits of the sizes and counts ``gaze train`` accepts, checked before a run starts.

A budget that would run for years, or images and widths that would not fit in memory, are
refused up front with the limit in the message (ConfigError), before anything is rendered.
"""

from __future__ import annotations

from genlab.core.errors import require_at_most

LIMITS = {
    "steps": 10**7,  # optimiser steps (the paper's protocol uses 2 x 10^4)
    "eval_every": 10**7,
    "batch_size": 65_536,
    "eval_batch_size": 65_536,
    "width": 1_024,  # backbone base width (ResNet-18: 64)
    "experts": 256,
    "train_count": 10**6,  # synthetic images rendered into memory
    "test_count": 10**6,
}
MAX_SIDE = 2_048  # pixels of an input side


def check_limits(cfg) -> None:
    """ConfigError for the first field of ``cfg`` above its limit."""
    for name, limit in LIMITS.items():
        require_at_most(name, getattr(cfg, name), limit)
    require_at_most("size", max(cfg.size), MAX_SIDE)
