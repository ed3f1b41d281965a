"""Training and evaluation of gaze models: L1 on (pitch, yaw), Adam, the core Trainer.

Adam with a cosine learning-rate decay over the epochs. Loss (per step) =
L1(gaze, target) + ``balance_weight`` * L_bal + ``appearance_weight`` * L_app, where
L_bal is the Switch load-balancing loss and L_app the subject-contrastive appearance
loss of MoEGaze (both our reconstruction, see genlab.gaze.routing); the
baseline has only the L1 term. Metrics: mean and median angular error in degrees
(genlab.gaze.geometry.angular_error_deg) and router statistics (load per expert,
assignment per domain, per-subject purity = mean share of a subject's images sent
to that subject's most used expert).

No model selection happens on the target domain: the model after the last epoch is
evaluated. The target error is logged per epoch for the curves only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError, DataError, require_choice, require_positive
from genlab.core.runs import RunDir
from genlab.core.seeding import make_generator, seed_everything
from genlab.core.trainer import Trainer, resolve_device
from genlab.gaze.geometry import angular_error_deg
from genlab.gaze.models import MODELS, MoEGaze, build_model
from genlab.gaze.routing import BALANCES, ROUTINGS


@dataclass
class GazeSet:
    """In-memory gaze images (N,3,H,W) in [0,1] RGB, gaze (N,2) pitch-yaw rad, subject ids."""

    images: torch.Tensor
    gaze: torch.Tensor
    subject: torch.Tensor
    name: str = ""

    def __post_init__(self):
        n = len(self.images)
        if n == 0:
            raise DataError(f"data set {self.name or '(unnamed)'} is empty")
        if self.images.ndim != 4 or self.images.shape[1] != 3:
            raise DataError(
                f"{self.name}: images must be (N, 3, H, W), got {tuple(self.images.shape)}"
            )
        if self.gaze.shape != (n, 2) or self.subject.shape != (n,):
            raise DataError(f"{self.name}: expected gaze (N, 2) and subject (N,) for N={n}")

    def __len__(self) -> int:
        return len(self.images)

    def subset(self, idx) -> GazeSet:
        idx = torch.as_tensor(idx, dtype=torch.long)
        return GazeSet(self.images[idx], self.gaze[idx], self.subject[idx], self.name)

    def batches(self, batch_size: int, seed: int, epoch: int, shuffle: bool = True):
        """(images, targets) with targets = [pitch, yaw, subject] (N, 3); seeded per epoch."""
        n = len(self)
        order = (
            torch.randperm(n, generator=make_generator(seed, epoch)) if shuffle else torch.arange(n)
        )
        targets = torch.cat([self.gaze, self.subject[:, None].float()], dim=1)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            yield self.images[idx], targets[idx]


@dataclass
class GazeTrainConfig:
    """Every option of one gaze training run (stored in config.json)."""

    model: str = "moegaze"
    source: str = "broad-e"
    target: str = "narrow-m"
    experts: int = 4
    routing: str = "soft"
    balance: str = "switch"
    temperature: float = 0.1
    width: int = 16
    appearance_dim: int = 32
    gaze_feat_dim: int = 64
    fraction: float = 1.0
    epochs: int = 8
    batch_size: int = 64
    lr: float = 2e-3
    balance_weight: float = 0.05
    appearance_weight: float = 0.2
    appearance_grad: bool = False
    train_count: int = 3000
    test_count: int = 1000
    size: list[int] = field(default_factory=lambda: [32, 48])
    data_seed: int = 0
    seed: int = 0
    device: str = "cpu"
    data_format: str = "synthetic"
    train_path: list[str] | None = None
    test_path: list[str] | None = None
    image_root: str | None = None

    def validate(self) -> None:
        require_choice("model", self.model, MODELS)
        require_choice("routing", self.routing, ROUTINGS)
        require_choice("balance", self.balance, BALANCES)
        require_positive("experts", self.experts)
        require_positive("temperature", self.temperature)
        for name in ("width", "epochs", "batch_size", "lr", "train_count", "test_count"):
            require_positive(name, getattr(self, name))
        if not 0 < self.fraction <= 1:
            raise ConfigError(f"fraction must be in (0, 1], got {self.fraction}")
        if len(self.size) != 2 or min(self.size) < 8:
            raise ConfigError(f"size must be two sides >= 8 pixels, got {self.size}")

    def model_hparams(self) -> dict:
        return {
            "width": self.width,
            "num_experts": self.experts,
            "appearance_dim": self.appearance_dim,
            "gaze_feat_dim": self.gaze_feat_dim,
            "temperature": self.temperature,
            "routing": self.routing,
            "balance": self.balance,
            "appearance_grad": self.appearance_grad,
        }


def config_from_dict(values: dict) -> GazeTrainConfig:
    """A GazeTrainConfig from a config.json dict (unknown keys ignored)."""
    names = {f.name for f in fields(GazeTrainConfig)}
    return GazeTrainConfig(**{k: v for k, v in values.items() if k in names})


def l1_gaze_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean absolute error on (pitch, yaw) radians."""
    return F.l1_loss(pred, target[:, :2])


class GazeTrainer(Trainer):
    """Trainer whose step adds MoEGaze's auxiliary losses and prototype re-balancing."""

    def __init__(self, model, optimizer, *, balance_weight: float, appearance_weight: float, **kw):
        super().__init__(model, optimizer, l1_gaze_loss, **kw)
        self.balance_weight, self.appearance_weight = balance_weight, appearance_weight
        self.parts: dict[str, float] = {}
        self.part_count = 0

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        aux_box = {}

        def closure():
            self.optimizer.zero_grad(set_to_none=True)
            gaze, aux = self.model(x, return_aux=True, subjects=y[:, 2].long())
            parts = {"gaze_l1": l1_gaze_loss(gaze, y), **aux["losses"]}
            loss = parts["gaze_l1"]
            loss = loss + self.balance_weight * parts.get("balance", 0.0)
            loss = loss + self.appearance_weight * parts.get("appearance", 0.0)
            loss.backward()
            aux_box.update(aux, parts=parts)
            return loss

        loss = self.optimizer.step(closure)
        for name, value in aux_box["parts"].items():
            self.parts[name] = self.parts.get(name, 0.0) + float(value.detach()) * len(x)
        self.part_count += len(x)
        if isinstance(self.model, MoEGaze) and self.model.balance == "rebalance":
            self.model.rebalance_step(
                aux_box["appearance"].detach(), aux_box["router_probs"].detach()
            )
        return float(loss.detach())

    def pop_parts(self) -> dict:
        """Mean of each loss term since the last call (for the epoch record)."""
        out = {f"train_{k}": v / max(self.part_count, 1) for k, v in self.parts.items()}
        self.parts, self.part_count = {}, 0
        return out


@torch.no_grad()
def predict_set(model: nn.Module, data: GazeSet, device, batch_size: int = 256) -> dict:
    """Eval-mode predictions (N,2) and, for MoEGaze, router weights (N,K) of a whole set."""
    model.eval()
    preds, weights = [], []
    for x, _ in data.batches(batch_size, 0, 0, shuffle=False):
        out = model(x.to(device), return_aux=True)
        preds.append(out[0].cpu())
        if "router_weights" in out[1]:
            weights.append(out[1]["router_weights"].cpu())
    return {"pred": torch.cat(preds), "weights": torch.cat(weights) if weights else None}


def error_stats(pred: torch.Tensor, true: torch.Tensor) -> dict:
    """Mean and median angular error (degrees) between pitch-yaw predictions and labels."""
    err = torch.as_tensor(angular_error_deg(pred, true)).float()
    return {"mean_deg": float(err.mean()), "median_deg": float(err.median())}


def router_stats(weights: torch.Tensor | None, subject: torch.Tensor) -> dict:
    """Load per expert (mean weight), top-1 share, sharpness (mean max weight), subject purity."""
    if weights is None:
        return {}
    k = weights.shape[1]
    top = weights.argmax(dim=1)
    share = torch.bincount(top, minlength=k).float() / len(top)
    purities = []
    for s in subject.unique():
        counts = torch.bincount(top[subject == s], minlength=k)
        purities.append(float(counts.max()) / float(counts.sum()))
    return {
        "load": weights.mean(dim=0).tolist(),
        "top1_share": share.tolist(),
        "mean_max_weight": float(weights.max(dim=1).values.mean()),
        "subject_purity": sum(purities) / len(purities),
    }


def evaluate_set(model: nn.Module, data: GazeSet, device) -> dict:
    """Angular error statistics and router statistics of ``model`` on ``data``."""
    out = predict_set(model, data, device)
    return {**error_stats(out["pred"], data.gaze), **router_stats(out["weights"], data.subject)}


def init_router(model: nn.Module, data: GazeSet, device, seed: int, max_images: int = 2048) -> None:
    """k-means initialisation of MoEGaze's prototypes from training appearance embeddings."""
    if not isinstance(model, MoEGaze):
        return
    model.eval()
    idx = torch.randperm(len(data), generator=make_generator(seed, 7))[:max_images]
    emb = [model.embed(x.to(device)) for x, _ in data.subset(idx).batches(256, 0, 0, False)]
    model.init_prototypes(torch.cat(emb), seed=seed)
    model.train()


def train_gaze(
    cfg: GazeTrainConfig,
    data,
    out: str | Path,
    *,
    resume: bool = False,
    progress_bar: bool | None = None,
):
    """Train ``cfg.model`` on ``data.train``, evaluate on ``data.val`` and ``data.test``.

    ``data`` has GazeSet fields ``train``, ``val`` (held-out source subjects) and
    ``test`` (the target domain). Writes a run folder and returns (model, summary).
    """
    cfg.validate()
    run = RunDir(out, asdict(cfg), resume=resume)
    seed_everything(cfg.seed)
    device = resolve_device(cfg.device)
    model = build_model(cfg.model, **cfg.model_hparams()).to(device)
    init_router(model, data.train, device, cfg.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, cfg.epochs)
    trainer = GazeTrainer(
        model,
        optimizer,
        balance_weight=cfg.balance_weight,
        scheduler=scheduler,
        appearance_weight=cfg.appearance_weight,
        device=device,
        seed=cfg.seed,
        progress_bar=progress_bar,
        name=f"train {cfg.model}",
    )

    def on_epoch(epoch: int, m: nn.Module) -> dict:
        record = trainer.pop_parts()
        record["val_mean_deg"] = evaluate_set(m, data.val, device)["mean_deg"]
        record["target_mean_deg"] = evaluate_set(m, data.test, device)["mean_deg"]
        return record

    result = trainer.fit(
        lambda e: data.train.batches(cfg.batch_size, cfg.seed, e),
        cfg.epochs,
        run=run,
        on_epoch=on_epoch,
    )
    summary = finish_run(run, model, data, device, cfg)
    summary["train_seconds"] = result.seconds
    trained_epochs = max(len(result.history), 1)
    summary["train_images_per_s"] = len(data.train) * trained_epochs / max(result.seconds, 1e-9)
    run.write_summary(summary)
    return model, summary


def finish_run(run: RunDir, model: nn.Module, data, device, cfg: GazeTrainConfig) -> dict:
    """Final metrics of the trained model, the run's plots, and summary fields."""
    from genlab.gaze import plots

    test = evaluate_set(model, data.test, device)
    val = evaluate_set(model, data.val, device)
    train = evaluate_set(model, data.train, device)
    summary = {
        "model": cfg.model,
        "source": cfg.source,
        "target": cfg.target,
        "seed": cfg.seed,
        "fraction": cfg.fraction,
        "train_images": len(data.train),
        "target_mean_deg": test["mean_deg"],
        "target_median_deg": test["median_deg"],
        "val_mean_deg": val["mean_deg"],
        "train_mean_deg": train["mean_deg"],
        "router": {
            "source": {k: v for k, v in train.items() if "deg" not in k},
            "target": {k: v for k, v in test.items() if "deg" not in k},
        },
    }
    pred = predict_set(model, data.test, device)["pred"]
    plots.save_run_plots(run, data, pred, summary)
    if any(not math.isfinite(v) for v in (test["mean_deg"], val["mean_deg"])):
        raise DataError(f"{run.path}: non-finite evaluation error")
    return summary
