"""The options of one gaze training run (:class:`GazeTrainConfig`, stored in config.json).

genlab.gaze.train trains from it; ``validate`` checks every option before a run folder is
touched, ``model_record`` is what rebuilds the run's model from a checkpoint alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from genlab.core.amp import PRECISIONS
from genlab.core.checkpoints import model_record
from genlab.core.errors import ConfigError, require_choice, require_positive
from genlab.gaze.limits import check_limits
from genlab.gaze.models.backbones import INPUT_NORMS, STEMS
from genlab.gaze.models.moegaze import ROUTER_INPUTS
from genlab.gaze.models.registry import BUILDER, MODELS
from genlab.gaze.models.routing import BALANCES, ROUTINGS
from genlab.gaze.models.subgroups import GROUP_INITS, GROUPINGS
from genlab.gaze.protocol import check_data_ref, check_oracle_data

RUN_KIND = "gaze train"  # the kind of its checkpoints' model records (genlab.load)


@dataclass
class GazeTrainConfig:
    """Every option of one gaze training run (stored in config.json)."""

    model: str = "moegaze"
    source: str = "broad-e"
    targets: list[str] = field(default_factory=lambda: ["narrow-m"])
    experts: int = 4
    routing: str = "soft"
    balance: str = "switch"
    temperature: float = 0.1
    width: int = 8
    stem: str = "small"
    input_norm: str = "half"
    pretrained: str | None = None
    appearance_dim: int = 32
    gaze_feat_dim: int = 64
    fraction: float = 1.0
    steps: int = 400
    warmup_steps: int = 30
    eval_every: int = 100
    curve_val_images: int = 2000
    batch_size: int = 64
    eval_batch_size: int = 256
    lr: float = 3e-3
    weight_decay: float = 1e-4
    balance_weight: float = 0.05
    appearance_weight: float = 0.2
    appearance_grad: bool = False
    router_grad: bool = False
    reinit_router_at: float = 0.0
    group_router_at: float = 0.0
    grouping: str = "none"  # none | colour | crossfit (| given: groups passed to train_gaze)
    group_init: str = "residual"  # crossfit's start: residual | colour
    group_folds: int = 2
    group_iterations: int = 3
    router_input: str = "style"  # style (backbone stage statistics) | encoder (own CNN)
    train_count: int = 3000
    test_count: int = 1000
    val_fraction: float = 0.2
    size: list[int] = field(default_factory=lambda: [32, 48])
    data_seed: int = 0
    seed: int = 0
    target_fold: int = -1
    folds: int = 2
    device: str = "cpu"
    threads: int = 1
    workers: int = 0
    amp: str = "off"  # off | bf16 | fp16 (GradScaler), see genlab.core.amp
    channels_last: bool = False

    def validate(self) -> None:
        MODELS.canonical(self.model)
        ROUTINGS.canonical(self.routing)
        BALANCES.canonical(self.balance)
        require_choice("stem", self.stem, STEMS)
        require_choice("input_norm", self.input_norm, INPUT_NORMS)
        require_choice("amp", self.amp, tuple(PRECISIONS))
        require_choice("grouping", self.grouping, (*GROUPINGS, "given"))
        require_choice("group_init", self.group_init, GROUP_INITS)
        require_choice("router_input", self.router_input, ROUTER_INPUTS)
        if self.group_folds < 2 or self.group_iterations < 1:
            raise ConfigError(f"group_folds must be >= 2 and group_iterations >= 1, got "
                              f"{self.group_folds} and {self.group_iterations}")
        if self.grouping != "none" and (MODELS.canonical(self.model) != "moegaze"
                                        or ROUTINGS.canonical(self.routing) != "soft"):
            raise ConfigError(f"--grouping {self.grouping} trains MoEGaze's experts on "
                              f"sub-datasets and routes softly at inference: it needs "
                              f"--model moegaze --routing soft, got {self.model!r}, "
                              f"{self.routing!r}")
        require_positive("experts", self.experts)
        require_positive("temperature", self.temperature)
        for name in ("width", "steps", "eval_every", "batch_size", "eval_batch_size", "lr",
                     "train_count",
                     "test_count", "folds", "curve_val_images"):
            require_positive(name, getattr(self, name))
        for name in ("warmup_steps", "weight_decay", "threads", "workers"):
            require_positive(name, getattr(self, name), allow_zero=True)
        if not 0 < self.fraction <= 1:
            raise ConfigError(f"fraction must be in (0, 1], got {self.fraction}")
        for name in ("reinit_router_at", "group_router_at"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not 0 < self.val_fraction < 1:
            raise ConfigError(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        if len(self.size) != 2 or min(self.size) < 8:
            raise ConfigError(f"size must be two sides >= 8 pixels, got {self.size}")
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
        }

    def model_record(self) -> dict:
        """What rebuilds this run's model from its checkpoint alone (``genlab.load``)."""
        return model_record(RUN_KIND, BUILDER, {"name": self.model, **self.model_hparams(),
                                                 "init_seed": self.seed})


def config_from_dict(values: dict) -> GazeTrainConfig:
    """A GazeTrainConfig from a config.json dict (unknown keys ignored)."""
    names = {f.name for f in fields(GazeTrainConfig)}
    return GazeTrainConfig(**{k: v for k, v in values.items() if k in names})
