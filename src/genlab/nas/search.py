"""Bilevel architecture search (DARTS) in any registered space, with a pluggable regulariser.

Each step (Liu et al. 2019): one Adam step on alpha with the gradient of L_val + lambda_t R
on a validation batch, first order (``order=1``: the gradient at the current weights) or
second order (``order=2``: the unrolled gradient of genlab.nas.architect), then one SGD step
on the weights with the gradient of L_train on a training batch. The budget is counted in
steps. The search sees the space only through its protocol (genlab.nas.spaces.base).

Digits proxy (our choice, measured; see docs/ber.md): DARTS's defaults leave alpha
uniform on digits because the supernet memorises the data and Adam at lr 3e-4 moves
alpha too little. So by default every train and val batch is augmented (shifts,
rotations, noise, erasing) and alpha uses Adam lr 3e-2 without weight decay. Input size,
width, depth and steps default per space (``space.proxy``).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass

import torch

from genlab.core.amp import channels_last_input, make_precision
from genlab.core.checkpoints import MODEL_RECORD, model_record
from genlab.core.data import augment_images
from genlab.core.errors import DivergedError, require_positive
from genlab.core.progress import progress
from genlab.core.registry import path_of
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
from genlab.nas.architect import bilevel_step
from genlab.nas.data import StepBatches, load_image_data
from genlab.nas.ddp import SearchParallel
from genlab.nas.inputs import check_input_size, check_run_kind
from genlab.nas.methods import (
    SearchMethod,
    SelectionContext,
    derive,
    get_method,
    search_method,
)
from genlab.nas.regularizers import Regularizer, make_regularizer
from genlab.nas.search_config import (  # noqa: F401  (SearchConfig's home; re-exported)
    DEFAULT_METHOD,
    ORDERS,
    PROXY_ARCH_LR,
    SEARCH_PRECISIONS,
    SearchConfig,
)
from genlab.nas.spaces import (
    SearchSpace,
    build_space_supernet,
    get_space,
    resolve_table,  # noqa: F401  (re-exported: the CLI and older callers import it here)
    space_table,
)

# Options a search may change on resume beside core's own: the table only judges the result.
RESUME_FREE = ("nb201_table",)


def search_optimizers(net, cfg: SearchConfig, reg: Regularizer):
    """(alpha optimiser, weight optimiser) of a search: Adam(betas 0.5, 0.999) on alpha and the
    regulariser's parameters, SGD with momentum on the weights (quark0/darts), the resolved
    config's rates and decays."""
    a_opt = torch.optim.Adam(list(net.arch_parameters()) + reg.parameters(), lr=cfg.arch_lr,
                             betas=(0.5, 0.999), weight_decay=cfg.arch_weight_decay)
    w_opt = torch.optim.SGD(net.weight_parameters(), lr=cfg.w_lr, momentum=cfg.w_momentum,
                            weight_decay=cfg.w_weight_decay, nesterov=False)
    return a_opt, w_opt


def cosine_lr(step: int, total: int, lr_max: float, lr_min: float) -> float:
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * step / total))


@dataclass(frozen=True)
class SearchPlan:
    """A search's config resolved once into the parts it runs: the resolved config, its
    space, its method's parts and its regulariser (each looked up once, handed down)."""

    cfg: SearchConfig
    space: SearchSpace
    method: SearchMethod
    reg: Regularizer


def plan_search(cfg: SearchConfig) -> SearchPlan:
    """Check ``cfg`` (everything that needs no data) and resolve it into its parts."""
    space = get_space(cfg.space)
    entry = get_method(cfg.method or DEFAULT_METHOD)
    cfg.validate(space, entry, parts=False)
    resolved = cfg.resolved(space, entry)
    return SearchPlan(resolved, space, search_method(resolved, entry),
                      search_regularizer(resolved))


def run_search(cfg: SearchConfig | SearchPlan, out, *, resume: bool = False,
               progress_bar=None, stop_at: int | None = None) -> dict:
    """Run (or resume) one search into the run folder ``out``; returns summary.json's content.
    ``cfg``: a SearchConfig, or the SearchPlan already made of one.

    ``stop_at``: pause after that many steps (a checkpoint, no summary; ``--resume`` goes on);
    the schedules stay those of the whole budget ``cfg.steps``."""
    plan = cfg if isinstance(cfg, SearchPlan) else plan_search(cfg)
    check_run_kind(out, "nas search")
    if stop_at is not None:
        require_positive("stop_at", stop_at)
    with fixed_threads(plan.cfg.threads):
        return _run_search(plan.cfg, plan.space, plan.reg, plan.method, out, resume=resume,
                           progress_bar=progress_bar, stop_at=stop_at)


def search_regularizer(cfg: SearchConfig) -> Regularizer:
    """The regulariser a search's options resolve to (steps_per_epoch 1 until the data set is
    read; config.json records it so)."""
    reg = cfg.reg if cfg.reg is not None else cfg.resolved().reg
    return make_regularizer(reg, cfg.reg_strength, cfg.reg_schedule, params=cfg.reg_params)


def run_config(cfg: SearchConfig, reg: Regularizer | None = None) -> dict:
    """config.json of a search: its options and the regulariser they resolve to, so that a run
    of ``--reg ber`` is not resumed or reused after ``ber`` has come to name another setting."""
    return {**asdict(cfg), "reg_resolved": asdict(reg or search_regularizer(cfg))}


def _run_search(cfg: SearchConfig, space: SearchSpace, reg: Regularizer, method: SearchMethod,
                out, *, resume: bool, progress_bar, stop_at: int | None = None) -> dict:
    table = space_table(space, cfg.nb201_table)
    device = resolve_device(cfg.device)
    config = run_config(cfg, reg)

    seed_everything(cfg.seed)
    data = load_image_data(cfg.dataset, cfg.data_root, size=cfg.size, seed=cfg.seed)
    builder_args = {"space": space.name, "num_classes": data.num_classes,
                    "in_channels": data.in_channels, "channels": cfg.channels,
                    "cells": cfg.cells,
                    "options": {**space.proxy.options, **method.supernet_options}}
    net = build_space_supernet(**{**builder_args, "space": space}).to(device)
    method.attach(net)
    check_input_size(net, data.in_channels, cfg.size, f"the {space.name} supernet",
                     cfg.channels, cfg.cells)
    run = RunDir(out, config, resume=resume, resume_free=RESUME_FREE)  # after every check
    if (done := run.finished_summary()) is not None:  # resumed a finished run: a no-op
        run.close()
        return done
    rebuild = model_record("nas search", path_of(build_space_supernet), builder_args,
                          state_key="net")
    precision = make_precision(cfg.amp, device)
    if cfg.channels_last:
        net.to(memory_format=torch.channels_last)
    train, val = StepBatches(data.train, cfg.batch_size, cfg.seed * 2 + 1), \
        StepBatches(data.val, cfg.batch_size, cfg.seed * 2 + 2)
    spe = len(train)
    require_positive("steps_per_epoch", spe)
    reg.steps_per_epoch = spe  # beta's lambda counts epochs
    if reg.needs_probe:  # candidates with state read the network on the step-0 val batch
        reg.setup(net, _val_batch(cfg, val, 0, device)[0], space)
    a_opt, w_opt = search_optimizers(net, cfg, reg)  # after setup: ber-lbe's targets exist
    # data-parallel under torchrun (genlab.nas.ddp); the regulariser's learnt targets are
    # stepped with alpha, so their gradients are all-reduced with alpha's
    par = SearchParallel(net, cfg.order, extra_arch=reg.parameters())
    diag_x = data.val.images[: cfg.diag_batch].to(device)
    diag_y = data.val.labels[: cfg.diag_batch].to(device)
    epochs = math.ceil(cfg.steps / spe)
    hessian_every = max(1, epochs // cfg.hessian_points) if cfg.hessian_points else 0
    if method.stop.needs_hessian:
        hessian_every = 1

    start, elapsed = 0, 0.0
    if run.resumed_state is not None:
        st = run.resumed_state
        net.load_state_dict(st["net"])
        a_opt.load_state_dict(st["a_opt"])
        w_opt.load_state_dict(st["w_opt"])
        reg.load_state_dict(st.get("reg", {}))
        method.load_state_dict(st.get("method", {}))
        restore_rng_state(st["rng"])
        start, elapsed = int(st["step"]), float(st["elapsed"])

    t0 = time.perf_counter() - elapsed
    sums = [0.0, 0.0, 0]
    with progress(cfg.steps, f"search {cfg.space} {cfg.reg} seed {cfg.seed}", progress_bar,
                  completed=start) as tick:
        for step in range(start, min(stop_at or cfg.steps, cfg.steps)):
            if method.stop.stopped_epoch is not None:
                break  # resumed after the stopping rule fired
            method.begin_step(net, step, cfg.steps)
            lr = cosine_lr(step, cfg.steps, cfg.w_lr, cfg.w_lr_min)
            for group in w_opt.param_groups:
                group["lr"] = lr
            xt, yt = _train_batch(cfg, train, step, device)
            xv, yv = _val_batch(cfg, val, step, device)
            done = step + 1
            logging = not (done % spe and done != cfg.steps)
            forced = bool(cfg.force_every) and step % cfg.force_every == 0
            forces = {} if (logging or forced) and cfg.order == 1 else None
            xt, yt, xv, yv = par.shard(xt, yt, xv, yv)
            xt, xv = (channels_last_input(x, cfg.channels_last) for x in (xt, xv))
            with par.step(), precision.autocast():
                tl, vl = bilevel_step(net, a_opt, w_opt, (xt, yt), (xv, yv), reg, step,
                                      cfg.steps, cfg.grad_clip, cfg.order, forces, method)
            tl, vl = par.global_losses(tl, vl)
            if not (math.isfinite(tl) and math.isfinite(vl)):
                raise DivergedError(f"non-finite loss at step {step} (train {tl}, val {vl}); "
                                    f"the last good checkpoint is kept in {run.path}")
            sums = [sums[0] + tl, sums[1] + vl, sums[2] + 1]
            tick(1)
            if forced and forces:
                _append_jsonl(run.file(FORCES), {"step": step, **forces})
            if not logging:
                continue
            epoch = math.ceil(done / spe) - 1
            record = {"step": done, "epoch": epoch, "lr": lr, "lambda": reg.lam(step, cfg.steps),
                      "train_loss": sums[0] / sums[2], "val_loss": sums[1] / sums[2]}
            sums = [0.0, 0.0, 0]
            record.update(forces or {})
            with par.local():  # every rank alone, on the same diagnostic batch
                record.update(diag.epoch_record(space, derive(space, net), net, diag_x, diag_y,
                                                 table))
                if hessian_every and (epoch % hessian_every == 0 or done == cfg.steps):
                    record["hessian_eig"] = diag.hessian_eigenvalue(net, diag_x, diag_y)
            stopping = method.stop.update(record)
            record["seconds"] = time.perf_counter() - t0
            run.log(record)
            run.save({MODEL_RECORD: rebuild, "net": net.state_dict(), "a_opt": a_opt.state_dict(),
                      "w_opt": w_opt.state_dict(), "rng": capture_rng_state(), "step": done,
                      "elapsed": record["seconds"], "reg": reg.state_dict(),
                      "method": method.state_dict()})
            tick(0, entropy=record["mean_entropy"], pfree=record["param_free_ops"])
            if stopping:
                break

    par.close()
    if stop_at is not None and stop_at < cfg.steps:
        return {"stopped_at": stop_at, "forces": str(run.file(FORCES))}

    history = run.metrics()
    ctx = SelectionContext(space, net, cfg, train, val, device, w_opt,
                           lambda step: _train_batch(cfg, train, step, device),
                           lambda step: _val_batch(cfg, val, step, device),
                           log=lambda record: _append_jsonl(run.file(SELECTION), record))
    genotype = method.architecture(ctx)
    summary = _summary(cfg, space, net, history, table, time.perf_counter() - t0,
                       config["reg_resolved"], genotype, method)
    _plots(run, history, space)
    run.write_summary(summary)
    return summary


FORCES = "forces.jsonl"  # step-level force records (``force_every``)
SELECTION = "selection.jsonl"  # the selection rule's decisions (DARTS-PT), one per line


def _batch(cfg: SearchConfig, stream: StepBatches, step: int, device, split: int):
    """The (augmented) batch of ``step`` from ``stream``; ``split`` 0 (train) or 1 (val) keys
    the augmentation's random stream."""
    x, y = stream.at(step)
    x, y = x.to(device), y.to(device)
    if cfg.augment:
        x = augment_images(x, make_generator(cfg.seed, step, split))
    return x, y


def _train_batch(cfg: SearchConfig, train: StepBatches, step: int, device):
    """The (augmented) training batch of ``step``."""
    return _batch(cfg, train, step, device, 0)


def _val_batch(cfg: SearchConfig, val: StepBatches, step: int, device):
    """The (augmented) validation batch of ``step``."""
    return _batch(cfg, val, step, device, 1)


def _append_jsonl(path, record: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def _summary(cfg: SearchConfig, space, net, history: list[dict], table, seconds: float,
             reg_resolved: dict, genotype, method: SearchMethod) -> dict:
    last = history[-1]
    hess = [h["hessian_eig"] for h in history if h.get("hessian_eig") is not None]
    summary = {
        "space": space.name,
        "genotype": space.format(genotype),
        **space.op_counts(genotype),
        "mean_entropy": diag.mean_entropy(net.alphas()),
        "hessian_eig": hess[-1] if hess else None,
        "search_seconds": seconds,
        "method": cfg.method,
        "select": cfg.select,
        "stopped_epoch": method.stop.stopped_epoch,
        "reg": cfg.reg,
        "reg_resolved": reg_resolved,
        "seed": cfg.seed,
        "steps": cfg.steps,
        "order": cfg.order,
        "supernet_val_acc": last["val_acc"],  # percent, on the diagnostic val batch
        "arch_weights": last["arch_weights"],
        "alpha": {name: a.detach().cpu().tolist() for name, a in net.alphas().items()},
        "param_free_curve": [h["param_free_ops"] for h in history],
        "entropy_curve": [h["mean_entropy"] for h in history],
        "curve_steps": [h["step"] for h in history],
        "torch_threads": torch.get_num_threads(),  # inside fixed_threads: the count used
    }
    if table is not None:
        summary[space.table] = table.lookup(genotype)
    return summary


def _plots(run: RunDir, history: list[dict], space) -> None:
    specs = space.alpha_specs()
    rows = [s.max_entropy for s in specs.values() for _ in s.rows]
    run.save_figure(diag.plot_edge_weights(history, specs), "arch_weights.png")
    run.save_figure(diag.plot_search_curves(history, sum(rows) / len(rows)), "search_curves.png")
    run.save_figure(diag.plot_ib_plane(history), "ib_plane.png")
    if any(h.get("node_entropy") for h in history):
        run.save_figure(diag.plot_node_entropy(history), "node_entropy.png")
    if any(h.get("force_ratio") is not None for h in history):
        run.save_figure(diag.plot_forces(history), "forces.png")
