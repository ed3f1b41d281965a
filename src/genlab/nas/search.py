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
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from genlab.core.amp import channels_last_input, make_precision
from genlab.core.data import announce, augment_images, warn_batch
from genlab.core.errors import CheckpointError, ConfigError, DivergedError, require_positive
from genlab.core.options import check_options, option
from genlab.core.progress import progress
from genlab.core.registry import path_of
from genlab.core.runs import RunDir, register_config_upgrade, warn
from genlab.core.seeding import (
    capture_rng_state,
    fixed_threads,
    make_generator,
    restore_rng_state,
    seed_everything,
)
from genlab.core.storage.checkpoints import MODEL_RECORD, model_record
from genlab.core.storage.files import append_line
from genlab.core.trainer import cosine_lr, resolve_device
from genlab.nas import diagnostics as diag
from genlab.nas.architect import bilevel_step
from genlab.nas.captured import CUDA_GRAPH_MODES, search_step, wanted
from genlab.nas.data import StepBatches, check_dataset, default_size, load_image_data
from genlab.nas.ddp import SearchParallel
from genlab.nas.inputs import check_input_size, check_limits, check_run_kind
from genlab.nas.methods import (
    SearchMethod,
    SelectionContext,
    derive,
    get_method,
    search_method,
)
from genlab.nas.regularizers import BER, Regularizer, make_regularizer
from genlab.nas.spaces import (
    SearchSpace,
    build_space_supernet,
    get_space,
    resolve_table,  # noqa: F401  (re-exported: the CLI and older callers import it here)
    space_table,
)

ORDERS = (1, 2)
DEFAULT_METHOD = "darts"
PROXY_ARCH_LR = 3e-2  # the digits proxy's alpha learning rate for DARTS (docs/ber.md)

# fp16 would need a GradScaler on both backward passes of the bilevel step (alpha, then the
# weights) and on the unrolled gradient; bf16 has float32's range and needs none.
SEARCH_PRECISIONS = ("off", "bf16")
# Options a search may change on resume beside core's own: the table only judges the result;
# per-cell checkpointing trades memory for time and leaves the search as it is; so does the
# captured step (equal to the eager one to float32 tolerance), and an older run has no such key.
RESUME_FREE = ("nb201_table", "checkpoint_cells", "cuda_graph")


PROXY = "default: the space's digits proxy"
SPACES = "genlab.nas.spaces:space_names"
PENALTY_NAMES = "genlab.nas.regularizers:PENALTIES"
TABLE_HELP = ("NB201 accuracy CSV (default: $GENLAB_NB201_TABLE); judges the result, never "
              "selects; convert the official files with `genlab nas table convert`.")


def _part_params(kind: str, example: str):
    """The option of a part's own settings over its preset's (``--KIND-param KEY=VALUE``)."""
    return option(factory=dict, parse="params", flags=(f"--{kind}-param",),
                  help=f"The {kind} part's own settings over its preset's, KEY=VALUE, "
                       f"repeated ({example}; docs/nas_methods.md).")


def _parts(kind: str):
    def names() -> tuple[str, ...]:
        from genlab.nas.methods import part_names

        return tuple(part_names()[kind])
    return names


@dataclass
class SearchConfig:
    """Every option of a search; None means the space's digits-proxy default (see module doc)."""

    space: str = option("nb201", help="Search space (docs/nas_spaces.md; genlab nas spaces).",
                        choices=SPACES)
    dataset: str = option("digits", help="Data set: a registered one (those read from disk need "
                          "--data-root), or folder:PATH, your images (one sub-folder per "
                          "class; docs/cli.md).", choices="genlab.nas.data:DATASETS",
                          checked=False)
    data_root: str | None = option(None, help="Folder with the data set's files (not for "
                                   "digits).")
    size: int | None = option(None, help=f"Input side: the networks take squares; digits are "
                              f"resized ({PROXY}; folder:PATH: the images' median shorter "
                              f"side, down to a multiple of 8, 8 to 32); N or NxN.", gt=0,
                              parse="square")
    channels: int | None = option(None, help=f"Width C of the supernet ({PROXY}; upstream 16).",
                                  gt=0, flags=("-C",))
    cells: int | None = option(None, help=f"NB201: cells per stage (upstream 5); DARTS spaces: "
                               f"cells (upstream 8) ({PROXY}).", gt=0, flags=("-N",))
    batch_size: int = option(64, help="Batch of each bilevel step (train and val).", gt=0)
    steps: int | None = option(None, help=f"Bilevel steps (the budget; {PROXY}).", gt=0)
    method: str | None = option(None, help="Search method at its authors' preset (genlab nas "
                                "methods; docs/nas_methods.md); default: DARTS with --reg ber.",
                                choices="genlab.nas.methods:method_names")
    select: str = option("argmax", help="Selection rule: argmax (the space's rule on alpha) | "
                         "pt (DARTS-PT's projection on the trained supernet).",
                         choices=_parts("select"))
    select_params: dict[str, Any] = option(
        factory=dict, parse="params", flags=("--select-param",),
        help="The selection rule's own settings, KEY=VALUE, repeated (pt: tune_epochs, "
             "val_batches, crit; docs/nas_methods.md).")
    relaxation: str | None = option(None, help="Mixing weights from alpha (default: the "
                                    "method's).", choices=_parts("relaxation"))
    relaxation_params: dict[str, Any] = _part_params("relaxation", "gumbel: tau_max, tau_min")
    perturb: str | None = option(None, help="Perturbation of the weight step's mixing "
                                 "(default: the method's).", choices=_parts("perturb"))
    perturb_params: dict[str, Any] = _part_params("perturb",
                                                  "random, adversarial: eps_min, eps_max")
    stop: str | None = option(None, help="Stopping rule (default: the method's).",
                              choices=_parts("stop"))
    stop_params: dict[str, Any] = _part_params("stop", "hessian-es: factor, window")
    supernet_params: dict[str, Any] = option(
        factory=dict, parse="params", flags=("--supernet-param",),
        help="Supernet options over the method's, KEY=VALUE, repeated (PC-DARTS' preset: "
             "partial_channels=4 edge_norm=true arch_start=0.3; docs/nas_methods.md).",
        more="genlab.nas.methods.supernet_options:supernet_option_help")
    reg: str | None = option(None, help="Regulariser of alpha (default: the method's own; "
                             "`ber` when no method is named).", choices=PENALTY_NAMES,
                             more="genlab.nas.regularizers:regularizer_help")
    reg_strength: float | None = option(None, help="lambda_0 (default: per regulariser, see "
                                        "docs).", ge=0)
    reg_schedule: str | None = option(None, help="up | down | constant (BER variants).",
                                      choices=("up", "down", "constant"))
    reg_params: dict[str, float] = option(
        factory=dict, parse="params", flags=("--reg-param",),
        help="The regulariser's own settings, KEY=VALUE, repeated (ber-lbe: h_min, the floor "
             "of its node targets); each penalty lists its settings in docs/ber.md.")
    seed: int = option(0, help="The search's seed (data split, init, batches).", ge=0)
    device: str = option("cpu", help="cpu | cuda | cuda:N | auto (cuda when there is one).")
    order: int = option(1, help="1: first-order DARTS; 2: second order (unrolled).",
                        choices=ORDERS)
    w_lr: float = option(0.025, help="SGD lr of the weights (cosine to --w-lr-min).", gt=0)
    w_lr_min: float = option(0.001, help="Final SGD lr of the weights.", ge=0)
    w_momentum: float = option(0.9, help="SGD momentum of the weights.", ge=0)
    w_weight_decay: float | None = option(None, help="SGD weight decay of the weights "
                                          "(default: the method's; DARTS 3e-4).", ge=0)
    arch_lr: float | None = option(None, help="Adam lr of alpha (default 3e-2 x the method's "
                                   "ratio to DARTS' 3e-4).", gt=0)
    arch_weight_decay: float | None = option(None, help="Adam weight decay of alpha (default: "
                                             "the method's).", ge=0)
    grad_clip: float = option(5.0, help="Gradient-norm clip of the weight step.", gt=0)
    augment: bool = option(True, help="Augment train and val batches (digits proxy).")
    diag_batch: int = option(64, help="Batch of the diagnostics (entropy, val accuracy).", gt=0)
    hessian_points: int = option(6, help="How often the alpha-Hessian eigenvalue is computed "
                                 "over the run (0: never).", ge=0)
    nb201_table: str | None = option(None, help=TABLE_HELP)
    threads: int = option(1, help="torch CPU threads, recorded in config.json (0: torch's "
                          "default, the machine's cores; the search is chaotic in the count).",
                          ge=0)
    amp: str = option("off", help="off | bf16: autocast in the bilevel step (fp16 is refused: "
                      "no loss scaling in the search).", choices=SEARCH_PRECISIONS)
    channels_last: bool = option(False, help="NHWC layout of supernet and inputs.")
    checkpoint_cells: bool = option(False, help="Recompute each cell's forward in the backward "
                                    "(activation checkpointing): less memory, more time per "
                                    "step; the same search (docs/nas_performance.md).")
    force_every: int = option(0, help="Also log the alpha forces every this many steps "
                              "(forces.jsonl; 0: never).", ge=0)
    cuda_graph: str = option("auto", help="on | off | auto: capture the whole bilevel step in "
                             "one CUDA graph and replay it (docs/scale.md). on: CUDA only "
                             "(refused on the CPU); a search that cannot be captured (second "
                             "order, GDAS' and DrNAS' sampling, SDARTS, DARTS-, R-DARTS (DP), "
                             "--reg ber, bf16, ...) runs eagerly with a one-line warning. auto: "
                             "off for now, on for CUDA once a GPU has measured the captured "
                             "step faster.", choices=CUDA_GRAPH_MODES)

    @classmethod
    def record_options(cls, data: dict) -> dict:
        """A search's config.json as this version's options (an older one's supernet
        fields folded into ``supernet_params``)."""
        return upgrade_search_options(data)

    def resolved(self, space=None, method=None) -> SearchConfig:
        """A copy with every None size option filled from the space's proxy defaults and
        every None method option from the method's preset (``space`` and ``method``: the
        entries already looked up, else they are looked up here)."""
        proxy = (space or get_space(self.space)).proxy
        fill = {k: getattr(proxy, k) for k in ("size", "channels", "cells", "steps")
                if getattr(self, k) is None}
        if self.size is None and (side := default_size(self.dataset)) is not None:
            fill["size"] = side  # a data set made at its own side, or your images, keep it
        method = method or get_method(self.method or DEFAULT_METHOD)
        fill["method"] = method.name
        if self.reg is None:
            fill["reg"] = method.reg if self.method is not None else BER
        if self.w_weight_decay is None:
            fill["w_weight_decay"] = method.w_weight_decay
        if self.arch_weight_decay is None:
            fill["arch_weight_decay"] = method.arch_weight_decay
        if self.arch_lr is None:
            fill["arch_lr"] = PROXY_ARCH_LR * method.arch_lr_scale
        return replace(self, **fill)

    def validate(self, space=None, method=None, *, parts: bool = True) -> None:
        """Every check that needs no data: the fields' declarations, then the space's size
        rules, the limits, the data set, the method's orders and (``parts``) its parts;
        ``space`` and ``method``: the entries already looked up."""
        if self.amp == "fp16":
            raise ConfigError("--amp fp16 is not available for the search: its two backward "
                              "passes (alpha, then the weights) have no loss scaling; use "
                              "--amp bf16 (float32's range, no scaler needed)")
        check_options(self)  # types, choices and limits as the fields declare them
        if self.cuda_graph == "on" and self.device == "cpu":
            raise ConfigError("--cuda-graph on needs a CUDA device, not --device cpu; use "
                              "--cuda-graph off or auto")
        space = space or get_space(self.space)
        space.check_size_options(self.channels, self.cells)
        check_limits(size=self.size, channels=self.channels, cells=self.cells,
                     batch_size=self.batch_size, steps=self.steps)
        check_dataset(self.dataset, self.data_root)
        method = method or get_method(self.method or DEFAULT_METHOD)
        if self.order not in method.orders:
            raise ConfigError(f"method {method.name} is first order only (its authors have no "
                              f"second-order step); use --order 1")
        if parts:
            search_method(replace(self, method=method.name), method)  # unknown parts, fractions


# the SearchConfig fields that ``supernet_params`` replaced (an older search's config.json)
FOLDED_SUPERNET_FIELDS = ("partial_channels", "edge_norm", "aux_skip", "drop_path",
                          "arch_start")


@register_config_upgrade
def upgrade_search_options(data: dict) -> dict:
    """``data`` laid out as this version's search options when it is an older search's (it
    has ``space``, ``order`` and ``arch_lr`` and a field of FOLDED_SUPERNET_FIELDS): each
    such field that was set moves into ``supernet_params``; anything else is unchanged."""
    if not (isinstance(data, dict) and {"space", "order", "arch_lr"} <= set(data)
            and any(k in data for k in FOLDED_SUPERNET_FIELDS)):
        return data
    data = dict(data)
    moved = {k: data.pop(k) for k in FOLDED_SUPERNET_FIELDS if k in data}
    given = data.get("supernet_params") or {}
    data["supernet_params"] = {**{k: v for k, v in moved.items() if v is not None}, **given}
    return data


def search_optimizers(net, cfg: SearchConfig, reg: Regularizer):
    """(alpha optimiser, weight optimiser) of a search: Adam(betas 0.5, 0.999) on alpha and the
    regulariser's parameters, SGD with momentum on the weights (quark0/darts), the resolved
    config's rates and decays."""
    a_opt = torch.optim.Adam(list(net.arch_parameters()) + reg.parameters(), lr=cfg.arch_lr,
                             betas=(0.5, 0.999), weight_decay=cfg.arch_weight_decay)
    w_opt = torch.optim.SGD(net.weight_parameters(), lr=cfg.w_lr, momentum=cfg.w_momentum,
                            weight_decay=cfg.w_weight_decay, nesterov=False)
    return a_opt, w_opt


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
        search = Search(plan.cfg, plan.space, plan.reg, plan.method)
        return search.run(out, resume=resume, progress_bar=progress_bar, stop_at=stop_at)


def search_regularizer(cfg: SearchConfig) -> Regularizer:
    """The regulariser a search's options resolve to (steps_per_epoch 1 until the data set is
    read; config.json records it so)."""
    reg = cfg.reg if cfg.reg is not None else cfg.resolved().reg
    return make_regularizer(reg, cfg.reg_strength, cfg.reg_schedule, params=cfg.reg_params)


def resumed_layout(state: dict, net, builder_args: dict, space, out) -> dict | None:
    """None when the checkpoint's supernet ``state`` fits ``net``; else the builder's
    arguments of the per-edge layout it fits: a search checkpointed before its method's
    options were fused resumes on the per-edge cells (the same function, slower), with a
    warning. CheckpointError when neither layout fits."""
    theirs, mine = set(state), set(net.state_dict())
    if theirs == mine:
        return None
    args = {**builder_args, "options": {**builder_args["options"], "per_edge": True}}
    try:
        fits = theirs == set(build_space_supernet(**{**args, "space": space}).state_dict())
    except (ConfigError, TypeError):  # a space without a per-edge layout
        fits = False
    if fits:
        warn(f"{out}: this search was checkpointed on the per-edge cells of an earlier genlab; "
             "it resumes on them (the same search, slower)")
        return args
    raise CheckpointError(
        f"{out}: the checkpoint's supernet does not fit this search's ({len(theirs - mine)} "
        f"weights it has and this one lacks, e.g. {sorted(theirs - mine)[:2]}; "
        f"{len(mine - theirs)} the other way); resume it with the genlab that wrote it or "
        "start a new run")


def run_config(cfg: SearchConfig, reg: Regularizer | None = None) -> dict:
    """config.json of a search: its options and the regulariser they resolve to, so that a run
    of ``--reg ber`` is not resumed or reused after ``ber`` has come to name another setting."""
    return {**asdict(cfg), "reg_resolved": asdict(reg or search_regularizer(cfg))}


class Search:
    """One search, read top to bottom as quark0/darts' train_search.py. :meth:`run` calls, in
    order: :meth:`open` (seed, data, supernet, then the run folder), :meth:`setup` (batch
    streams, regulariser, the two optimisers, the data-parallel wrapper), :meth:`load_state`
    (a resumed run), then :meth:`step` for every bilevel step and, at the end of each epoch,
    :meth:`record` (losses, diagnostics) and :meth:`checkpoint` (:meth:`state`; the names are
    core's Trainer's), and :meth:`finish` (the selected architecture, summary.json)."""

    def __init__(self, cfg: SearchConfig, space: SearchSpace, reg: Regularizer,
                 method: SearchMethod):
        self.cfg, self.space, self.reg, self.method = cfg, space, reg, method
        self.table = space_table(space, cfg.nb201_table)
        self.device = resolve_device(cfg.device)
        wanted(cfg.cuda_graph, self.device)  # --cuda-graph on without CUDA: refused before
        self.config = run_config(cfg, reg)
        self.sums = [0.0, 0.0, 0]  # the epoch's train and val loss sums, and its steps
        self.elapsed = 0.0  # seconds of the segments before a resume

    def run(self, out, *, resume: bool = False, progress_bar=None,
            stop_at: int | None = None) -> dict:
        """The search into the run folder ``out``: summary.json's content (see run_search)."""
        cfg, method = self.cfg, self.method
        self.open(out, resume)
        if (done := self.folder.finished_summary()) is not None:  # finished: a no-op
            self.folder.close()
            return done
        announce(self.data)
        self.setup()
        start = 0
        if self.folder.resumed_state is not None:
            start = self.load_state(self.folder.resumed_state)
        # bilevel_step, or the same step captured in a CUDA graph (genlab.nas.captured)
        self.step_fn = search_step(cfg.cuda_graph, self.device, self.net, self.a_opt,
                                   self.w_opt, self.reg, method, order=cfg.order, amp=cfg.amp,
                                   checkpoint_cells=cfg.checkpoint_cells,
                                   parallel=self.par.active, eager=bilevel_step)
        self.t0 = time.perf_counter() - self.elapsed
        with progress(cfg.steps, f"search {cfg.space} {cfg.reg} seed {cfg.seed}", progress_bar,
                      completed=start, unit="step") as tick:
            for step in range(start, min(stop_at or cfg.steps, cfg.steps)):
                if method.stop.stopped_epoch is not None:
                    break  # resumed after the stopping rule fired
                record = self.step(step)
                tick(1)
                if record is None:  # not the end of an epoch
                    continue
                stopping = method.stop.update(record)
                record["seconds"] = time.perf_counter() - self.t0
                self.folder.log(record)
                self.checkpoint(step + 1, record["seconds"])
                tick(0, entropy=record["mean_entropy"], pfree=record["param_free_ops"])
                if stopping:
                    break
        self.par.close()
        if stop_at is not None and stop_at < cfg.steps:
            return {"stopped_at": stop_at, "forces": str(self.folder.file(FORCES))}
        return self.finish()

    # -- set-up ------------------------------------------------------------------------
    def open(self, out, resume: bool) -> None:
        """Seed, read the data, build the supernet, then open the run folder (after every
        check: a refused search leaves no folder)."""
        cfg, space = self.cfg, self.space
        seed_everything(cfg.seed)
        self.data = data = load_image_data(cfg.dataset, cfg.data_root, size=cfg.size,
                                           seed=cfg.seed, checked=True)
        self.builder_args = {"space": space.name, "num_classes": data.num_classes,
                             "in_channels": data.in_channels, "channels": cfg.channels,
                             "cells": cfg.cells,
                             "options": {**space.proxy.options, **self.method.supernet_options}}
        self.net = self.supernet(self.builder_args)
        check_input_size(self.net, data.in_channels, cfg.size, f"the {space.name} supernet",
                         cfg.channels, cfg.cells)
        self.folder = RunDir(out, self.config, resume=resume, resume_free=RESUME_FREE,
                             kind="nas search")

    def supernet(self, args: dict):
        """The supernet the builder's ``args`` describe, on the device, the method attached."""
        net = build_space_supernet(**{**args, "space": self.space}).to(self.device)
        net.checkpoint_cells = self.cfg.checkpoint_cells
        self.method.attach(net)
        return net

    def setup(self) -> None:
        """The supernet's layout of a resumed run, the batch streams, the regulariser's
        set-up, the two optimisers, the data-parallel wrapper and the diagnostic batch."""
        cfg, data, reg = self.cfg, self.data, self.reg
        if self.folder.resumed_state is not None:
            layout = resumed_layout(self.folder.resumed_state["net"], self.net,
                                    self.builder_args, self.space, self.folder.path)
            if layout is not None:  # checkpointed on the per-edge cells: resumed on them
                self.builder_args, self.net = layout, self.supernet(layout)
        self.rebuild = model_record("nas search", path_of(build_space_supernet),
                                    self.builder_args, state_key="net", inference=data.inference)
        self.precision = make_precision(cfg.amp, self.device)
        if cfg.channels_last:
            self.net.to(memory_format=torch.channels_last)
        self.train = StepBatches(data.train, cfg.batch_size, cfg.seed * 2 + 1)
        self.val = StepBatches(data.val, cfg.batch_size, cfg.seed * 2 + 2)
        self.spe = len(self.train)
        require_positive("steps_per_epoch", self.spe)
        for split, part in (("training", data.train), ("validation", data.val)):
            warn_batch(cfg.batch_size, len(part), split)
        reg.steps_per_epoch = self.spe  # beta's lambda counts epochs
        if reg.needs_probe:  # candidates with state read the network on the step-0 val batch
            reg.setup(self.net, self.val_batch(0)[0], self.space)
        penalty = reg.penalty_object
        if penalty.val_batches_needed:  # ber-pt measures on these (its own steps)
            penalty.val_batches = [self.val_batch(i) for i in range(penalty.val_batches_needed)]
        # after the set-up: ber-lbe's targets exist
        self.a_opt, self.w_opt = search_optimizers(self.net, cfg, reg)
        # data-parallel under torchrun (genlab.nas.ddp); the regulariser's learnt targets are
        # stepped with alpha, so their gradients are all-reduced with alpha's
        self.par = SearchParallel(self.net, cfg.order, extra_arch=reg.parameters())
        self.diag_x = data.val.images[: cfg.diag_batch].to(self.device)
        self.diag_y = data.val.labels[: cfg.diag_batch].to(self.device)
        epochs = math.ceil(cfg.steps / self.spe)
        self.hessian_every = max(1, epochs // cfg.hessian_points) if cfg.hessian_points else 0
        if self.method.stop.needs_hessian:
            self.hessian_every = 1

    def train_batch(self, step: int):
        """The (augmented) training batch of ``step``."""
        return _train_batch(self.cfg, self.train, step, self.device)

    def val_batch(self, step: int):
        """The (augmented) validation batch of ``step``."""
        return _val_batch(self.cfg, self.val, step, self.device)

    # -- checkpoints -------------------------------------------------------------------
    def state(self, step: int, seconds: float) -> dict:
        """The checkpoint after ``step`` steps, ``seconds`` into the search."""
        return {MODEL_RECORD: self.rebuild, "net": self.net.state_dict(),
                "a_opt": self.a_opt.state_dict(), "w_opt": self.w_opt.state_dict(),
                "rng": capture_rng_state(), "step": step, "elapsed": seconds,
                "reg": self.reg.state_dict(), "method": self.method.state_dict()}

    def load_state(self, state: dict) -> int:
        """Resume from a checkpoint (:meth:`state`); returns the step to go on from."""
        self.net.load_state_dict(state["net"])
        self.a_opt.load_state_dict(state["a_opt"])
        self.w_opt.load_state_dict(state["w_opt"])
        self.reg.load_state_dict(state.get("reg", {}))
        self.method.load_state_dict(state.get("method", {}))
        restore_rng_state(state["rng"])
        self.elapsed = float(state["elapsed"])
        return int(state["step"])

    def checkpoint(self, step: int, seconds: float) -> None:
        """Write the checkpoint after ``step`` steps into the run folder."""
        self.folder.save(self.state(step, seconds))

    # -- one step ----------------------------------------------------------------------
    def step(self, step: int) -> dict | None:
        """One bilevel step (alpha, then the weights) on the batches of ``step``; the
        epoch's record (:meth:`record`) when ``step`` ends an epoch or the search, else None."""
        cfg, done = self.cfg, step + 1
        self.method.begin_step(self.net, step, cfg.steps)
        lr = cosine_lr(step, cfg.steps, cfg.w_lr, cfg.w_lr_min)
        for group in self.w_opt.param_groups:
            group["lr"] = lr
        xt, yt = self.train_batch(step)
        xv, yv = self.val_batch(step)
        logging = not (done % self.spe and done != cfg.steps)
        forced = bool(cfg.force_every) and step % cfg.force_every == 0
        forces = {} if (logging or forced) and cfg.order == 1 else None
        xt, yt, xv, yv = self.par.shard(xt, yt, xv, yv)
        xt, xv = (channels_last_input(x, cfg.channels_last) for x in (xt, xv))
        with self.par.step(), self.precision.autocast():
            tl, vl = self.step_fn(self.net, self.a_opt, self.w_opt, (xt, yt), (xv, yv),
                                  self.reg, step, cfg.steps, cfg.grad_clip, cfg.order, forces,
                                  self.method)
        tl, vl = self.par.global_losses(tl, vl)
        if not (math.isfinite(tl) and math.isfinite(vl)):
            raise DivergedError(f"non-finite loss at step {step} (train {tl}, val {vl}); "
                                f"the last good checkpoint is kept in {self.folder.path}")
        self.sums = [self.sums[0] + tl, self.sums[1] + vl, self.sums[2] + 1]
        if forced and forces:
            _append_jsonl(self.folder.file(FORCES), {"step": step, **forces})
        return self.record(step, lr, forces) if logging else None

    def record(self, step: int, lr: float, forces: dict | None) -> dict:
        """The metrics record of the epoch that ``step`` ends: its mean losses, the forces on
        alpha, and the diagnostics of the supernet and of its derived cell."""
        cfg, done, net = self.cfg, step + 1, self.net
        epoch = math.ceil(done / self.spe) - 1
        train_loss, val_loss, count = self.sums
        record = {"step": done, "epoch": epoch, "lr": lr,
                  "lambda": self.reg.lam(step, cfg.steps),
                  "train_loss": train_loss / count, "val_loss": val_loss / count}
        self.sums = [0.0, 0.0, 0]
        record.update(forces or {})
        with self.par.local():  # every rank alone, on the same diagnostic batch
            record.update(diag.epoch_record(self.space, derive(self.space, net), net,
                                            self.diag_x, self.diag_y, self.table))
            if self.hessian_every and (epoch % self.hessian_every == 0 or done == cfg.steps):
                record["hessian_eig"] = diag.hessian_eigenvalue(net, self.diag_x, self.diag_y)
        return record

    # -- the end -----------------------------------------------------------------------
    def finish(self) -> dict:
        """Select the architecture (the method's rule), write the plots and summary.json."""
        cfg, run = self.cfg, self.folder
        history = run.metrics()
        ctx = SelectionContext(self.space, self.net, cfg, self.train, self.val, self.device,
                               self.w_opt, self.train_batch, self.val_batch,
                               log=lambda record: _append_jsonl(run.file(SELECTION), record))
        genotype = self.method.architecture(ctx)
        summary = _summary(cfg, self.space, self.net, history, self.table,
                           time.perf_counter() - self.t0, self.config["reg_resolved"],
                           genotype, self.method)
        summary["diag_images"] = len(self.diag_y)  # what supernet_val_acc is over
        _plots(run, history, self.space)
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
    append_line(path, json.dumps(record))


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
