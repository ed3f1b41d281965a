"""Gaze models: the ResNet baseline and MoEGaze (appearance-routed gaze experts).

Baseline (the paper's comparison): backbone -> MLP head -> (pitch, yaw) radians.
Its head has the same shape as one MoEGaze expert followed by the shared head,
so MoEGaze with K=1 and the baseline compute the same function class.

MoEGaze (our reconstruction of the AAAI-26 abstract; see genlab.gaze.routing)::

    f, maps = backbone(x)                                   shared ResNet features
    a = normalize(MLP([mean_hw, std_hw](maps[s])))          appearance embedding
    r = route(softmax(cos(a, p_1..K) / T))                  router weights, sum to 1
    z = sum_k r_k * expert_k(f)                             gaze features, experts batched
    gaze = head(z)                                          shared head -> (pitch, yaw)

Appearance branch (ours): channel mean and standard deviation of an early stage's
feature map (stage ``appearance_stage``, default 2 of 4): style statistics that
carry colour, texture and shape but little of where the iris is. By default the
branch reads that map through a stop-gradient and the router reads ``a`` through
a stop-gradient too, so ``a`` is learned only from the subject-contrastive loss
(appearance, not gaze) and the gaze loss shapes the backbone, prototypes, experts
and head. ``appearance_grad=True`` lets the gaze loss reach ``a``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError, require_choice, require_positive
from genlab.gaze.backbones import ResNetBackbone
from genlab.gaze.routing import (
    BALANCES,
    ROUTINGS,
    ExpertBank,
    kmeans,
    route,
    subject_contrastive_loss,
    switch_balance_loss,
)

MODELS = ("baseline", "moegaze")


def gaze_head(feat_dim: int) -> nn.Sequential:
    """The shared head: gaze features -> (pitch, yaw), one hidden layer."""
    return nn.Sequential(nn.Linear(feat_dim, feat_dim), nn.ReLU(), nn.Linear(feat_dim, 2))


def _mlp_head(in_dim: int, hidden: int, feat_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, feat_dim))


class GazeBaseline(nn.Module):
    """ResNet-18-style backbone + MLP head regressing (pitch, yaw) in radians."""

    def __init__(self, width: int = 16, gaze_feat_dim: int = 64, expert_hidden: int = 64):
        super().__init__()
        for name, v in (
            ("width", width),
            ("gaze_feat_dim", gaze_feat_dim),
            ("expert_hidden", expert_hidden),
        ):
            require_positive(name, v)
        self.hparams = {
            "width": width,
            "gaze_feat_dim": gaze_feat_dim,
            "expert_hidden": expert_hidden,
        }
        self.backbone = ResNetBackbone(width)
        self.features = _mlp_head(self.backbone.out_dim, expert_hidden, gaze_feat_dim)
        self.head = gaze_head(gaze_feat_dim)

    def forward(self, x: torch.Tensor, return_aux: bool = False, subjects=None):
        gaze = self.head(self.features(self.backbone(x)))
        if return_aux:
            return gaze, {"losses": {}}
        return gaze


class MoEGaze(nn.Module):
    """Backbone, appearance branch, cosine router over K prototypes, batched experts, head."""

    def __init__(
        self,
        width: int = 16,
        num_experts: int = 4,
        appearance_dim: int = 32,
        gaze_feat_dim: int = 64,
        expert_hidden: int = 64,
        temperature: float = 0.1,
        routing: str = "soft",
        balance: str = "switch",
        appearance_stage: int = 2,
        appearance_grad: bool = False,
        contrastive_tau: float = 0.1,
        rebalance_momentum: float = 0.05,
    ):
        super().__init__()
        for name, v in (
            ("width", width),
            ("experts", num_experts),
            ("appearance_dim", appearance_dim),
            ("gaze_feat_dim", gaze_feat_dim),
            ("expert_hidden", expert_hidden),
            ("temperature", temperature),
            ("contrastive_tau", contrastive_tau),
        ):
            require_positive(name, v)
        require_choice("routing", routing, ROUTINGS)
        require_choice("balance", balance, BALANCES)
        if appearance_stage not in (1, 2, 3, 4):
            raise ConfigError(f"appearance_stage must be 1..4, got {appearance_stage}")
        self.hparams = {
            "width": width,
            "num_experts": num_experts,
            "appearance_dim": appearance_dim,
            "gaze_feat_dim": gaze_feat_dim,
            "expert_hidden": expert_hidden,
            "temperature": temperature,
            "routing": routing,
            "balance": balance,
            "appearance_stage": appearance_stage,
            "appearance_grad": appearance_grad,
            "contrastive_tau": contrastive_tau,
            "rebalance_momentum": rebalance_momentum,
        }
        self.num_experts, self.temperature = num_experts, temperature
        self.routing, self.balance = routing, balance
        self.appearance_stage, self.appearance_grad = appearance_stage, appearance_grad
        self.contrastive_tau, self.rebalance_momentum = contrastive_tau, rebalance_momentum
        self.backbone = ResNetBackbone(width)
        style_dim = 2 * self.backbone.widths[appearance_stage - 1]
        self.appearance = nn.Sequential(
            nn.Linear(style_dim, 2 * appearance_dim),
            nn.ReLU(),
            nn.Linear(2 * appearance_dim, appearance_dim),
        )
        self.prototypes = nn.Parameter(
            torch.randn(num_experts, appearance_dim), requires_grad=balance != "rebalance"
        )
        self.register_buffer("running_load", torch.full((num_experts,), 1.0 / num_experts))
        self.experts = ExpertBank(num_experts, self.backbone.out_dim, expert_hidden, gaze_feat_dim)
        self.head = gaze_head(gaze_feat_dim)

    # -- pieces -------------------------------------------------------------------
    def appearance_embedding(self, maps: list[torch.Tensor]) -> torch.Tensor:
        """Unit appearance embedding from the channel mean/std of one stage's feature map."""
        fmap = maps[self.appearance_stage - 1]
        if not self.appearance_grad:
            fmap = fmap.detach()
        style = torch.cat([fmap.mean(dim=(2, 3)), fmap.flatten(2).std(dim=2)], dim=1)
        return F.normalize(self.appearance(style), dim=1)

    def router_probs(self, appearance: torch.Tensor) -> torch.Tensor:
        """softmax(cos(a, p_k) / T) over the K prototypes."""
        sims = appearance @ F.normalize(self.prototypes, dim=1).T
        return torch.softmax(sims / self.temperature, dim=1)

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Appearance embeddings of a batch (eval-mode features; for k-means and plots)."""
        _, maps = self.backbone(x, return_stages=True)
        return self.appearance_embedding(maps)

    @torch.no_grad()
    def init_prototypes(self, embeddings: torch.Tensor, seed: int = 0) -> torch.Tensor:
        """Set the prototypes to the k-means centroids of ``embeddings`` (N, appearance_dim)."""
        if embeddings.ndim != 2 or embeddings.shape[1] != self.prototypes.shape[1]:
            raise ConfigError(
                f"init_prototypes expects (N, {self.prototypes.shape[1]}) embeddings, "
                f"got {tuple(embeddings.shape)}"
            )
        centroids = kmeans(embeddings, self.num_experts, seed=seed)
        self.prototypes.copy_(centroids)
        self.running_load.fill_(1.0 / self.num_experts)
        return centroids

    # -- forward ------------------------------------------------------------------
    def forward(
        self, x: torch.Tensor, return_aux: bool = False, subjects: torch.Tensor | None = None
    ):
        feats, maps = self.backbone(x, return_stages=True)
        appearance = self.appearance_embedding(maps)
        router_in = appearance if self.appearance_grad else appearance.detach()
        soft = self.router_probs(router_in)
        weights = route(soft, self.routing, self.training)
        z = torch.einsum("nk,nkg->ng", weights, self.experts(feats))
        gaze = self.head(z)
        if not return_aux:
            return gaze
        losses = {}
        if self.balance == "switch":
            losses["balance"] = switch_balance_loss(soft)
        if subjects is not None:
            losses["appearance"] = subject_contrastive_loss(
                appearance, subjects, self.contrastive_tau
            )
        aux = {
            "router_weights": weights,
            "router_probs": soft,
            "appearance": appearance,
            "losses": losses,
        }
        return gaze, aux

    @torch.no_grad()
    def rebalance_step(self, appearance: torch.Tensor, probs: torch.Tensor) -> None:
        """Prototype re-balancing (balance="rebalance"): online k-means + starved re-seeding."""
        k, m = self.num_experts, self.rebalance_momentum
        assign = probs.argmax(dim=1)
        load = torch.bincount(assign, minlength=k).float() / len(assign)
        self.running_load.mul_(1 - m).add_(m * load)
        for j in range(k):
            members = appearance[assign == j]
            if len(members):
                self.prototypes[j].mul_(1 - m).add_(m * members.mean(dim=0))
        starved = torch.nonzero(self.running_load < 1.0 / (4 * k)).flatten()
        if len(starved):
            coverage = probs.max(dim=1).values
            worst = torch.argsort(coverage)[: len(starved)]
            self.prototypes[starved] = appearance[worst]
            self.running_load[starved] = 1.0 / k


def build_model(name: str, **hparams) -> nn.Module:
    """A gaze model by name ("baseline" or "moegaze") from its hyper-parameters."""
    require_choice("model", name, MODELS)
    if name == "baseline":
        keep = {
            k: v for k, v in hparams.items() if k in ("width", "gaze_feat_dim", "expert_hidden")
        }
        return GazeBaseline(**keep)
    return MoEGaze(**hparams)
