"""One supervised training loop shared by every method: closure-based steps, checkpoints.

Each step calls ``optimizer.step(closure)`` so two-pass (sharpness-aware) optimisers that need
several forward-backward passes work unchanged. After every epoch the model,
optimiser, scheduler, loss-scaler and RNG states go to an atomic checkpoint; a killed
run resumed from its folder ends exactly like an uninterrupted one (batches are drawn
from per-epoch seeded streams). A non-finite loss stops training with
DivergedError and leaves the last good checkpoint in place.

Under torchrun the same loop is data-parallel (genlab.core.parallel.distributed): every rank
draws the same global batch, augments it with the same per-step generator, keeps its
share, and the gradients are all-reduced weighted by the shares; BatchNorm layers
normalise over the global batch (genlab.core.parallel.data_parallel). P processes at a
global batch B therefore train the model one process trains at B, up to float
rounding. The logged training loss is the global batch's.

Streamed data (image folders read by DataLoader workers): ``sharded_batches=True`` says that
the batches are already this rank's share of the global batch (each rank decodes only its
own images), so they are not split again; the shares' weights come from the all-reduced
batch sizes. ``fit(checkpoint_steps=N)`` also checkpoints every N steps inside an epoch; a
run resumed from such a checkpoint continues the epoch at the next step, drawing its batches
from ``train_batches(epoch, step)`` (a source that skips the consumed batches), and ends as
the uninterrupted run. ``fit(max_steps=N)`` stops after N optimiser steps in all (the last
epoch is cut short, then scored and checkpointed as any other). ``fit(until=f)`` stops after
the first epoch whose record (after ``on_epoch``'s figures) makes ``f(record)`` true; ``epochs``
is then the cap. The checkpoint of that epoch says so (``stopped``), so a run resumed after
it trains no further epoch; ``TrainResult.epochs`` counts the epochs trained over every
segment and ``TrainResult.stopped`` says whether ``until`` ended the run.

Options for accelerators: ``amp`` ("bf16" | "fp16", see genlab.core.amp) and
``channels_last`` (NHWC memory layout of the model and of 4-D inputs, which cuDNN
convolutions prefer under mixed precision).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

from genlab.core.amp import make_precision
from genlab.core.devices import resolve_device
from genlab.core.errors import DivergedError, require_positive
from genlab.core.parallel.data_parallel import GradientSync, convert_batchnorm
from genlab.core.parallel.distributed import (
    broadcast_module,
    global_sum,
    init_distributed,
    is_distributed,
    shard_batch,
    shard_slice,
)
from genlab.core.progress import progress
from genlab.core.runs import CHECKPOINT, RunDir
from genlab.core.seeding import capture_rng_state, make_generator, restore_rng_state
from genlab.core.storage.checkpoints import MODEL_RECORD

__all__ = ["BatchSource", "TrainResult", "Trainer", "accuracy", "evaluate", "resolve_device"]

# epoch -> iterable of (inputs, targets); with checkpoint_steps, also called as (epoch, step):
# the epoch's batches from that step on
BatchSource = Callable[..., Iterable]


@dataclass
class TrainResult:
    """A fit's records; ``seconds`` is the training time over every segment of the run (a
    resumed run adds the segments before it, as far as their last checkpoint), ``segments``
    the seconds of each."""

    history: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    processes: int = 1
    segments: list[float] = field(default_factory=list)
    epochs: int = 0
    stopped: bool = False


@torch.no_grad()
def cosine_lr(step: int, total: int, lr_max: float, lr_min: float = 0.0) -> float:
    """Cosine annealing from ``lr_max`` at step 0 to ``lr_min`` at ``total`` (Loshchilov &
    Hutter 2017, without restarts): lr_min + (lr_max - lr_min)(1 + cos(pi step / total)) / 2.
    The one cosine of genlab: the search's weight steps, the ImageNet recipes' epochs, the
    gaze training's steps."""
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * step / total))


def evaluate(model: nn.Module, batches: Iterable, loss_fn: Callable, device,
             metric: Callable | None = None, *, shard: bool = True) -> dict:
    """Mean loss (and mean ``metric(outputs, targets)`` if given) over batches, in eval mode.

    Under torchrun (``shard=True``) each rank scores its share of every batch and the
    sums are all-reduced: every rank must call it, and every rank gets the same result.
    """
    split = shard and is_distributed()
    was_training = model.training
    model.eval()
    total, n, metric_total = 0.0, 0, 0.0
    for x, y in batches:
        if split:
            rows = shard_slice(len(y))
            x, y = x[rows], y[rows]
            if len(y) == 0:
                continue
        x, y = x.to(device), y.to(device)
        with torch.no_grad():  # scores only: no graph kept, no tensor that needs grad read
            out = model(x)
            total += float(loss_fn(out, y)) * len(y)
            if metric is not None:
                metric_total += float(metric(out, y)) * len(y)
        n += len(y)
    model.train(was_training)
    if split:
        total, metric_total, n = global_sum([total, metric_total, n]).tolist()
    result = {"loss": total / max(n, 1)}
    if metric is not None:
        result["metric"] = metric_total / max(n, 1)
    return result


def accuracy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return (outputs.argmax(-1) == targets).float().mean()


def _kept_checkpoint(run: RunDir | None, epoch: int) -> str:
    """Where the last good state of a diverged run is, for its error line."""
    if run is None:
        return "no run folder was given, nothing was saved"
    if epoch == 0 or not run.file(CHECKPOINT).exists():
        return f"no checkpoint was written yet in {run.path}"
    return (f"the last good checkpoint (after epoch {epoch - 1}) is kept in "
            f"{run.file(CHECKPOINT)}")


class Trainer:
    """Fit ``model`` with ``optimizer`` on batches from ``train_batches(epoch)``.

    ``augment(x, generator)`` (optional) transforms each training batch with draws
    from a per-step generator; ``on_epoch(epoch, model) -> dict`` adds figures to the
    epoch's metrics record (e.g. validation accuracy).

    Subclasses override :meth:`step` (one optimisation step on this rank's share of the
    batch); inside their closures :meth:`autocast` and :meth:`backward` give them the
    chosen precision. ``global_batchnorm=False`` keeps per-rank BatchNorm statistics
    under torchrun (then P processes no longer train what one process trains).
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable, *,
                 device: str | torch.device = "cpu", scheduler=None, augment=None,
                 seed: int = 0, progress_bar: bool | None = None, name: str = "train",
                 amp: str | None = None, channels_last: bool = False,
                 global_batchnorm: bool = True, model_record: dict | None = None,
                 sharded_batches: bool = False):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.model_record = model_record  # what rebuilds the model (core.checkpoints)
        self._segments: list[float] = []  # seconds of earlier segments (from a checkpoint)
        self._t0 = time.perf_counter()
        self.device = torch.device(device)
        self.scheduler, self.augment, self.seed = scheduler, augment, seed
        self.progress_bar, self.name = progress_bar, name
        self.precision = make_precision(amp, self.device)
        self.channels_last, self.global_batchnorm = channels_last, global_batchnorm
        self.sync: GradientSync | None = None  # set while fit runs under torchrun
        self.sharded_batches = sharded_batches
        self.global_step = 0  # optimiser steps over the whole run (resumes included)
        self._position: dict | None = None  # where a mid-epoch checkpoint stopped
        self.stopped = False  # fit's ``until`` held after the last epoch trained

    # -- checkpoints ---------------------------------------------------------------
    def state(self, epoch: int, position: dict | None = None) -> dict:
        """The checkpoint after ``epoch`` (the last finished one); ``position``: inside the
        next epoch, its step and loss sums (a mid-epoch checkpoint)."""
        extra = {MODEL_RECORD: self.model_record} if self.model_record is not None else {}
        if position is not None:
            extra["position"] = position
        return {
            **extra,
            "segments": [*self._segments, time.perf_counter() - self._t0],
            "epoch": epoch,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else {},
            "amp": self.precision.state_dict(),
            "rng": capture_rng_state(),
            "global_step": self.global_step,
            "stopped": self.stopped,
        }

    def load_state(self, state: dict) -> int:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler"):
            self.scheduler.load_state_dict(state["scheduler"])
        self.precision.load_state_dict(state.get("amp", {}))
        restore_rng_state(state["rng"])
        self._segments = [float(x) for x in state.get("segments", [])]
        self.global_step = int(state.get("global_step", 0))
        self._position = state.get("position")
        self.stopped = bool(state.get("stopped", False))
        return int(state["epoch"]) + 1

    # -- one step --------------------------------------------------------------------
    def autocast(self):
        """The forward-pass context of the chosen precision (a no-op in float32)."""
        return self.precision.autocast()

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, scaled when fp16 needs it."""
        self.precision.backward(loss)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """One optimisation step through ``optimizer.step(closure)``; returns the loss."""

        def closure():
            self.optimizer.zero_grad(set_to_none=True)
            with self.autocast():
                loss = self.loss_fn(self.model(x), y)
            self.backward(loss)
            return loss

        loss = self.precision.step(self.optimizer, closure)
        return float(loss.detach())

    def _inputs(self, x: torch.Tensor, y: torch.Tensor, epoch: int, step: int):
        """This rank's share of the global batch (augmented first), on the device; its weight."""
        if self.augment is not None:
            x = self.augment(x.to(self.device), make_generator(self.seed, epoch, step))
        if self.sharded_batches:  # this rank's share already: its weight from the sizes
            share = len(y) / max(float(global_sum([len(y)])[0]), 1.0)
        else:
            (x, y), share = shard_batch((x, y))
        x, y = x.to(self.device), y.to(self.device)
        if self.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        return x, y, share

    @contextlib.contextmanager
    def _data_parallel(self):
        """Under torchrun: gradient all-reduce, global BatchNorm, rank 0's weights everywhere."""
        if not is_distributed():
            yield
            return
        self.sync = GradientSync(self.model.parameters())
        undo = convert_batchnorm(self.model, self.sync) if self.global_batchnorm else None
        broadcast_module(self.model)
        # model.no_sync(), as on a DDP model: a two-pass optimiser's first pass keeps it local
        had_no_sync = "no_sync" in vars(self.model)
        if not had_no_sync:
            setattr(self.model, "no_sync", self.sync.no_sync)  # noqa: B010 - a module attribute
        try:
            yield
        finally:
            if not had_no_sync:
                del self.model.no_sync
            if undo is not None:
                undo()
            self.sync.close()
            self.sync = None

    # -- the loop --------------------------------------------------------------------
    def fit(self, train_batches: BatchSource, epochs: int, *, run: RunDir | None = None,
            on_epoch: Callable[[int, nn.Module], dict] | None = None,
            steps_per_epoch: int | None = None, checkpoint_steps: int | None = None,
            max_steps: int | None = None,
            until: Callable[[dict], bool] | None = None) -> TrainResult:
        require_positive("epochs", epochs)
        for name, value in (("checkpoint-steps", checkpoint_steps), ("max-steps", max_steps)):
            if value is not None:
                require_positive(name, value)
        info = init_distributed()
        start = 0
        if run is not None and run.resumed_state is not None:
            start = self.load_state(run.resumed_state)
        result = TrainResult(processes=info.world_size)
        self._t0 = time.perf_counter()
        self.model.to(self.device).train()
        if self.channels_last:
            self.model.to(memory_format=torch.channels_last)
        with self._data_parallel(), progress(epochs, self.name, self.progress_bar,
                                              completed=start, unit="epoch") as tick:
            done = start
            for epoch in range(start, epochs):
                if self.stopped or (max_steps is not None and self.global_step >= max_steps):
                    break
                limits = (steps_per_epoch, checkpoint_steps, max_steps)
                record = self._epoch(train_batches, epoch, limits, run)
                if on_epoch is not None:
                    record.update(on_epoch(epoch, self.model))
                    self.model.train()
                self.stopped = until is not None and bool(until(record))
                result.history.append(record)
                if run is not None:
                    run.log(record)
                    run.save(self.state(epoch))
                done = epoch + 1
                tick(1, loss=record["train_loss"])
        result.epochs, result.stopped = done, self.stopped
        result.segments = [*self._segments, time.perf_counter() - self._t0]
        result.seconds = sum(result.segments)
        return result

    def _epoch(self, train_batches: BatchSource, epoch: int, limits: tuple, run: RunDir | None
               ) -> dict:
        """Train one epoch (from a mid-epoch checkpoint's step when resumed there); returns
        its record (global-batch mean training loss, lr). ``limits``: (steps_per_epoch,
        checkpoint_steps, max_steps)."""
        steps_per_epoch, checkpoint_steps, max_steps = limits
        total, n, step = 0.0, 0, 0
        position, self._position = self._position, None
        if position is not None and int(position["epoch"]) == epoch:
            total, n, step = float(position["total"]), int(position["n"]), int(position["step"])
        for x_all, y_all in (train_batches(epoch, step) if step else train_batches(epoch)):
            x, y, share = self._inputs(x_all, y_all, epoch, step)
            if self.sync is not None:
                self.sync.share = share
            loss = self.step(x, y)
            loss_sum, count = global_sum([loss * len(y), len(y)]).tolist()
            if not math.isfinite(loss_sum):
                raise DivergedError(f"non-finite training loss at epoch {epoch}, step {step}; "
                                    + _kept_checkpoint(run, epoch))
            total, n, step = total + loss_sum, n + int(count), step + 1
            self.global_step += 1
            if (steps_per_epoch is not None and step >= steps_per_epoch) or (
                    max_steps is not None and self.global_step >= max_steps):
                break
            if checkpoint_steps is not None and run is not None and step % checkpoint_steps == 0:
                run.save(self.state(epoch - 1, {"epoch": epoch, "step": step, "total": total,
                                                "n": n}))
        if self.scheduler is not None:
            self.scheduler.step()
        return {"epoch": epoch, "train_loss": total / max(n, 1),
                "lr": self.optimizer.param_groups[0]["lr"]}
