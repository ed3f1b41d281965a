"""Shared machinery of the perturb-then-step optimisers (SAM, ASAM, SAMGCM, CSAM family).

Every such optimiser wraps a *base* optimiser (SGD by default) that makes the
actual update. The wrapper and the base share the same ``param_groups`` dicts, so
an LR scheduler attached to the wrapper changes the base optimiser's lr too.

The helpers here fix what users of public SAM code run into:

- ``bn_update_disabled(model)``: the extra (perturbed) forward passes must not
  update BatchNorm running statistics; inside the context every BatchNorm layer
  normalises with the batch statistics but leaves its buffers alone.
- ``disable_sync(model)``: under DistributedDataParallel the first (perturbation)
  pass needs no gradient all-reduce; this is ``model.no_sync()`` for a DDP model
  and a no-op otherwise.
- ``max_grad_norm``: clipping is applied to the gradient that makes the update
  (the one at the perturbed point), after the weights are restored.
- the perturbation is undone by copying back the saved weights (exact), into
  buffers allocated once and reused every step.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

import torch
import torch.optim.optimizer as _optim_module
from torch import nn

from genlab.core.errors import ConfigError, require_positive

_NORM_GUARD = 1e-12
# constructor arguments that are not a user's settings
_NOT_SETTINGS = ("self", "params", "base_optimizer", "extra_defaults", "own_defaults",
                 "base_kwargs")


def batchnorm_layers(model: nn.Module | None) -> list[nn.Module]:
    """The BatchNorm layers of ``model`` (empty for None)."""
    if model is None:
        return []
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


@contextlib.contextmanager
def _frozen_stats(layers: list[nn.Module]) -> Iterator[None]:
    saved = [m for m in layers if m.track_running_stats]
    for module in saved:
        module.track_running_stats = False
    try:
        yield
    finally:
        for module in saved:
            module.track_running_stats = True


def bn_update_disabled(model: nn.Module | None):
    """Inside the block BatchNorm layers of ``model`` use batch statistics without updating them."""
    return _frozen_stats(batchnorm_layers(model))


def disable_sync(model: nn.Module | None):
    """``model.no_sync()`` for a DistributedDataParallel model, a no-op context otherwise."""
    no_sync = getattr(model, "no_sync", None)
    if model is None or no_sync is None:
        return contextlib.nullcontext()
    return no_sync()


def settings_of(*callables) -> dict:
    """name -> default of the keyword settings the constructors ``callables`` take (those
    without a default map to ``REQUIRED``); ``params``, ``self`` and ``**kwargs`` are left
    out."""
    import inspect

    out: dict = {}
    for fn in callables:
        for name, p in inspect.signature(fn).parameters.items():
            if name in _NOT_SETTINGS or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            out.setdefault(name, REQUIRED if p.default is p.empty else p.default)
    return out


class _Required:
    def __repr__(self) -> str:
        return "required"


REQUIRED = _Required()  # the default of a setting that must be given


def refuse_settings(what: str, given, accepted: dict) -> None:
    """ConfigError naming the first of ``given`` (setting names) that ``accepted`` (name ->
    default, settings_of) lacks, the closest accepted name and its default, and every
    accepted setting with its default."""
    import difflib

    unknown = [k for k in given if k not in accepted]
    if not unknown:
        return
    close = difflib.get_close_matches(unknown[0], list(accepted), 1)
    hint = f" (did you mean {close[0]}, default {accepted[close[0]]!r}?)" if close else ""
    listed = ", ".join(f"{k}={v!r}" for k, v in accepted.items())
    raise ConfigError(f"{what}: unknown setting {unknown[0]!r}{hint}; its settings and "
                      f"defaults: {listed}")


def require_setting(what: str, name: str, value, default, meaning: str) -> None:
    """ConfigError when the setting ``name`` was not given (``value`` REQUIRED or None),
    naming it, what it is and the default genlab's commands use."""
    if value is REQUIRED or value is None:
        raise ConfigError(f"{what}: missing setting {name!r}, {meaning} (genlab optim train's "
                          f"default: {default!r}); pass {name}={default!r}")


def detached(loss):
    """The loss a ``step(closure)`` returns: a tensor detached from the graph (``float(loss)``
    and logging need no graph), anything else as it is."""
    return loss.detach() if isinstance(loss, torch.Tensor) else loss


def check_lr(kwargs: dict) -> None:
    """ConfigError when the base optimiser's ``lr`` is negative."""
    if "lr" in kwargs and not isinstance(kwargs["lr"], torch.Tensor):
        require_positive("lr", kwargs["lr"], allow_zero=True)


def params_with_grad(param_groups: list[dict]) -> list[torch.Tensor]:
    """All parameters that currently hold a gradient (parameters without one are skipped)."""
    return [p for group in param_groups for p in group["params"] if p.grad is not None]


def global_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Euclidean norm of the concatenation of ``tensors`` (0 for an empty list)."""
    if not tensors:
        return torch.zeros(())
    norms = torch._foreach_norm(tensors)
    return torch.linalg.vector_norm(torch.stack(norms))


def finite_scale(numerator: float, norm: torch.Tensor | float) -> float:
    """``numerator / (norm + 1e-12)``; 0 when ``norm`` is not finite (e.g. AMP overflow)."""
    value = float(norm)
    if not math.isfinite(value):
        return 0.0
    return numerator / (value + _NORM_GUARD)


class PerturbedOptimizer(torch.optim.Optimizer):
    """Base of optimisers that evaluate the gradient at ``w + e`` and update ``w`` with it.

    Subclasses compute the perturbation; this class owns the base optimiser, the
    weight backup, the restore, the clipping and checkpointing of both states.

    ``requires_closure``: a whole step needs the closure (two passes), so a loop that
    steps without one (the fp16 GradScaler's ``scaler.step``) refuses it explicitly.
    """

    requires_closure = True

    def __init__(self, params, base_optimizer: Callable | None, own_defaults: dict,
                 base_kwargs: dict, *, model: nn.Module | None = None,
                 max_grad_norm: float | None = None):
        check_lr(base_kwargs)
        if max_grad_norm is not None:
            require_positive("max_grad_norm", max_grad_norm)
        base_optimizer = torch.optim.SGD if base_optimizer is None else base_optimizer
        own = [c.__init__ for c in type(self).__mro__
               if "__init__" in vars(c) and issubclass(c, PerturbedOptimizer)
               and c is not PerturbedOptimizer]
        refuse_settings(type(self).__name__, base_kwargs,
                        {**settings_of(*own), **settings_of(base_optimizer)})
        super().__init__(params, dict(**own_defaults, **base_kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **base_kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)
        self.model = model
        self._batchnorms = batchnorm_layers(model)
        self.max_grad_norm = max_grad_norm
        self._backup: dict[torch.Tensor, torch.Tensor] = {}
        self._perturbed: list[torch.Tensor] = []

    # -- perturbation and restore -------------------------------------------------
    def _save(self, params: list[torch.Tensor]) -> list[torch.Tensor]:
        """Copy ``params`` into reusable backup buffers (callers hold no_grad)."""
        buffers = []
        for p in params:
            buf = self._backup.get(p)
            if buf is None or buf.shape != p.shape or buf.dtype != p.dtype:
                buf = torch.empty_like(p, memory_format=torch.preserve_format)
                self._backup[p] = buf
            buffers.append(buf)
        if params:
            torch._foreach_copy_(buffers, params)
        self._perturbed = list(params)
        return buffers

    @torch.no_grad()
    def restore(self) -> None:
        """Put the unperturbed weights back (idempotent; a no-op when nothing is perturbed)."""
        if self._perturbed:
            torch._foreach_copy_(self._perturbed, [self._backup[p] for p in self._perturbed])
        self._perturbed = []

    def _perturb(self, params: list[torch.Tensor], eps: list[torch.Tensor]) -> None:
        """Save ``params`` and move them to ``params + eps`` (callers hold no_grad)."""
        self._save(params)
        if params:
            torch._foreach_add_(params, eps)

    @torch.no_grad()
    def second_step(self, zero_grad: bool = False) -> None:
        """Restore the weights, clip the (perturbed-point) gradient, let the base optimiser step."""
        self._second_step()
        if zero_grad:
            self._drop_grads()

    def _second_step(self) -> None:
        """second_step without its no_grad wrapper (callers hold no_grad)."""
        if self._perturbed:
            torch._foreach_copy_(self._perturbed, [self._backup[p] for p in self._perturbed])
            self._perturbed = []
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params_with_grad(self.param_groups), self.max_grad_norm)
        self._base_step()

    def _base_step(self) -> None:
        """The base optimiser's step, without torch's profiling wrapper when no hooks are set.

        The wrapper costs ~20 us per call on CPU, a visible share of a small model's
        step; with step hooks registered (globally or on the base) it is kept.
        """
        base = self.base_optimizer
        step = type(base).step
        raw = getattr(step, "__wrapped__", None) if getattr(step, "hooked", False) else None
        hooks = (base._optimizer_step_pre_hooks or base._optimizer_step_post_hooks
                 or _optim_module._global_optimizer_pre_hooks
                 or _optim_module._global_optimizer_post_hooks)
        if raw is None or hooks:
            base.step()
        else:
            raw(base)

    # -- checkpoints --------------------------------------------------------------
    def state_dict(self) -> dict:
        """The wrapper's own state (e.g. CSAM momentum, K-FAC factors) plus the base optimiser's."""
        sd = super().state_dict()
        sd["base_optimizer"] = self.base_optimizer.state_dict()
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        if "base_optimizer" not in state_dict:
            raise ConfigError("optimizer state_dict lacks 'base_optimizer': not saved by "
                              f"{type(self).__name__}")
        base = state_dict.pop("base_optimizer")
        super().load_state_dict(state_dict)
        self.base_optimizer.load_state_dict(base)
        self.base_optimizer.param_groups = self.param_groups

    def _drop_grads(self) -> None:
        """Set every gradient to None (a lean ``zero_grad``: it runs up to three times a step)."""
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def _run_closure(self, closure: Callable, *, perturbed: bool, sync: bool = True):
        """Zero grads and run ``closure`` (BN frozen when perturbed, all-reduce only when sync)."""
        self._drop_grads()
        freeze = perturbed and self._batchnorms
        no_sync = not sync and hasattr(self.model, "no_sync")
        if not (freeze or no_sync):                  # the common case, kept lean
            with torch.enable_grad():
                return closure()
        sync_ctx = disable_sync(self.model) if no_sync else contextlib.nullcontext()
        bn_ctx = _frozen_stats(self._batchnorms) if freeze else contextlib.nullcontext()
        with torch.enable_grad(), sync_ctx, bn_ctx:
            return closure()
