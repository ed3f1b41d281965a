"""Devices: the CLI's --device string to a torch.device, and where a model lives.

Under torchrun each process takes the GPU of its local rank (``cuda`` becomes
``cuda:LOCAL_RANK``), so one command line serves one process and many.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from genlab.core.errors import ConfigError


def resolve_device(name: str | torch.device) -> torch.device:
    """torch.device from a CLI string, with a clear error when CUDA is asked for but absent."""
    if isinstance(name, torch.device):
        name = str(name)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(name)
    except RuntimeError as exc:  # torch's message lists every device type it knows
        raise ConfigError(f"--device {name!r} is not a device; use cpu, cuda, cuda:N or "
                          "auto") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda was given but no CUDA device is available")
        if dev.index is None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            local = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
            dev = torch.device("cuda", local)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"--device {name}: only {torch.cuda.device_count()} CUDA "
                              "device(s) are visible")
    return dev


def module_device(module: nn.Module, default: str | torch.device = "cpu") -> torch.device:
    """The device of ``module``'s first parameter or buffer (``default`` when it has none)."""
    for p in module.parameters():
        return p.device
    for b in module.buffers():
        return b.device
    return torch.device(default)
