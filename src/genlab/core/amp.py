"""Mixed precision for training loops: autocast, and a GradScaler where float16 needs one.

Precisions (``--amp``): ``off`` (float32), ``bf16`` (bfloat16 autocast: float32's range,
no loss scaling needed) and ``fp16`` (float16 autocast with a GradScaler: the loss is
scaled before backward so small gradients do not underflow; a step whose gradients
overflow is skipped and the scale lowered). Autocast covers the forward pass and the
loss only; backward and the optimiser step run outside it, as torch recommends.

The scaler unscales the gradients and steps the optimiser without a closure
(``scaler.step(opt)``), so ``fp16`` applies to optimisers whose ``step()`` makes a whole
update without one; an optimiser that declares ``requires_closure = True`` is refused
with a clear error (run it with ``bf16``). Two-pass optimisers' own recipe is in
docs/optimizers.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from genlab.core.errors import ConfigError, require_choice

PRECISIONS: dict[str, torch.dtype | None] = {
    "off": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


@dataclass
class Precision:
    """One training precision on one device type: its autocast and (fp16) its scaler."""

    mode: str
    device_type: str
    dtype: torch.dtype | None
    scaler: torch.amp.GradScaler | None

    @property
    def enabled(self) -> bool:
        return self.dtype is not None

    def autocast(self):
        """The autocast context of this precision (a no-op for ``off``)."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, on the scaled loss when a scaler is in use."""
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, closure: Callable):
        """``optimizer.step(closure)``; with a scaler: closure, unscale, (skipped) step, update."""
        if self.scaler is None:
            return optimizer.step(closure)
        if getattr(optimizer, "requires_closure", False):
            raise ConfigError(f"--amp fp16 cannot drive {type(optimizer).__name__}, whose step "
                              "needs a closure; use --amp bf16")
        loss = closure()
        self.scaler.step(optimizer)
        self.scaler.update()
        return loss

    def state_dict(self) -> dict:
        return self.scaler.state_dict() if self.scaler is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)


def channels_last_input(x: torch.Tensor, enabled: bool) -> torch.Tensor:
    """``x`` in NHWC layout when ``enabled`` and 4-D, else ``x`` (same values either way)."""
    if enabled and x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    return x


def make_precision(mode: str | None, device: str | torch.device = "cpu") -> Precision:
    """The Precision of ``mode`` (None is ``off``) on ``device``."""
    mode = "off" if mode in (None, "", "none", "fp32") else mode
    require_choice("amp", mode, tuple(PRECISIONS))
    device_type = torch.device(device).type
    dtype = PRECISIONS[mode]
    if dtype is torch.bfloat16 and device_type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("--amp bf16: this GPU has no bfloat16 support; use --amp fp16")
    scaler = torch.amp.GradScaler(device_type) if dtype is torch.float16 else None
    return Precision(mode, device_type, dtype, scaler)
