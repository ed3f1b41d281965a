"""One seed for python, numpy and torch, capture/restore of their RNG states, a fixed thread count.

RNG states are stored as plain tensors and lists so checkpoints load with
``torch.load(weights_only=True)``.

A seed alone does not fix a run on CPU: parallel kernels split their sums over the
intra-op threads, so the rounding (the last bits) depends on the thread count, and a
chaotic computation such as an architecture search amplifies those bits into a
different result. Runs therefore fix the thread count too (``fixed_threads``) and
record it in config.json.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from genlab.core.errors import require_positive_ints


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


@contextmanager
def fixed_threads(threads: int) -> Iterator[None]:
    """Run the body with torch's intra-op thread count set to ``threads``; restore it after.

    Inter-op threads are left alone: eager CPU kernels do not use them, and torch refuses to
    change their number once any parallel work has run.
    """
    require_positive_ints(threads=threads)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
