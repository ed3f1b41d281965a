"""One seed for python, numpy and torch, capture/restore of their RNG states, a fixed thread count.

RNG states are stored as plain tensors and lists so checkpoints load with
``torch.load(weights_only=True)``. The CUDA generators (one per visible device) are
captured too when CUDA has been initialised, so an exact resume holds on GPUs as well.

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

from genlab.core.errors import ConfigError
from genlab.core.options import seed_list  # noqa: F401 - its home is the options module


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global generators (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds every CUDA device too


def _cuda_in_use() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def capture_rng_state() -> dict:
    """Return the global RNG states in a weights_only-loadable form."""
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    keys = np.asarray(keys)
    py_version, py_state, py_gauss = random.getstate()
    state = {
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
    if _cuda_in_use():
        state["cuda"] = [s.cpu() for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng_state(state: dict) -> None:
    """Restore what :func:`capture_rng_state` returned.

    CUDA states are restored for the devices present on both sides (a checkpoint written
    on a GPU machine still resumes on a CPU-only one, with CPU-exact streams only).
    """
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state(
        (n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"])
    )
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available():
        for index, s in enumerate(cuda[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(s, device=index)


def stream_seed(seed: int, *streams: int) -> int:
    """The 63-bit seed of one named stream (e.g. per epoch, per step) of ``seed``."""
    mixed = seed
    for s in streams:
        mixed = (mixed * 1_000_003 + s + 1) % (2**63 - 1)
    return mixed


def make_generator(seed: int, *streams: int, device: str | torch.device | None = None
                   ) -> torch.Generator:
    """A torch.Generator for one named stream of one seed (e.g. per epoch): no shared state.

    ``device`` places the generator where the tensors it samples live (a CUDA
    generator for ``torch.multinomial`` on CUDA probabilities, ...). The default, a
    CPU generator, draws the same numbers on every machine: sample on the CPU and
    move the result when results must not depend on the device.
    """
    g = torch.Generator(device=device) if device is not None else torch.Generator()
    g.manual_seed(stream_seed(seed, *streams))
    return g


def generator_for(tensor: torch.Tensor, seed: int, *streams: int) -> torch.Generator:
    """make_generator on the device of ``tensor`` (a model's parameter, a batch, ...)."""
    return make_generator(seed, *streams, device=tensor.device)


@contextmanager
def fixed_threads(threads: int) -> Iterator[None]:
    """Run the body with torch's intra-op thread count set to ``threads``; restore it after.

    ``threads=0`` leaves torch's default (the machine's cores) as it is.

    Inter-op threads are left alone: eager CPU kernels do not use them, and torch refuses to
    change their number once any parallel work has run.
    """
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ConfigError(f"threads must be an integer >= 0 (0: torch's default), got "
                          f"{threads!r}")
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


