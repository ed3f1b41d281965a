"""Digit classification with any optimiser of genlab.optim, then every measure of the result.

The model trains on a digits task or a folder of the user's images (tasks.py: the whole
training pool, or the fit part of a fit/validation hold-out, a class subset, a few images per
class, noisy labels) through
genlab.core.trainer.Trainer (atomic per-epoch checkpoints, resume), with a constant or
cosine learning rate, optionally from the weights of an earlier run (``init_from``; the
classifier ``head`` is re-initialised). With ``stop_loss`` > 0 (Jiang et al. 2020's stopping
rule) it stops after the first epoch whose training cross-entropy (the whole fit set, eval
mode, logged as ``train_ce``) is below ``stop_loss``, ``epochs`` being the cap; the summary
says whether it got there (``reached_stop_loss``) and every summary holds
``epochs_trained``. At the end the summary holds train (noisy labels),
validation and clean test loss/accuracy (accuracies in percent, 0-100), the generalization
gaps ``gap_loss = test_loss - train_loss`` and ``gap_acc = train_acc - test_acc`` (points),
the sanity row ``constant_test_acc`` (the test accuracy of always answering the training
labels' majority class; a model not above it gets a ``warning``), and every measure of
:func:`genlab.optim.measures.all_measures` on the training set (training labels). torch
runs with ``threads`` intra-op threads (0: torch's default), recorded as ``torch_threads``.

Optimisers whose closure returns per-sample losses (their registry entry's ``per_sample``:
COV, SAMGCM) get a per-sample closure; every other optimiser the Trainer's mean-loss
closure. Each optimiser gets the options its entry ``accepts`` (``model=`` included, so the
per-sample ones use the per-layer per-sample gradients of genlab.optim.measures.ghost).

Every checkpoint carries a model record (kind ``"optim train"``, builder
:func:`~genlab.optim.training.models.build_model`), so ``genlab.load(folder)`` rebuilds the
trained model; :func:`load_trained` (``genlab optim measure``) rebuilds it from that record
after checking its kind.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from genlab.core.data import Batches, Split, announce, majority_accuracy, streamed, warn_batch
from genlab.core.data.imagefolder import folder_size
from genlab.core.errors import CheckpointError, ConfigError, require_positive
from genlab.core.options import check_options, option, option_like
from genlab.core.registry import path_of
from genlab.core.report import figure
from genlab.core.runs import CONFIG, RunDir, load_checkpoint, read_json
from genlab.core.seeding import fixed_threads, seed_everything
from genlab.core.storage.checkpoints import MODEL_RECORD, build_from_record, model_record
from genlab.core.trainer import Trainer, accuracy, evaluate, resolve_device
from genlab.loading import checkpoint_path
from genlab.optim.limits import (
    MAX_DEPTH,
    MAX_EPOCHS,
    MAX_ITERATIONS,
    MAX_PARAMETERS,
    MAX_WIDTH,
)
from genlab.optim.measures import MeasureConfig, all_measures
from genlab.optim.measures.per_sample import BN_MODES
from genlab.optim.optimizers.cov import DEFAULT_LAM, DEFAULT_LR
from genlab.optim.optimizers.registry import (
    OPTIMIZER_REGISTRY,
    make_optimizer,
    optimizer_settings,
)
from genlab.optim.training.models import ARCHS, HEAD, build_model
from genlab.optim.training.noise import NOISE_KINDS
from genlab.optim.training.tasks import (
    SPLITS,
    TASKS,
    TaskData,
    check_task,
    check_translation,
    task_data,
)

SCHEDULES = ("constant", "cosine")
DIGITS_SIZE = 8  # the side of the digits (and of a folder's images before --size followed them)
KIND = "optim train"  # the kind of the model record in this run's checkpoints


@dataclass
class TrainConfig:
    """Every option of one training on digits or a folder of images (`genlab optim train`;
    config.json)."""

    arch: str = option("mlp", help="Architecture.", choices=ARCHS)
    width: int = option(64, help="Hidden width / channels / embedding size.", gt=0,
                        le=MAX_WIDTH)
    depth: int = option(2, help="Hidden layers / conv blocks / attention blocks.", gt=0,
                        le=MAX_DEPTH)
    optimizer: str = option("sgd", help="Optimiser (docs/optimizers.md).",
                            choices="genlab.optim.optimizers.registry:OPTIMIZER_REGISTRY")
    lr: float = option(DEFAULT_LR, help="Learning rate (0: the initialisation, scored and "
                       "measured).",
                       ge=0)
    momentum: float = option(0.9, help="Momentum.", ge=0)
    weight_decay: float = option(0.0, help="Weight decay.", ge=0)
    batch_size: int = option(32, help="Mini-batch size.", gt=0)
    epochs: int = option(20, help="Epochs (with --stop-loss: the cap).", gt=0, le=MAX_EPOCHS)
    stop_loss: float = option(0.0, ge=0, help="> 0: stop after the first epoch whose training "
                              "cross-entropy (the whole training set, eval mode) is below it, "
                              "--epochs being the cap (Jiang et al. 2020's stopping rule); "
                              "0: train every epoch.")
    schedule: str = option("constant", help="Learning rate over the epochs: constant or cosine "
                           "(to 0).", choices=SCHEDULES)
    rho: float = option(0.05, help="Radius of SAM/ASAM/SAMGCM; both radii of CSAM.", gt=0)
    lam: float = option(DEFAULT_LAM, help="COV penalty weight.", ge=0)
    xi: float = option(1e-6, help="SAMGCM covariance damping.", gt=0)
    optimizer_params: dict[str, Any] = option(
        factory=dict, parse="params", flags=("--optimizer-param",),
        help="The optimiser's own settings beyond the options above, KEY=VALUE, repeated "
             "(csam_identity: alpha; acsam_identity: alpha, eta; csam: damping, decay, "
             "refresh, length; docs/optimizers.md); checked against its settings.")
    task: str = option("digits", help="Data: a registered task (the digits and their class "
                       "subsets, the rendered shapes), or folder:PATH (your images, one "
                       "sub-folder per class; docs/cli.md).", choices=TASKS, checked=False,
                       flags=("--dataset",))
    size: int | None = option(None, help="Image side of folder:PATH data (its images are "
                              "resized to it; default: their median shorter side, down to a "
                              "multiple of 8, 8 to 32) and of the shapes (rendered at it; "
                              "default 32); the digits are 8x8 whatever it says.",
                              gt=0)
    split: str = option("full", help="full: train on the whole pool; holdout: fit part, keep "
                        "a validation set.", choices=SPLITS)
    data_seed: int | None = option(None, help="Seed of the data split (default: --seed).", ge=0)
    per_class: int = option(0, help="> 0: that many training images per class.", ge=0)
    label_noise: float = option(0.0, help="Fraction of training labels flipped, in [0, 1).",
                                ge=0)
    noise_kind: str = option("symmetric", help="Label noise (asymmetric on digits: 7->1, 4->9, "
                             "5->6, 3<->8).", choices=NOISE_KINDS)
    translate: int = option(0, help="> 0: jittered digits, every image shifted by up to this "
                            "many pixels per axis.", ge=0)
    translate_copies: int = option(1, help="Shifted copies of the fit set (with --translate).",
                                   gt=0)
    val_copies: int = option(1, help="Shifted copies of the validation set (with "
                             "--translate).", gt=0)
    init_from: str = option("", help="checkpoint.pt of an earlier run: start from its weights "
                            "(a new head).")
    seed: int = option(0, help="Seed of initialisation and batches.", ge=0)
    measure: bool = option(True, help="Compute every measure at the end.")
    measure_samples: int = option(512, help="Training samples the measures use.", gt=0)
    curvature_samples: int = option(128, help="Samples of the curvature measures (lambda_max, "
                                    "tr H).", gt=0)
    measure_iterations: int = option(30, help="Power iterations (lambda_max, s).", gt=0,
                                     le=MAX_ITERATIONS)
    measure_probes: int = option(20, help="Hutchinson probes for tr H.", gt=0,
                                 le=MAX_ITERATIONS)
    device: str = option("cpu", help="cpu | cuda | cuda:N | auto (cuda when there is one).")
    threads: int = option(1, help="torch CPU threads, recorded in config.json (0: torch's "
                          "default, the machine's cores).", ge=0)

    def validate(self) -> None:
        check_options(self)  # types, choices and limits as the fields declare them
        check_optimizer_params(self)
        check_task(self.task, translate=self.translate, label_noise=self.label_noise,
                   noise_kind=self.noise_kind)
        if not self.label_noise < 1:
            raise ConfigError(f"label_noise must be in [0, 1), got {self.label_noise}")
        check_translation(self.translate, self.translate_copies)
        check_translation(self.translate, self.val_copies, "val_copies")
        self.measure_config().validate()

    def resolved(self) -> TrainConfig:
        """A copy with ``size`` filled: a folder's default side (its images' median shorter
        side, down to a multiple of 8, 8 to 32), else the task's own (the digits' 8, the
        shapes' 32)."""
        if self.size is not None:
            return self
        native = TASKS.get(self.task).size if self.task in TASKS else DIGITS_SIZE
        return replace(self, size=folder_size(self.task) or native)

    def measure_config(self) -> MeasureConfig:
        return MeasureConfig(n_samples=self.measure_samples,
                             curvature_samples=self.curvature_samples,
                             batch_size=self.batch_size, power_iterations=self.measure_iterations,
                             trace_probes=self.measure_probes, seed=self.seed)


def build_optimizer(cfg: TrainConfig, model: nn.Module, n_total: int) -> torch.optim.Optimizer:
    """make_optimizer(cfg.optimizer, ...) with the options its registry entry accepts and its
    own settings (``--optimizer-param``)."""
    return make_optimizer(cfg.optimizer, model.parameters(),
                          **optimizer_arguments(cfg, model, n_total))


# the options of TrainConfig an optimiser may take (its entry's ``accepts``), by setting
_OPTION_OF = {"rho": "rho", "rho1": "rho", "rho2": "rho", "lam": "lam", "xi": "xi"}


def optimizer_arguments(cfg: TrainConfig, model: nn.Module | None = None,
                        n_total: int = 0) -> dict:
    """The keyword arguments of ``cfg``'s optimiser: lr, momentum and weight decay, the
    options its registry entry accepts, then ``cfg.optimizer_params``."""
    args = {"lr": cfg.lr, "momentum": cfg.momentum, "weight_decay": cfg.weight_decay}
    extra = {k: getattr(cfg, option) for k, option in _OPTION_OF.items()}
    extra.update(n_total=n_total, model=model)
    accepts = OPTIMIZER_REGISTRY.get(cfg.optimizer).accepts
    args.update({k: v for k, v in extra.items() if k in accepts})
    return {**args, **cfg.optimizer_params}


def check_optimizer_params(cfg: TrainConfig) -> None:
    """ConfigError for an ``--optimizer-param`` the optimiser does not take (naming its
    settings and defaults), or one that an option of the command sets (use that option)."""
    from genlab.optim.optimizers.perturb import refuse_settings

    owned = {"lr", "momentum", "weight_decay", "model", "n_total"}
    owned |= {k for k in _OPTION_OF if k in OPTIMIZER_REGISTRY.get(cfg.optimizer).accepts}
    for key in cfg.optimizer_params:
        if key in owned:
            flag = "--" + _OPTION_OF.get(key, key).replace("_", "-")
            raise ConfigError(f"--optimizer-param {key}: set it with {flag}")
    refuse_settings(f"--optimizer-param (optimizer {cfg.optimizer})",
                    list(cfg.optimizer_params), optimizer_settings(cfg.optimizer))


class PerSampleTrainer(Trainer):
    """Trainer whose closure returns per-sample losses (the COV/SAMGCM protocol)."""

    def __init__(self, *args, per_sample_loss, **kw):
        super().__init__(*args, **kw)
        self.per_sample_loss = per_sample_loss

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        loss = self.optimizer.step(lambda: self.per_sample_loss(self.model(x), y))
        return float(loss.detach())


def split_scores(model: nn.Module, split: Split, device, batch_size: int = 512) -> dict:
    """Mean cross-entropy and accuracy in percent (0-100) over a split (eval mode)."""
    batches = Batches(split, batch_size, shuffle=False)
    res = evaluate(model, batches, nn.CrossEntropyLoss(), device, metric=accuracy)
    return {"loss": res["loss"], "acc": 100 * res["metric"]}


def load_task(cfg: TrainConfig, *, checked: bool = False) -> TaskData:
    """The task data of a config (fixed by data_seed; label noise drawn with the seed);
    ``checked``: ``cfg`` is validated (TrainConfig.validate), its task not checked again."""
    data_seed = cfg.seed if cfg.data_seed is None else cfg.data_seed
    return task_data(cfg.task, cfg.split, data_seed=data_seed, per_class=cfg.per_class,
                     label_noise=cfg.label_noise, noise_kind=cfg.noise_kind,
                     noise_seed=cfg.seed, translate=cfg.translate,
                     translate_copies=cfg.translate_copies, val_copies=cfg.val_copies,
                     size=cfg.resolved().size, checked=checked)


def model_args(cfg: TrainConfig, data: TaskData) -> dict:
    """build_model's arguments (plain values) for a config and its task data."""
    return {"arch": cfg.arch, "width": cfg.width, "depth": cfg.depth,
            "in_channels": data.in_channels, "image_size": data.size,
            "num_classes": data.num_classes}


def prepare(cfg: TrainConfig, *, checked: bool = False) -> tuple[TaskData, nn.Module]:
    """(task data, model) for a config, seeded; the model starts from ``init_from`` if set
    (``checked``: ``cfg`` is validated, see :func:`load_task`)."""
    seed_everything(cfg.seed)
    data = load_task(cfg, checked=checked)
    args = model_args(cfg, data)
    check_model_size(args)
    model = build_model(**args)
    if cfg.init_from:
        _load_backbone(model, Path(cfg.init_from))
    return data, model


def check_model_size(args: dict) -> None:
    """ConfigError when the model of build_model(**args) would exceed MAX_PARAMETERS
    (counted on the meta device: nothing is allocated)."""
    with torch.device("meta"):
        n = sum(p.numel() for p in build_model(**args).parameters())
    if n > MAX_PARAMETERS:
        raise ConfigError(f"--width {args['width']} and --depth {args['depth']} give the "
                          f"{args['arch']} {n:,} parameters; the limit is {MAX_PARAMETERS:,}")


def _load_backbone(model: nn.Module, checkpoint: Path) -> None:
    """Every weight of ``checkpoint`` except the classifier head, which stays freshly drawn."""
    state = load_checkpoint(checkpoint)
    if "model" not in state:
        raise CheckpointError(f"{checkpoint}: no model weights (key 'model') to start from")
    backbone = {k: v for k, v in state["model"].items() if not k.startswith(HEAD + ".")}
    missing, unexpected = model.load_state_dict(backbone, strict=False)
    wrong = [k for k in missing if not k.startswith(HEAD + ".")] + list(unexpected)
    if wrong:
        raise CheckpointError(f"{checkpoint}: its weights do not fit this model "
                              f"({', '.join(wrong[:4])} ...)")


def train_digits(cfg: TrainConfig, out: str | Path, *, resume: bool = False,
                 progress_bar: bool | None = None) -> dict:
    """Train, evaluate and measure one digits model; writes a run folder and returns summary."""
    cfg.validate()
    cfg = cfg.resolved()
    device = resolve_device(cfg.device)
    with fixed_threads(cfg.threads):
        # validated above; sizes and init_from checked before the folder is touched
        data, model = prepare(cfg, checked=True)
        # an option newer than a run compares as its default when the run resumes
        run = RunDir(out, asdict(cfg), resume=resume, kind=KIND,
                     defaults=asdict(TrainConfig()))
        if (done := run.finished_summary()) is not None:  # resumed a finished run: a no-op
            run.close()
            return done
        return _train(cfg, run, data, model, device, progress_bar)


def _train(cfg: TrainConfig, run: RunDir, data: TaskData, model: nn.Module, device,
           progress_bar: bool | None) -> dict:
    model.to(device)
    optimizer = build_optimizer(cfg, model, len(data.fit))
    scheduler = (torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs)
                 if cfg.schedule == "cosine" else None)
    loss_fn = nn.CrossEntropyLoss()
    record = model_record(KIND, path_of(build_model), model_args(cfg, data),
                          inference=data.inference)
    kw = dict(device=device, seed=cfg.seed, progress_bar=progress_bar, scheduler=scheduler,
              name=f"{cfg.arch}/{cfg.optimizer}", model_record=record)
    if OPTIMIZER_REGISTRY.get(cfg.optimizer).per_sample:
        trainer = PerSampleTrainer(model, optimizer, loss_fn,
                                   per_sample_loss=nn.CrossEntropyLoss(reduction="none"), **kw)
    else:
        trainer = Trainer(model, optimizer, loss_fn, **kw)
    announce(data)
    warn_batch(cfg.batch_size, len(data.fit), "training")
    batches = Batches(data.fit, cfg.batch_size, seed=cfg.seed)
    test = data.test.to(device)
    fit = data.fit.to(device) if cfg.stop_loss > 0 else None

    def on_epoch(epoch, m):
        scores = {"test_acc": split_scores(m, test, device)["acc"]}
        if fit is not None:  # the stopping rule's figure: the fit set's cross-entropy
            scores["train_ce"] = split_scores(m, fit, device)["loss"]
        return scores

    def until(record: dict) -> bool:
        return record["train_ce"] < cfg.stop_loss

    result = trainer.fit(batches.epoch, cfg.epochs, run=run, on_epoch=on_epoch,
                         until=until if fit is not None else None)
    summary = finish(model, data, device, cfg)
    summary["train_seconds"] = result.seconds
    summary["epochs_trained"] = result.epochs
    if fit is not None:  # a model that hit the cap is a result, marked
        summary["reached_stop_loss"] = result.stopped
    summary["torch_threads"] = torch.get_num_threads()
    if summary["test_acc"] <= summary["constant_test_acc"] + 1e-4:  # float ties: not above
        run.sanity_warning(summary, (
            f"test accuracy {summary['test_acc']:.2f}% is not above the constant "
            f"predictor's {summary['constant_test_acc']:.2f}% (the training labels' majority "
            f"class): the model has not learnt (after {cfg.epochs} "
            f"epoch{'s' if cfg.epochs != 1 else ''} at lr {cfg.lr:g}; "
            f"train longer, raise the learning rate or check the data)"))
    _plot_curves(run)
    run.write_summary(summary)
    return summary


def finish(model: nn.Module, data: TaskData, device, cfg: TrainConfig) -> dict:
    """Scores (accuracies in percent), gaps, the constant predictor's test accuracy and (if
    cfg.measure) every measure of a trained model."""
    train = data.fit.to(device)
    tr, te = split_scores(model, train, device), split_scores(model, data.test, device)
    summary = {"train_loss": tr["loss"], "train_acc": tr["acc"], "test_loss": te["loss"],
               "test_acc": te["acc"], "gap_loss": te["loss"] - tr["loss"],
               "gap_acc": tr["acc"] - te["acc"],
               "constant_test_acc": majority_accuracy(data.fit.labels, data.test.labels),
               "n_train": len(train)}
    if data.val is not None:
        va = split_scores(model, data.val, device)
        summary.update(val_loss=va["loss"], val_acc=va["acc"])
    if cfg.label_noise > 0:
        clean = Split(data.fit.images, data.clean_fit_labels)
        summary["train_acc_clean_labels"] = split_scores(model, clean, device)["acc"]
    if cfg.measure:
        x, y = measured_rows(train, cfg.measure_config(), cfg.seed)
        summary["measures"] = all_measures(model, nn.CrossEntropyLoss(), x, y,
                                           cfg.measure_config())
    return summary


def measured_rows(fit: Split, mcfg: MeasureConfig, seed: int) -> tuple:
    """The fit set in the seeded order the measures read it; of image files only as many rows
    as the measures use are decoded (n_samples, and the sharpness's draw among them)."""
    order = torch.randperm(len(fit), generator=torch.Generator().manual_seed(seed))
    if streamed(fit.images):
        order = order[: max(mcfg.n_samples, mcfg.sharpness_samples)]
    return fit.images[order], fit.labels[order]


def _plot_curves(run: RunDir) -> None:
    rows = run.metrics()
    if not rows:
        return
    fig, axes = figure(ncols=2, width=4.2)
    axes[0][0].plot([r["epoch"] for r in rows], [r["train_loss"] for r in rows])
    axes[0][0].set(xlabel="epoch", ylabel="train loss", yscale="log")
    axes[0][1].plot([r["epoch"] for r in rows], [r["test_acc"] for r in rows])
    axes[0][1].set(xlabel="epoch", ylabel="clean test accuracy (%)")
    run.save_figure(fig, "curves.png")


def read_train_config(config: Path) -> TrainConfig:
    """The TrainConfig stored in an ``optim train`` run's config.json (CheckpointError if not)."""
    if not config.is_file():
        raise CheckpointError(f"{config}: no config.json to go with the checkpoint")
    try:
        raw = read_json(config)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise CheckpointError(f"{config}: unreadable ({exc}); give the config.json of an "
                              f"`{KIND}` run") from exc
    if not isinstance(raw, dict):
        raise CheckpointError(f"{config}: not a JSON object; give the config.json of an "
                              f"`{KIND}` run")
    command = raw.get("command", KIND)
    if command != KIND:
        raise CheckpointError(f"{config} is {_a(command)} run; optim measure needs "
                              f"{_a(KIND)} run")
    known = {k: v for k, v in raw.items() if k in TrainConfig.__dataclass_fields__}
    try:
        cfg = TrainConfig(**known)
        cfg.validate()
    except (TypeError, ConfigError) as exc:
        raise CheckpointError(f"{config}: not the config of an `optim train` run ({exc})") from exc
    return cfg


def _a(kind: str) -> str:
    """``kind`` with its indefinite article: "a gaze train", "an optim train"."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def load_trained(checkpoint: str | Path, config: str | Path | None = None
                 ) -> tuple[nn.Module, TrainConfig]:
    """The model of an ``optim train`` run (rebuilt from its checkpoint's model record, as
    genlab.load does) and its TrainConfig (config.json next to the checkpoint, or ``config``).

    A checkpoint or config of another kind of run is refused, naming its kind; an explicit
    ``config`` must describe the checkpoint's model (CheckpointError otherwise).
    """
    file = checkpoint_path(checkpoint)
    state = load_checkpoint(file)
    record = state.get(MODEL_RECORD) if isinstance(state, dict) else None
    kind = record.get("kind") if isinstance(record, dict) else None
    if kind != KIND:  # said before anything of another kind's model is rebuilt
        what = (f"is {_a(kind)} run" if kind else
                "holds no model record (not a genlab training, or an earlier genlab's)")
        raise CheckpointError(f"{file} {what}; optim measure needs {_a(KIND)} run")
    config = Path(config) if config is not None else file.parent / CONFIG
    cfg = read_train_config(config)
    built = record["args"]
    described = {"arch": cfg.arch, "width": cfg.width, "depth": cfg.depth}
    if any(built[k] != v for k, v in described.items()):
        raise CheckpointError(
            f"{file}: holds a {built['arch']} (width {built['width']}, depth "
            f"{built['depth']}), not the {cfg.arch} (width {cfg.width}, depth {cfg.depth}) "
            f"described by {config}")
    model = build_from_record(record, state, source=str(file))
    return model.train(), cfg  # the mode of a freshly built model, as measured before


@dataclass
class MeasureRunConfig:
    """The options of `genlab optim measure`: a trained model and the sizes of its measures."""

    checkpoint: str = option(None, argument=True, required=True,
                             help="checkpoint.pt of an `optim train` run (or its folder).")
    train_config: str | None = option(None, help="config.json of the training, for its data "
                                      "(default: next to the checkpoint); the model comes "
                                      "from the checkpoint's model record.")
    measure_samples: int = option_like(TrainConfig, "measure_samples")
    curvature_samples: int = option_like(TrainConfig, "curvature_samples")
    measure_iterations: int = option_like(TrainConfig, "measure_iterations")
    measure_probes: int = option_like(TrainConfig, "measure_probes")
    bn_mode: str = option("eval", choices=BN_MODES, help="BatchNorm during lambda_max, tr H "
                          "and sharpness (eval: running statistics; batch: each chunk's).")
    seed: int = option_like(TrainConfig, "seed", help="Seed of the measures' samples and "
                            "probes.")
    device: str = option_like(TrainConfig, "device")
    threads: int = option_like(TrainConfig, "threads")

    def measure_config(self) -> MeasureConfig:
        return MeasureConfig(n_samples=self.measure_samples,
                             curvature_samples=self.curvature_samples,
                             power_iterations=self.measure_iterations,
                             trace_probes=self.measure_probes, bn_mode=self.bn_mode,
                             seed=self.seed)


def measure_checkpoint(checkpoint: str | Path, out: str | Path, *,
                       config: str | Path | None = None,
                       measure: MeasureConfig | None = None, resume: bool = False,
                       threads: int = 1, device: str = "cpu") -> dict:
    """Every measure (and the gaps) of a trained model, in a new run folder; torch runs with
    ``threads`` intra-op threads (0: torch's default) on ``device``."""
    require_positive("threads", threads, allow_zero=True)
    dev = resolve_device(device)
    if measure is not None:
        measure.validate()  # every check before the folder is touched
    with fixed_threads(threads):
        model, cfg = load_trained(checkpoint, config)
        mcfg = measure or cfg.measure_config()
        data = load_task(cfg, checked=True)  # load_trained validated cfg
        run = RunDir(out, {"command": "optim measure", "checkpoint": str(checkpoint),
                           "train_config": asdict(cfg), **asdict(mcfg), "threads": threads,
                           "device": device}, resume=resume)
        model.to(dev)
        summary = finish(model, data, dev, replace(cfg, measure=False))
        x, y = measured_rows(data.fit.to(dev), mcfg, cfg.seed)
        summary["measures"] = all_measures(model, nn.CrossEntropyLoss(), x, y, mcfg)
        summary["torch_threads"] = torch.get_num_threads()
        run.write_summary(summary)
    return summary
