"""Training of gaze models: L1 on (pitch, yaw), AdamW, warm-up and cosine decay per step.

A run has a budget in optimiser *steps* (the 10%-data runs take as many steps as the
full runs), a linear warm-up over ``warmup_steps`` and a cosine decay to zero at the
last step; the model after the last step is kept and evaluated (nothing is selected on
any data). Loss per step = L1(gaze, target) + ``balance_weight`` * L_bal +
``appearance_weight`` * L_app, where L_bal and L_app are MoEGaze's auxiliary losses
(our reconstruction, see genlab.gaze.models.routing); the baseline has only the L1 term.

``reinit_router_at`` (a fraction of the steps, 0 = never) calls the model's
``prepare`` hook again at the end of the chunk that reaches that step: MoEGaze then
re-fits its prototypes by k-means on the appearance embeddings learned so far.
``group_router_at`` likewise calls the model's ``regroup`` hook: MoEGaze then groups the
training subjects by the current model's residuals and trains its router to predict
each sample's group (genlab.gaze.models.residual_groups). ``grouping`` (``colour`` or
``crossfit``) instead fixes K appearance sub-datasets of the training subjects before the
first step (genlab.gaze.grouping): each training image then goes to its group's expert
and the router learns to name the group; inference routes softly.

Batches come from a seeded stream that depends only on (seed, step) (see
genlab.gaze.data.splits.step_batches): models trained with the same seed see the same
batches in the same order, which pairs a baseline and a MoEGaze run of one seed
(their shared parts also start equal, see genlab.gaze.models.gaze_model). Every ``eval_every``
steps a checkpoint is written and the held-out source subjects (at most
``curve_val_images`` of them, a seeded share) are evaluated for the curves;
``resume`` continues from the last checkpoint and ends like an uninterrupted run; on a
finished run it is a no-op that rewrites nothing and returns the stored summary (and the
model rebuilt from the final checkpoint).

Summary: errors on the held-out source subjects (``val_*``) and on every target
(``targets``; the first also as ``target_*``), per subject and per cluster, the router's
statistics, and the reference of the constant predictor that always answers the
source training mean (``constant_val_mean_deg``, ``constant_target_mean_deg``).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from genlab.core.errors import (
    CheckpointError,
    ConfigError,
    DataError,
)
from genlab.core.parallel.data_parallel import global_batch_statistics
from genlab.core.parallel.distributed import global_sum
from genlab.core.runs import SUMMARY, RunDir
from genlab.core.seeding import fixed_threads, seed_everything
from genlab.core.storage.checkpoints import (
    CHECKPOINT,
    MODEL_RECORD,
    build_from_record,
    load_checkpoint,
)
from genlab.core.trainer import Trainer, cosine_lr, resolve_device
from genlab.gaze.config import RUN_KIND, GazeTrainConfig, config_from_dict  # noqa: F401 (API)
from genlab.gaze.data.gazeset import GazeLabels
from genlab.gaze.data.splits import step_batches, take_share
from genlab.gaze.grouping import find_groups, fold_folder
from genlab.gaze.metrics import constant_summary, predict, summarise
from genlab.gaze.models.registry import build_gaze_model
from genlab.gaze.plots import save_run_plots
from genlab.gaze.protocol import TaskData, load_task_data


def warmup_cosine(steps: int, warmup: int):
    """LR multiplier at step s: linear warm-up over ``warmup`` steps, cosine to 0 at ``steps``."""
    def factor(s: int) -> float:
        return min(1.0, (s + 1) / max(warmup, 1)) * cosine_lr(s, steps, 1.0)
    return factor


def l1_gaze_loss(pred: torch.Tensor, labels: GazeLabels) -> torch.Tensor:
    """Mean absolute error on (pitch, yaw) radians."""
    return F.l1_loss(pred, labels.gaze)


class GazeTrainer(Trainer):
    """Trainer whose step adds the model's auxiliary losses and a per-step LR schedule."""

    def __init__(self, model, optimizer, *, schedule, loss_weights: dict[str, float], **kw):
        super().__init__(model, optimizer, l1_gaze_loss, **kw)
        self.schedule, self.loss_weights = schedule, dict(loss_weights)
        self.parts: dict[str, float] = {}
        self.part_count = 0

    def weight(self, name: str) -> float:
        if name == "gaze_l1":
            return 1.0
        if name not in self.loss_weights:
            raise ConfigError(f"the model returned a loss {name!r} that has no weight")
        return self.loss_weights[name]

    def step(self, x: torch.Tensor, labels: GazeLabels) -> float:
        # under torchrun the balance and appearance losses and the re-balancing step see the
        # global batch (genlab.gaze.models.routing); in one process this is the plain step
        with global_batch_statistics():
            return self._step(x, labels)

    def _step(self, x: torch.Tensor, labels: GazeLabels) -> float:
        box = {}

        def closure():
            self.optimizer.zero_grad(set_to_none=True)
            with self.autocast():
                out = self.model.outputs(x, labels)
                parts = {"gaze_l1": l1_gaze_loss(out.gaze.float(), labels), **out.losses}
                loss = sum(self.weight(k) * v.float() for k, v in parts.items())
            self.backward(loss)
            box.update(out=out, parts=parts)
            return loss

        loss = self.precision.step(self.optimizer, closure)
        self.schedule.step()
        self.model.after_step(box["out"])
        for name, value in box["parts"].items():
            self.parts[name] = self.parts.get(name, 0.0) + float(value.detach()) * len(x)
        self.part_count += len(x)
        return float(loss.detach())

    def pop_parts(self) -> dict:
        """Mean of each loss term since the last call, over the global batches (metrics)."""
        names = sorted(self.parts)
        *sums, count = global_sum([self.parts[k] for k in names] + [self.part_count]).tolist()
        out = {f"train_{k}": v / max(count, 1) for k, v in zip(names, sums, strict=True)}
        self.parts, self.part_count = {}, 0
        return out

    def state(self, epoch: int) -> dict:
        return {**super().state(epoch), "schedule": self.schedule.state_dict()}

    def load_state(self, state: dict) -> int:
        start = super().load_state(state)
        self.schedule.load_state_dict(state["schedule"])
        return start


def _train_mean(labels: GazeLabels) -> torch.Tensor:
    if not labels.labelled:
        raise DataError("the training data hold unlabelled samples (NaN gaze)")
    return labels.gaze.double().mean(dim=0).float()


def train_gaze(cfg: GazeTrainConfig, data, out: str | Path, *, resume: bool = False,
               progress_bar: bool | None = None, plots: bool = True, groups=None):
    """Train ``cfg.model`` on ``data.train``; evaluate on ``data.val`` and ``data.targets``.

    ``data`` is a :class:`genlab.gaze.protocol.TaskData`, or None to load it from ``cfg``
    (``load_task_data``, before the folder is touched; skipped by a resume of a finished
    run, which does not need it). Writes a run folder and returns
    (model, summary). ``cfg.threads`` torch threads (0: torch's default) are used for the
    run and restored after; ``summary["torch_threads"]`` records the count used.
    ``resume`` on a finished run rewrites nothing: its stored summary and the model of
    its final checkpoint. ``groups`` (sorted subject ids, group of each) are the training
    subjects' sub-datasets of a ``grouping="given"`` run (cross-fitting's fold models).
    """
    cfg.validate()
    if (cfg.grouping == "given") != (groups is not None):
        raise ConfigError("groups are passed to train_gaze exactly when grouping is 'given'")
    with fixed_threads(cfg.threads):  # torch's count is restored afterwards
        if data is None and not (resume and (Path(out) / SUMMARY).is_file()):
            data = load_task_data(cfg)
        return _train_gaze(cfg, data, out, resume=resume, progress_bar=progress_bar,
                           plots=plots, groups=groups)


def trained_model(folder: str | Path, device: str | torch.device = "cpu"):
    """The model in a finished run's final checkpoint, rebuilt from its model record."""
    file = Path(folder) / CHECKPOINT
    state = load_checkpoint(file, map_location=device)
    record = state.get(MODEL_RECORD) if isinstance(state, dict) else None
    if not isinstance(record, dict) or record.get("kind") != RUN_KIND:
        raise CheckpointError(f"{file}: holds no {RUN_KIND} model record; remove "
                              f"{Path(folder) / 'summary.json'} to finish the run again")
    return build_from_record(record, state, source=str(file)).to(device)


def _fold_fit(cfg: GazeTrainConfig, run: RunDir, progress_bar):
    """Cross-fitting's fold trainer: a sub-run of ``cfg`` on the other folds' subjects."""
    def fit(kind, iteration, fold, rest, held, grouping):
        sub = replace(cfg, model="baseline" if kind == "baseline" else "moegaze",
                      grouping="none" if grouping is None else "given",
                      targets=[cfg.source], target_fold=-1)
        folder = fold_folder(run, kind, iteration, fold)
        model, _ = train_gaze(sub, TaskData(rest, held, {cfg.source: held}), folder,
                              resume=(folder / "config.json").is_file(),
                              progress_bar=progress_bar, plots=False,
                              groups=None if grouping is None else (grouping.ids,
                                                                    grouping.groups))
        return model
    return fit


def _train_gaze(cfg: GazeTrainConfig, data, out, *, resume: bool, progress_bar, plots: bool,
                groups=None):
    device = resolve_device(cfg.device)
    run = RunDir(out, asdict(cfg), resume=resume, defaults=asdict(GazeTrainConfig()),
                 kind=RUN_KIND)
    if (done := run.finished_summary()) is not None:  # resumed a finished run: a no-op
        try:
            return trained_model(run.path, device), done
        finally:
            run.close()
    if data is None:  # the summary went away since train_gaze looked
        data = load_task_data(cfg)
    seed_everything(cfg.seed)
    record = cfg.model_record()
    model = _start_model(cfg, record, data, run, device, progress_bar, groups)
    trainer = _gaze_trainer(cfg, model, record, device, progress_bar)
    chunks = _Chunks(cfg, data, trainer, device)
    cpu0 = time.process_time()
    result = trainer.fit(chunks.batches, chunks.count, run=run, on_epoch=chunks.record)
    summary = finish_run(run, model, data, device, cfg, plots=plots)
    summary.update(
        train_seconds=result.seconds,
        train_cpu_seconds=time.process_time() - cpu0,
        train_images_per_s=chunks.steps_done() * min(cfg.batch_size, len(data.train))
        / max(result.seconds, 1e-9),
        torch_threads=torch.get_num_threads(),
    )
    run.write_summary(summary)
    return model, summary


def _start_model(cfg: GazeTrainConfig, record: dict, data: TaskData, run: RunDir, device,
                 progress_bar, groups):
    """The run's model on ``device``, built from its record; a fresh run (not a resumed
    one, whose checkpoint holds them) also fixes its sub-datasets (``grouping``, before the
    first step) and runs the model's ``prepare`` hook."""
    model = build_gaze_model(**record["args"])
    if cfg.pretrained:
        model.backbone.load_pretrained(cfg.pretrained)
    model.to(device)
    if run.resumed_state is None:
        if cfg.grouping in ("colour", "crossfit"):  # the sub-datasets, before the first step
            found = find_groups(cfg, data.train, run, device, _fold_fit(cfg, run, progress_bar))
            groups = (found.ids, found.groups)
            seed_everything(cfg.seed)  # as if no fold model had been trained
        if groups is not None:
            model.set_groups(*groups)
        model.prepare(data.train, device, cfg.seed, cfg.eval_batch_size)
    return model


def _gaze_trainer(cfg: GazeTrainConfig, model, record: dict, device,
                  progress_bar) -> GazeTrainer:
    """AdamW with warm-up and cosine decay per step, in the trainer of gaze models."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                 warmup_cosine(cfg.steps, cfg.warmup_steps))
    return GazeTrainer(
        model, optimizer, schedule=schedule, device=device, seed=cfg.seed,
        loss_weights={"balance": cfg.balance_weight, "appearance": cfg.appearance_weight},
        progress_bar=progress_bar, name=f"train {cfg.model}", amp=cfg.amp,
        channels_last=cfg.channels_last, model_record=record,
    )


class _Chunks:
    """A run's steps in chunks of ``eval_every`` (the trainer's epochs): each chunk's
    batches, and after each chunk its record (the losses, the router's re-fit or regrouping
    where its step falls in the chunk, the curve's validation error)."""

    def __init__(self, cfg: GazeTrainConfig, data: TaskData, trainer: GazeTrainer, device):
        self.cfg, self.data, self.trainer, self.device = cfg, data, trainer, device
        self.count = -(-cfg.steps // cfg.eval_every)
        self.curve_val = take_share(data.val, min(1.0, cfg.curve_val_images / len(data.val)),
                                    cfg.data_seed)
        self.reinit_step = round(cfg.reinit_router_at * cfg.steps)
        self.group_step = round(cfg.group_router_at * cfg.steps)

    def steps(self, chunk: int) -> tuple[int, int]:
        """The chunk's first step and the step after its last."""
        return chunk * self.cfg.eval_every, min(self.cfg.steps, (chunk + 1) * self.cfg.eval_every)

    def steps_done(self) -> int:
        return sum(b - a for a, b in map(self.steps, range(self.count)))

    def batches(self, chunk: int):
        cfg = self.cfg
        return self.data.train.load(step_batches(len(self.data.train), cfg.batch_size, cfg.seed,
                                                 *self.steps(chunk)))

    def record(self, chunk: int, m) -> dict:
        cfg, data, device = self.cfg, self.data, self.device
        start, stop = self.steps(chunk)
        record = {"step": stop, **self.trainer.pop_parts()}
        if start < self.reinit_step <= stop:  # re-fit the router on the trained embeddings
            m.prepare(data.train, device, cfg.seed, cfg.eval_batch_size)
            record["router_prepared"] = True
        if start < self.group_step <= stop:  # group subjects by residuals; router learns groups
            record.update(m.regroup(data.train, device, cfg.seed, cfg.eval_batch_size))
        record["val_mean_deg"] = summarise(predict(m, self.curve_val, device,
                                                   cfg.eval_batch_size),
                                           self.curve_val.labels)["mean_deg"]
        return record


def evaluate_targets(model, data, device, mean_gaze: torch.Tensor, batch_size: int) -> dict:
    """Per target: the model's errors and the constant predictor's (None where unlabelled)."""
    out = {}
    for name, target in data.targets.items():
        if not target.labels.labelled:
            out[name] = None
            continue
        res = summarise(predict(model, target, device, batch_size), target.labels)
        res["constant"] = constant_summary(mean_gaze, target.labels)
        out[name] = res
    return out


def finish_run(run: RunDir, model, data, device, cfg: GazeTrainConfig, *,
               plots: bool = True) -> dict:
    """Final metrics of the trained model, its reference rows, plots and summary fields."""
    bs = cfg.eval_batch_size
    mean_gaze = _train_mean(data.train.labels)
    val = summarise(predict(model, data.val, device, bs), data.val.labels)
    val["constant"] = constant_summary(mean_gaze, data.val.labels)
    first = data.train.subset(range(min(1000, len(data.train))))
    train = summarise(predict(model, first, device, bs), first.labels)
    targets = evaluate_targets(model, data, device, mean_gaze, bs)
    primary = targets[cfg.targets[0]] or {}
    summary = {
        "model": cfg.model, "source": cfg.source, "target_names": list(cfg.targets),
        "target": cfg.targets[0], "seed": cfg.seed, "fraction": cfg.fraction,
        "subject_fraction": cfg.subject_fraction,
        "steps": cfg.steps, "train_images": len(data.train),
        "train_mean_gaze": mean_gaze.tolist(),
        "val_mean_deg": val["mean_deg"], "val_median_deg": val["median_deg"],
        "constant_val_mean_deg": val["constant"]["mean_deg"],
        "target_mean_deg": primary.get("mean_deg"),
        "target_median_deg": primary.get("median_deg"),
        "constant_target_mean_deg": primary.get("constant", {}).get("mean_deg"),
        "train_mean_deg": train["mean_deg"],
        "val": val, "targets": targets,
        # router.source: on the held-out source subjects (train: the first training images)
        "router": {"source": val["router"], "train": train["router"],
                   "target": primary.get("router", {})},
    }
    if not all(math.isfinite(v) for v in (val["mean_deg"], train["mean_deg"])):
        raise DataError(f"{run.path}: non-finite evaluation error")
    if val["mean_deg"] >= val["constant"]["mean_deg"]:  # the sanity row beats the model
        run.sanity_warning(summary, (
            f"validation error {val['mean_deg']:.2f} deg is not below the constant "
            f"predictor's {val['constant']['mean_deg']:.2f} deg: the model has not learnt "
            f"(after {cfg.steps} steps; train longer or check the data)"))
    if plots:
        save_run_plots(run, model, data, device, summary)
    return summary
