"""First-order bilevel architecture search (DARTS) with a pluggable alpha regulariser.

Each step (Liu et al. 2019, first order): one Adam step on alpha with the gradient of
L_val + lambda_t R(alpha) on a validation batch, then one SGD step on the weights with
the gradient of L_train on a training batch. The budget is counted in steps.

Digits proxy (our choice, measured; see docs/ber.md): DARTS's defaults leave alpha
uniform on digits because the supernet memorises the data and Adam at lr 3e-4 moves
alpha too little. So by default every train and val batch is augmented (shifts,
rotations, noise, erasing) and alpha uses Adam lr 3e-2 without weight decay.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from genlab.core.data import Batches, augment_images, load_image_data
from genlab.core.errors import DivergedError, require_positive
from genlab.core.progress import progress
from genlab.core.runs import RunDir
from genlab.core.seeding import (
    capture_rng_state,
    fixed_threads,
    make_generator,
    restore_rng_state,
    seed_everything,
)
from genlab.core.trainer import resolve_device
from genlab.nas import diagnostics as diag
from genlab.nas.regularizers import make_regularizer
from genlab.nas.spaces import get_space
from genlab.nas.supernet import NB201SuperNet


@dataclass
class SearchConfig:
    """Every option of a search; the defaults are the digits proxy (see module doc)."""

    space: str = "nb201"
    dataset: str = "digits"
    data_root: str | None = None
    size: int = 8
    channels: int = 8
    cells: int = 1
    batch_size: int = 64
    steps: int = 1800
    reg: str = "ber"
    reg_strength: float | None = None
    reg_schedule: str | None = None
    seed: int = 0
    device: str = "cpu"
    w_lr: float = 0.025
    w_lr_min: float = 0.001
    w_momentum: float = 0.9
    w_weight_decay: float = 3e-4
    arch_lr: float = 3e-2
    arch_weight_decay: float = 0.0
    grad_clip: float = 5.0
    augment: bool = True
    diag_batch: int = 64
    hessian_points: int = 6  # Hessian eigenvalue this many times over the run (0: never)
    nb201_table: str | None = None
    threads: int = 1  # torch intra-op threads: fixed, because the search is chaotic in them

    def validate(self) -> None:
        for name in ("size", "channels", "cells", "batch_size", "steps", "diag_batch", "threads"):
            require_positive(name.replace("_", "-"), getattr(self, name))
        require_positive("hessian-points", self.hessian_points, allow_zero=True)
        for name in ("w_lr", "arch_lr"):
            require_positive(name.replace("_", "-"), getattr(self, name))
        get_space(self.space)


def resolve_table(path: str | None):
    """The NB201 table from --nb201-table or GENLAB_NB201_TABLE, or None when neither is set."""
    from genlab.nas.table import NB201Table

    path = path or os.environ.get("GENLAB_NB201_TABLE")
    return NB201Table.load(path) if path else None


def cosine_lr(step: int, total: int, lr_max: float, lr_min: float) -> float:
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * step / total))


class _Stream:
    """Step-indexed batches of one split: step t is batch t mod L of epoch t div L."""

    def __init__(self, split, batch_size: int, seed: int):
        self.batches = Batches(split, batch_size, seed=seed, drop_last=len(split) >= batch_size)
        self._epoch, self._cache = -1, []

    def __len__(self):
        return len(self.batches)

    def at(self, step: int):
        epoch, idx = divmod(step, len(self.batches))
        if epoch != self._epoch:
            self._epoch, self._cache = epoch, list(self.batches.epoch(epoch))
        return self._cache[idx]


def bilevel_step(net, a_opt, w_opt, train_batch, val_batch, reg, step: int, total: int,
                 grad_clip: float) -> tuple[float, float]:
    """One first-order step: alpha on the val batch, then the weights on the train batch."""
    xv, yv = val_batch
    a_opt.zero_grad(set_to_none=True)
    if reg.needs_cells:
        logits, cells = net(xv, return_cells=True)
    else:
        logits, cells = net(xv), None
    val_loss = F.cross_entropy(logits, yv)
    (val_loss + reg(net.arch_params, step, total, cells)).backward(inputs=net.arch_parameters())
    a_opt.step()

    xt, yt = train_batch
    w_opt.zero_grad(set_to_none=True)
    weights = net.weight_parameters()
    train_loss = F.cross_entropy(net(xt), yt)
    train_loss.backward(inputs=weights)
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(weights, grad_clip)
    w_opt.step()
    return float(train_loss.detach()), float(val_loss.detach())


def run_search(cfg: SearchConfig, out, *, resume: bool = False, progress_bar=None) -> dict:
    """Run (or resume) one search into the run folder ``out``; returns summary.json's content."""
    cfg.validate()
    with fixed_threads(cfg.threads):
        return _run_search(cfg, out, resume=resume, progress_bar=progress_bar)


def _run_search(cfg: SearchConfig, out, *, resume: bool, progress_bar) -> dict:
    table = resolve_table(cfg.nb201_table)
    device = resolve_device(cfg.device)
    run = RunDir(out, asdict(cfg), resume=resume)
    space = get_space(cfg.space)

    seed_everything(cfg.seed)
    data = load_image_data(cfg.dataset, cfg.data_root, size=cfg.size, seed=cfg.seed)
    net = NB201SuperNet(C=cfg.channels, N=cfg.cells, num_classes=data.num_classes,
                        in_channels=data.in_channels, ops=space.ops).to(device)
    a_opt = torch.optim.Adam(net.arch_parameters(), lr=cfg.arch_lr, betas=(0.5, 0.999),
                             weight_decay=cfg.arch_weight_decay)
    w_opt = torch.optim.SGD(net.weight_parameters(), lr=cfg.w_lr, momentum=cfg.w_momentum,
                            weight_decay=cfg.w_weight_decay, nesterov=False)
    train, val = _Stream(data.train, cfg.batch_size, cfg.seed * 2 + 1), \
        _Stream(data.val, cfg.batch_size, cfg.seed * 2 + 2)
    spe = len(train)
    reg = make_regularizer(cfg.reg, cfg.reg_strength, cfg.reg_schedule, steps_per_epoch=spe)
    diag_x = data.val.images[: cfg.diag_batch].to(device)
    diag_y = data.val.labels[: cfg.diag_batch].to(device)
    epochs = math.ceil(cfg.steps / spe)
    hessian_every = max(1, epochs // cfg.hessian_points) if cfg.hessian_points else 0

    start, elapsed = 0, 0.0
    if run.resumed_state is not None:
        st = run.resumed_state
        net.load_state_dict(st["net"])
        a_opt.load_state_dict(st["a_opt"])
        w_opt.load_state_dict(st["w_opt"])
        restore_rng_state(st["rng"])
        start, elapsed = int(st["step"]), float(st["elapsed"])

    t0 = time.perf_counter() - elapsed
    sums = [0.0, 0.0, 0]
    with progress(cfg.steps, f"search {cfg.reg} seed {cfg.seed}", progress_bar,
                  completed=start) as tick:
        for step in range(start, cfg.steps):
            lr = cosine_lr(step, cfg.steps, cfg.w_lr, cfg.w_lr_min)
            for group in w_opt.param_groups:
                group["lr"] = lr
            (xt, yt), (xv, yv) = train.at(step), val.at(step)
            xt, yt, xv, yv = xt.to(device), yt.to(device), xv.to(device), yv.to(device)
            if cfg.augment:
                xt = augment_images(xt, make_generator(cfg.seed, step, 0))
                xv = augment_images(xv, make_generator(cfg.seed, step, 1))
            tl, vl = bilevel_step(net, a_opt, w_opt, (xt, yt), (xv, yv), reg, step, cfg.steps,
                                  cfg.grad_clip)
            if not (math.isfinite(tl) and math.isfinite(vl)):
                raise DivergedError(f"non-finite loss at step {step} (train {tl}, val {vl}); "
                                    f"the last good checkpoint is kept in {run.path}")
            sums = [sums[0] + tl, sums[1] + vl, sums[2] + 1]
            tick(1)
            done = step + 1
            if done % spe and done != cfg.steps:
                continue
            epoch = math.ceil(done / spe) - 1
            record = {"step": done, "epoch": epoch, "lr": lr, "lambda": reg.lam(step, cfg.steps),
                      "train_loss": sums[0] / sums[2], "val_loss": sums[1] / sums[2]}
            sums = [0.0, 0.0, 0]
            record.update(_epoch_diagnostics(net, diag_x, diag_y, table))
            if hessian_every and (epoch % hessian_every == 0 or done == cfg.steps):
                record["hessian_eig"] = diag.hessian_eigenvalue(net, diag_x, diag_y)
            record["seconds"] = time.perf_counter() - t0
            run.log(record)
            run.save({"net": net.state_dict(), "a_opt": a_opt.state_dict(),
                      "w_opt": w_opt.state_dict(), "rng": capture_rng_state(), "step": done,
                      "elapsed": record["seconds"]})
            tick(0, entropy=record["mean_entropy"], pfree=record["param_free_ops"])

    history = run.metrics()
    summary = _summary(cfg, net, history, table, time.perf_counter() - t0)
    _plots(run, history, space)
    run.write_summary(summary)
    return summary


def _epoch_diagnostics(net, x, y, table) -> dict:
    genotype = net.genotype()
    weights = F.softmax(net.arch_params.detach(), dim=-1)
    record = {"genotype": genotype.to_string(), "param_free_ops": genotype.param_free_count(),
              "mean_entropy": diag.mean_entropy(net.arch_params),
              "arch_weights": weights.cpu().tolist()}
    record.update(diag.ib_point(net, x, y))
    if table is not None:
        for k, v in table.lookup(genotype).items():
            record[f"nb201_{k}"] = v
    return record


def _summary(cfg: SearchConfig, net, history: list[dict], table, seconds: float) -> dict:
    genotype = net.genotype()
    last = history[-1]
    hess = [h["hessian_eig"] for h in history if h.get("hessian_eig") is not None]
    summary = {
        "genotype": genotype.to_string(),
        "param_free_ops": genotype.param_free_count(),
        "mean_entropy": diag.mean_entropy(net.arch_params),
        "hessian_eig": hess[-1] if hess else None,
        "search_seconds": seconds,
        "reg": cfg.reg,
        "reg_resolved": asdict(make_regularizer(cfg.reg, cfg.reg_strength, cfg.reg_schedule)),
        "seed": cfg.seed,
        "steps": cfg.steps,
        "supernet_val_acc": last["val_acc"],
        "arch_weights": last["arch_weights"],
        "alpha": net.arch_params.detach().cpu().tolist(),
        "param_free_curve": [h["param_free_ops"] for h in history],
        "entropy_curve": [h["mean_entropy"] for h in history],
        "curve_steps": [h["step"] for h in history],
    }
    if table is not None:
        summary["nb201"] = table.lookup(genotype)
    return summary


def _plots(run: RunDir, history: list[dict], space) -> None:
    run.save_figure(diag.plot_edge_weights(history, space.edges, space.ops), "arch_weights.png")
    run.save_figure(diag.plot_search_curves(history, math.log(len(space.ops))), "search_curves.png")
    run.save_figure(diag.plot_ib_plane(history), "ib_plane.png")

