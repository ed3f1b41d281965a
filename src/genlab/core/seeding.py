"""One seed for python, numpy and torch, and capture/restore of their RNG states.

RNG states are stored as plain tensors and lists so checkpoints load with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global generators from one integer."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def capture_rng_state() -> dict:
    """Return the global RNG states in a weights_only-loadable form."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    py_version, py_state, py_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "python": {"version": py_version, "state": list(py_state), "gauss": py_gauss},
    }


def restore_rng_state(state: dict) -> None:
    """Restore what :func:`capture_rng_state` returned."""
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state(
        (n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"])
    )
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))


def make_generator(seed: int, *streams: int) -> torch.Generator:
    """A torch.Generator for one named stream of one seed (e.g. per epoch): no shared state."""
    g = torch.Generator()
    mixed = seed
    for s in streams:
        mixed = (mixed * 1_000_003 + s + 1) % (2**63 - 1)
    g.manual_seed(mixed)
    return g
