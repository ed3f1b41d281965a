"""Up-front checks of the NAS commands' options, run before a run folder is made.

- ``check_limits``: sizes and budgets above which a run would not fit in memory or would
  never end (``LIMITS``), refused with the limit in the message;
- ``check_input_size``: one forward pass of a single blank image through the built network;
  an input too small for its stem and reductions is refused with the smallest size that works;
- ``parse_genotype``: a space's genotype text, with a hint naming the space it belongs to when
  it is another space's genotype (another family's: the hint alone);
- ``check_run_kind``: a ``--out`` that is not a genlab run folder, or holds a run of another
  kind (a nas search folder given to nas train, an optim run...), is refused, naming that
  kind.
"""

from __future__ import annotations

from pathlib import Path

import torch

from genlab.core.errors import CheckpointError, ConfigError, RunExistsError, SpecError
from genlab.core.parallel.distributed import is_main_process
from genlab.core.runs import KIND_KEY, check_run_folder, other_run_message
from genlab.core.seeding import capture_rng_state, restore_rng_state
from genlab.core.storage import locks
from genlab.core.storage.checkpoints import CHECKPOINT, MODEL_RECORD, load_checkpoint

# option -> the largest value accepted (DARTS upstream: 20 cells, C=36, 600 epochs; a
# CIFAR-10 search of 50 epochs is about 20,000 steps)
LIMITS = {"size": 1024, "channels": 1024, "cells": 100, "steps": 10**6, "epochs": 10**4,
          "batch_size": 65536}


def check_limits(**values) -> None:
    """ConfigError for the first option (``LIMITS`` key) whose value is above its limit."""
    for name, value in values.items():
        if value is not None and value > LIMITS[name]:
            flag = name.replace("_", "-")
            raise ConfigError(f"--{flag} {value:,} is above the limit of {LIMITS[name]:,}; "
                              f"pass --{flag} {LIMITS[name]} or less")


def _runs(net: torch.nn.Module, in_channels: int, size: int, device) -> bool:
    try:
        net(torch.zeros(1, in_channels, size, size, device=device))
    except RuntimeError:
        return False
    return True


def check_input_size(net: torch.nn.Module, in_channels: int, size: int, what: str,
                     channels: int | None = None, cells: int | None = None) -> None:
    """ConfigError unless ``net`` takes a ``size`` x ``size`` input, naming the smallest size
    (up to LIMITS["size"]; found by doubling, then bisection) that it takes. The network's
    mode, its gradients and every random state are left as they were (the probe runs in eval
    mode; its graph is dropped without a backward pass)."""
    what += f" (C={channels}" + ("" if cells is None else f", N={cells}") + ")"
    device = next(net.parameters()).device
    training, rng = net.training, capture_rng_state()
    net.eval()
    try:
        # with gradients, as a training pass: forward hooks that watch the diagnostic
        # (no-grad) passes, as genlab.nas.studies.entropy_peak's, do not see the probe
        with torch.enable_grad():
            if _runs(net, in_channels, size, device):
                return
            bad, good = size, None
            while good is None and bad < LIMITS["size"]:
                trial = min(2 * bad, LIMITS["size"])
                if _runs(net, in_channels, trial, device):
                    good = trial
                else:
                    bad = trial
            while good is not None and good - bad > 1:
                mid = (bad + good) // 2
                bad, good = (bad, mid) if _runs(net, in_channels, mid, device) else (mid, good)
    finally:
        net.train(training)
        restore_rng_state(rng)
    if good is None:
        raise ConfigError(f"--size {size} is too small for {what}, and so is every size up to "
                          f"{LIMITS['size']}; use fewer cells")
    raise ConfigError(f"--size {size} is too small for {what}: the smallest input it takes is "
                      f"{good}x{good}; pass --size {good} or more")


def parse_genotype(space, text: str):
    """``space.parse(text)``; when that fails but another space parses ``text``, its SpecError
    goes on to say which space it looks like and to pass ``--space`` with it."""
    from genlab.nas.spaces import get_space, space_names

    try:
        return space.parse(text)
    except SpecError as exc:
        others = []
        for name in space_names():
            if name == space.name:
                continue
            try:
                get_space(name).parse(text)
            except SpecError:
                continue
            others.append(name)
        if not others:
            raise
        also = f" (it also parses in {', '.join(others[1:])})" if others[1:] else ""
        looks = f"it looks like a {others[0]} genotype{also}"
        if type(get_space(others[0])).parse is type(space).parse:
            # a space of the same family: what this space lacks is the point
            raise SpecError(f"{exc}; {looks}, not a {space.name} one: pass --space "
                            f"{others[0]}") from exc
        # another family's text: this space's parse error (e.g. nb201's "1 node(s)
        # separated by '+'" for a DARTS genotype) would only mislead
        raise SpecError(f"the architecture is not a {space.name} genotype: {looks}; pass "
                        f"--space {others[0]}") from exc


# run kind -> config.json keys that every run of that kind has (and the others lack)
RUN_KEYS = {"nas search": ("reg_resolved", "order", "hessian_points"),
            "nas train": ("arch", "eval_on", "epochs"),
            "nas bench": ("regs", "seeds", "search", "retrain_epochs"),
            "nas bench job": ("reg", "seed", "bench", "folder")}


def run_kind(folder: Path, config: dict) -> str | None:
    """The kind of the run in ``folder`` (config.json ``config``): its recorded command, its
    config's keys, else the model record of its checkpoint; None when none tells."""
    if isinstance(config.get(KIND_KEY), str):
        return config[KIND_KEY]
    for kind, keys in RUN_KEYS.items():
        if all(k in config for k in keys):
            return kind
    try:
        state = load_checkpoint(folder / CHECKPOINT)
    except (CheckpointError, OSError, RuntimeError, ValueError):
        return None
    record = state.get(MODEL_RECORD) if isinstance(state, dict) else None
    return str(record["kind"]) if isinstance(record, dict) and "kind" in record else None


def check_run_kind(out, kind: str) -> None:
    """The folder rules of genlab.core.runs.check_run_folder for a ``kind`` run (a folder that
    is not a genlab run: ConfigError), and RunExistsError when ``out`` holds a run of another
    kind, named from its recorded command, its config's keys or its checkpoint ("X is a nas
    search run; nas train needs its own --out"); a folder without config.json passes."""
    folder = Path(out)
    if is_main_process():  # under torchrun rank 0 holds the lock for the group
        locks.check_free(folder)  # a folder another command is writing is named as that first
    config = check_run_folder(folder, kind)
    if config is None or all(k in config for k in RUN_KEYS[kind]):
        return
    other = run_kind(folder, config)
    if other is None:
        missing = [k for k in RUN_KEYS[kind] if k not in config]
        raise RunExistsError(f"{folder} holds a genlab run that is not a {kind} run (its "
                             f"config.json lacks {', '.join(missing)}); {kind} needs its own "
                             "--out")
    raise RunExistsError(other_run_message(folder, other, kind))
