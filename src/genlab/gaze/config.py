"""The options of one gaze training run (:class:`GazeTrainConfig`, stored in config.json).

genlab.gaze.train trains from it; ``validate`` checks every option before a run folder is
touched, ``model_record`` is what rebuilds the run's model from a checkpoint alone.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from genlab.core.amp import PRECISIONS
from genlab.core.errors import ConfigError, require_choice
from genlab.core.options import check_options, option
from genlab.core.storage.checkpoints import model_record
from genlab.gaze.limits import check_limits
from genlab.gaze.models.backbones import INPUT_NORMS, STEMS
from genlab.gaze.models.moegaze import ROUTER_INPUTS
from genlab.gaze.models.registry import BUILDER, MODELS
from genlab.gaze.models.routing import BALANCES, ROUTINGS
from genlab.gaze.models.subgroups import GROUP_INITS, GROUPINGS
from genlab.gaze.protocol import check_data_ref, check_oracle_data

RUN_KIND = "gaze train"  # the kind of its checkpoints' model records (genlab.load)
#: MoEGaze's design: a study that trains other models beside it gives these options to its
#: MoEGaze runs only; its baseline, reference and oracle runs keep gaze train's defaults, so
#: they are the same runs whatever design is studied
DESIGN = ("grouping", "router_input", "shared_expert")


def data_help() -> str:
    """What a data reference may name: the help of --source, --targets and --data."""
    from genlab.gaze.data.realdata import REAL_DATASETS
    from genlab.gaze.synth.domains import DOMAINS

    return (f"A synthetic domain ({' | '.join(DOMAINS.choices())}) or a real data set as "
            f"NAME:ROOT ({' | '.join(REAL_DATASETS.choices())}; docs/gaze_data.md).")


@dataclass
class GazeTrainConfig:
    """Every option of one gaze training run (stored in config.json)."""

    model: str = option("moegaze", help="Model.", choices=MODELS)
    source: str = option("broad-e", help="Training data.", more="genlab.gaze.config:data_help")
    targets: list[str] = option(factory=lambda: ["narrow-m"], parse="list", flags=("--target",),
                                help="Test data, never trained on (a list, or the option "
                                     "repeated).", more="genlab.gaze.config:data_help")
    experts: int = option(4, help="Number of experts K (MoEGaze).", gt=0)
    routing: str = option("soft", help="Routing (oracle: the true appearance cluster; "
                          "appearance world only).", choices=ROUTINGS)
    balance: str = option("switch", help="Expert balance.", choices=BALANCES)
    temperature: float = option(0.1, help="Router softmax temperature.", gt=0)
    width: int = option(8, help="Backbone base width (ResNet-18: 64).", gt=0)
    stem: str = option("small", help="small (3x3 stride 2) | imagenet (ResNet-18's).",
                       choices=STEMS)
    input_norm: str = option("half", help="half (x - 0.5) | imagenet (mean/std).",
                             choices=INPUT_NORMS)
    pretrained: str | None = option(None, help="torchvision-layout ResNet state-dict file for "
                                    "the backbone (needs --width 64 --stem imagenet).")
    appearance_dim: int = option(32, help="MoEGaze: appearance feature size.", gt=0)
    gaze_feat_dim: int = option(64, help="MoEGaze: gaze feature size of each expert.", gt=0)
    fraction: float = option(1.0, help="Share of the source training images, in (0, 1].", gt=0,
                             le=1)
    subject_fraction: float = option(1.0, help="Share of the source training subjects kept, "
                                     "every image of each (seeded by --seed; before "
                                     "--fraction), in (0, 1].", gt=0, le=1)
    steps: int = option(400, help="Optimiser steps (the same for any --fraction).", gt=0)
    warmup_steps: int = option(30, help="Linear LR warm-up steps (then cosine to 0).", ge=0)
    eval_every: int = option(100, help="Checkpoint and validation interval in steps.", gt=0)
    curve_val_images: int = option(2000, help="Validation images of the learning curve.", gt=0)
    batch_size: int = option(64, help="Mini-batch size.", gt=0)
    eval_batch_size: int = option(256, help="Batch of evaluation.", gt=0)
    lr: float = option(3e-3, help="AdamW learning rate.", gt=0)
    weight_decay: float = option(1e-4, help="AdamW weight decay.", ge=0)
    balance_weight: float = option(0.05, help="Weight of the expert-balance loss.", ge=0)
    appearance_weight: float = option(0.2, help="Weight of the appearance loss.", ge=0)
    appearance_grad: bool = option(False, help="Let the appearance loss's gradient reach the "
                                   "backbone.")
    router_grad: bool = option(False, help="Let the router's gradient reach the backbone.")
    reinit_router_at: float = option(0.0, help="MoEGaze: re-initialise the router at this share "
                                     "of the steps (0: never), in [0, 1).", ge=0)
    group_router_at: float = option(0.0, help="MoEGaze: at this share of the steps group the "
                                    "training subjects by residuals and train the router on "
                                    "the groups (0: never), in [0, 1).", ge=0)
    grouping: str = option("none", help="MoEGaze: appearance sub-datasets fixed before "
                           "training, one expert each: none | colour (k-means of the "
                           "subjects' colour statistics) | crossfit (subject-level "
                           "cross-fitting by held-out error).", choices=GROUPINGS,
                           checked=False)
    group_init: str = option("residual", help="--grouping crossfit's start: residual "
                             "(held-out residuals of a baseline per fold) | colour.",
                             choices=GROUP_INITS)
    group_folds: int = option(2, help="--grouping crossfit: subject folds.", ge=2)
    group_iterations: int = option(3, help="--grouping crossfit: at most this many "
                                   "reassignments (stops when no subject moves).", ge=1)
    router_input: str = option("style", help="MoEGaze's router reads: style (the backbone's "
                               "stage-2 statistics) | encoder (a small CNN of its own on the "
                               "image).", choices=ROUTER_INPUTS)
    shared_expert: bool = option(False, help="MoEGaze: a shared expert that every image "
                                 "trains (the baseline's MLP); the routed experts add each "
                                 "group's correction, starting from zero.")
    train_count: int = option(3000, help="Synthetic source images rendered (before the subject "
                              "hold-out).", gt=0)
    test_count: int = option(1000, help="Synthetic target images rendered.", gt=0)
    val_fraction: float = option(0.2, help="Share of the source subjects held out, in (0, 1).",
                                 gt=0)
    train_subjects: list[int] = option(factory=list, parse="list", ge=0,
                                       help="Train on these source training subjects only "
                                       "(ids; none held out; empty: all of them).")
    size: list[int] = option(factory=lambda: [32, 48], parse="size", ge=8,
                             help="The model's input: N or HEIGHTxWIDTH, >= 8 pixels a side.")
    data_seed: int = option(0, help="Seed of the rendered data and the subject split.", ge=0)
    seed: int = option(0, help="Seed of initialisation, batches and the fraction.", ge=0)
    target_fold: int = option(-1, help="Real data: the fold of the target subjects to test on "
                              "(-1: all).", ge=-1)
    folds: int = option(2, help="Real data: subject folds of the targets.", gt=0)
    device: str = option("cpu", help="cpu | cuda | cuda:N | auto (cuda when there is one).")
    threads: int = option(1, help="torch CPU threads, recorded in config.json (0: torch's "
                          "default, the machine's cores).", ge=0)
    workers: int = option(0, help="DataLoader workers for real data.", ge=0)
    amp: str = option("off", help="off | bf16 | fp16: autocast of forward and loss; fp16 adds a "
                      "GradScaler (its state in the checkpoint).", choices=tuple(PRECISIONS))
    channels_last: bool = option(False, help="NHWC layout of model and inputs.")
    target_scale: int = option(1, ge=1, help="Synthetic targets: render k times each "
                               "domain's subjects and k x --test-count images (more test "
                               "subjects, as many images each).")

    def validate(self) -> None:
        check_options(self)  # types, choices and limits as the fields declare them
        require_choice("grouping", self.grouping, (*GROUPINGS, "given"))
        if self.grouping != "none" and (MODELS.canonical(self.model) != "moegaze"
                                        or ROUTINGS.canonical(self.routing) != "soft"):
            raise ConfigError(f"--grouping {self.grouping} trains MoEGaze's experts on "
                              f"sub-datasets and routes softly at inference: it needs "
                              f"--model moegaze --routing soft, got {self.model!r}, "
                              f"{self.routing!r}")
        for name in ("reinit_router_at", "group_router_at"):
            if not getattr(self, name) < 1:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not self.val_fraction < 1:
            raise ConfigError(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        check_limits(self)
        if not self.targets:
            raise ConfigError("at least one target is needed")
        for ref in (self.source, *self.targets):
            check_data_ref(ref)
        if MODELS.canonical(self.model) == "moegaze" and ROUTINGS.get(self.routing).oracle:
            check_oracle_data({"--source": [self.source], "--target": list(self.targets)},
                              self.experts)

    def model_hparams(self) -> dict:
        return {
            "width": self.width, "stem": self.stem, "input_norm": self.input_norm,
            "num_experts": self.experts, "appearance_dim": self.appearance_dim,
            "gaze_feat_dim": self.gaze_feat_dim, "temperature": self.temperature,
            "routing": self.routing, "balance": self.balance,
            "appearance_grad": self.appearance_grad, "router_grad": self.router_grad,
            "router_input": self.router_input, "group_train": self.grouping != "none",
            "shared_expert": self.shared_expert,
        }

    def model_record(self) -> dict:
        """What rebuilds this run's model from its checkpoint alone (``genlab.load``)."""
        return model_record(RUN_KIND, BUILDER, {"name": self.model, **self.model_hparams(),
                                                 "init_seed": self.seed})


def design_of(cfg) -> dict:
    """{option: value} of MoEGaze's design (:data:`DESIGN`) in a study's config ``cfg``."""
    return {name: getattr(cfg, name) for name in DESIGN}


def config_from_dict(values: dict) -> GazeTrainConfig:
    """A GazeTrainConfig from a config.json dict (unknown keys ignored)."""
    names = {f.name for f in fields(GazeTrainConfig)}
    return GazeTrainConfig(**{k: v for k, v in values.items() if k in names})
