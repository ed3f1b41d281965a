"""The detection protocol's optimisation on genlab's one Trainer.

mmdetection's RetinaNet 1x schedule (configs/_base_/schedules/schedule_1x.py and
configs/retinanet/retinanet_r50_fpn_1x_coco.py): SGD lr 0.01 at batch 16 (scaled linearly
with the batch), momentum 0.9, weight decay 1e-4, gradient-norm clip 35, 12 epochs with the
lr divided by 10 after epochs 8 and 11, and a 500-iteration linear warm-up from 0.001 x lr.
The schedule moves per iteration (``IterationSchedule``), which the Trainer's per-epoch
``scheduler.step()`` does not do: the Trainer subclass advances it in its ``step``, and the
Trainer's own call at the end of each of its epochs (our checkpoint segments) is a no-op;
the schedule's iteration count travels in the checkpoint as the scheduler's state.
"""

from __future__ import annotations

from collections.abc import Sequence

from genlab.core.trainer import Trainer


def protocol_lr(iteration: int, *, lr: float, steps_per_epoch: int, milestones: Sequence[int],
                warmup: int, warmup_ratio: float, gamma: float = 0.1) -> float:
    """The learning rate of ``iteration`` (0-based) under the module docstring's schedule."""
    rate = lr * gamma ** sum(iteration >= m * steps_per_epoch for m in milestones)
    if iteration < warmup:
        rate *= warmup_ratio + (1 - warmup_ratio) * iteration / warmup
    return rate


class IterationSchedule:
    """Sets the optimiser's lr per iteration (``advance``); ``step()`` is the Trainer's
    end-of-epoch call and does nothing (module docstring)."""

    def __init__(self, optimizer, **schedule):
        self.optimizer, self.schedule, self.iteration = optimizer, schedule, 0

    def advance(self) -> None:
        rate = protocol_lr(self.iteration, **self.schedule)
        for group in self.optimizer.param_groups:
            group["lr"] = rate
        self.iteration += 1

    def step(self) -> None:
        pass

    def state_dict(self) -> dict:
        return {"iteration": self.iteration}

    def load_state_dict(self, state: dict) -> None:
        self.iteration = int(state["iteration"])


class DetectionTrainer(Trainer):
    """The Trainer with a detector whose forward takes (images, targets) and returns its
    loss: one iteration of the schedule per step."""

    def step(self, x, y) -> float:
        self.scheduler.advance()

        def closure():
            self.optimizer.zero_grad(set_to_none=True)
            with self.autocast():
                loss = self.model(x, y)
            self.backward(loss)
            return loss

        loss = self.precision.step(self.optimizer, closure)
        return float(loss.detach())
