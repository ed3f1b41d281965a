"""One supervised training loop shared by every method: closure-based steps, checkpoints.

Each step calls ``optimizer.step(closure)`` so SAM-style optimisers that need
several forward-backward passes work unchanged. After every epoch the model,
optimiser, scheduler and RNG states go to an atomic checkpoint; a killed run
resumed from its folder ends exactly like an uninterrupted one (batches are drawn
from per-epoch seeded streams). A non-finite loss stops training with
DivergedError and leaves the last good checkpoint in place.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

from genlab.core.errors import DivergedError, require_positive
from genlab.core.progress import progress
from genlab.core.runs import RunDir
from genlab.core.seeding import capture_rng_state, make_generator, restore_rng_state

BatchSource = Callable[[int], Iterable]  # epoch -> iterable of (inputs, targets)


@dataclass
class TrainResult:
    history: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def resolve_device(name: str) -> torch.device:
    """torch.device from a CLI string, with a clear error when CUDA is asked for but absent."""
    from genlab.core.errors import ConfigError

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"unknown device {name!r} ({exc})") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was given but no CUDA device is available")
    return dev


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable, loss_fn: Callable, device,
             metric: Callable | None = None) -> dict:
    """Mean loss (and mean ``metric(outputs, targets)`` if given) over batches, in eval mode."""
    was_training = model.training
    model.eval()
    total, n, metric_total = 0.0, 0, 0.0
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        out = model(x)
        total += float(loss_fn(out, y)) * len(y)
        if metric is not None:
            metric_total += float(metric(out, y)) * len(y)
        n += len(y)
    model.train(was_training)
    result = {"loss": total / max(n, 1)}
    if metric is not None:
        result["metric"] = metric_total / max(n, 1)
    return result


def accuracy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return (outputs.argmax(-1) == targets).float().mean()


class Trainer:
    """Fit ``model`` with ``optimizer`` on batches from ``train_batches(epoch)``.

    ``augment(x, generator)`` (optional) transforms each training batch with draws
    from a per-step generator; ``on_epoch(epoch, model) -> dict`` adds figures to the
    epoch's metrics record (e.g. validation accuracy).
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable, *,
                 device: str | torch.device = "cpu", scheduler=None, augment=None,
                 seed: int = 0, progress_bar: bool | None = None, name: str = "train"):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.device = torch.device(device)
        self.scheduler, self.augment, self.seed = scheduler, augment, seed
        self.progress_bar, self.name = progress_bar, name

    def state(self, epoch: int) -> dict:
        return {
            "epoch": epoch,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else {},
            "rng": capture_rng_state(),
        }

    def load_state(self, state: dict) -> int:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler"):
            self.scheduler.load_state_dict(state["scheduler"])
        restore_rng_state(state["rng"])
        return int(state["epoch"]) + 1

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """One optimisation step through ``optimizer.step(closure)``; returns the loss."""

        def closure():
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            return loss

        loss = self.optimizer.step(closure)
        return float(loss.detach())

    def fit(self, train_batches: BatchSource, epochs: int, *, run: RunDir | None = None,
            on_epoch: Callable[[int, nn.Module], dict] | None = None,
            steps_per_epoch: int | None = None) -> TrainResult:
        require_positive("epochs", epochs)
        start = 0
        if run is not None and run.resumed_state is not None:
            start = self.load_state(run.resumed_state)
        result = TrainResult()
        t0 = time.perf_counter()
        self.model.to(self.device).train()
        with progress(epochs, self.name, self.progress_bar, completed=start) as tick:
            for epoch in range(start, epochs):
                total, n, step = 0.0, 0, 0
                for x, y in train_batches(epoch):
                    x, y = x.to(self.device), y.to(self.device)
                    if self.augment is not None:
                        x = self.augment(x, make_generator(self.seed, epoch, step))
                    loss = self.step(x, y)
                    if not math.isfinite(loss):
                        raise DivergedError(
                            f"non-finite training loss at epoch {epoch}, step {step}; "
                            "the last good checkpoint is kept"
                            + (f" in {run.path}" if run is not None else "")
                        )
                    total, n, step = total + loss * len(y), n + len(y), step + 1
                    if steps_per_epoch is not None and step >= steps_per_epoch:
                        break
                if self.scheduler is not None:
                    self.scheduler.step()
                record = {"epoch": epoch, "train_loss": total / max(n, 1),
                          "lr": self.optimizer.param_groups[0]["lr"]}
                if on_epoch is not None:
                    record.update(on_epoch(epoch, self.model))
                    self.model.train()
                result.history.append(record)
                if run is not None:
                    run.log(record)
                    run.save(self.state(epoch))
                tick(1, loss=record["train_loss"])
        result.seconds = time.perf_counter() - t0
        return result
