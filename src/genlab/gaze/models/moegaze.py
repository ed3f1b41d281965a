"""MoEGaze: appearance-routed gaze experts.

MoEGaze (our reconstruction of the AAAI-26 abstract; see genlab.gaze.models.routing)::

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
and head. ``router_grad=True`` lets the gaze loss reach ``a`` (the appearance MLP) while
the backbone map stays detached; ``appearance_grad=True`` removes both stop-gradients
(then the subject-contrastive loss also shapes the backbone).
``routing="oracle"`` replaces the router by the sample's true appearance cluster
(one-hot), where the data know it: the upper reference of appearance routing.
``regroup`` (called part-way through training when asked) groups the training subjects
by how the current model errs on them (genlab.gaze.models.residual_groups); from then on the
appearance loss is the cross-entropy of the router's logits against each sample's
group instead of the subject-contrastive loss, so the router learns to send people
with one image-to-gaze mapping to one expert.

``shared_expert=True`` (ours, after DeepSeekMoE's shared experts): a shared expert that
every image trains (the baseline's MLP, from the baseline's stream, so at initialisation
the model *is* the seed's baseline) plus the routed experts, whose output layers start at
zero: z = shared(f) + sum_k r_k expert_k(f). The common mapping is learnt from all the
data; each routed expert holds only its group's correction.

Paired initialisation: see genlab.gaze.models.gaze_model.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import normalized_mutual_info_score
from torch import nn

from genlab.core.errors import ConfigError, DataError, require_positive
from genlab.core.parallel.data_parallel import gather_batch
from genlab.gaze.data.gazeset import GazeLabels
from genlab.gaze.data.splits import ordered_batches
from genlab.gaze.metrics import predict
from genlab.gaze.models.gaze_model import (
    GazeModel,
    GazeOutput,
    gaze_head,
    mlp,
    seeded,
    seeded_backbone,
)
from genlab.gaze.models.residual_groups import group_subjects, lookup_groups
from genlab.gaze.models.routing import (
    BALANCES,
    ROUTINGS,
    AppearanceEncoder,
    ExpertBank,
    kmeans,
    route,
    subject_contrastive_loss,
    switch_balance_loss,
)

ROUTER_INPUTS = ("style", "encoder")


def _checked_modes(h: dict):
    """The routing and balance modes of MoEGaze's settings ``h`` (its hparams), after
    checking the sizes, the appearance stage, the router's input and group training."""
    for name, key in (("width", "width"), ("experts", "num_experts"),
                      ("appearance_dim", "appearance_dim"), ("gaze_feat_dim", "gaze_feat_dim"),
                      ("expert_hidden", "expert_hidden"), ("temperature", "temperature"),
                      ("contrastive_tau", "contrastive_tau")):
        require_positive(name, h[key])
    route_mode, balance_mode = ROUTINGS.get(h["routing"]), BALANCES.get(h["balance"])
    if h["appearance_stage"] not in (1, 2, 3, 4):
        raise ConfigError(f"appearance_stage must be 1..4, got {h['appearance_stage']}")
    if h["router_input"] not in ROUTER_INPUTS:
        raise ConfigError(f"router_input must be one of {', '.join(ROUTER_INPUTS)}, "
                          f"got {h['router_input']!r}")
    if h["group_train"] and (route_mode.oracle or route_mode.hard_train):
        raise ConfigError(f"group_train sends training images to their group's expert; "
                          f"it needs routing 'soft' (inference), got {h['routing']!r}")
    return route_mode, balance_mode


class MoEGaze(GazeModel):
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
        router_grad: bool = False,
        contrastive_tau: float = 0.1,
        rebalance_momentum: float = 0.05,
        stem: str = "small",
        input_norm: str = "half",
        router_input: str = "style",
        group_train: bool = False,
        shared_expert: bool = False,
        init_seed: int = 0,
    ):
        super().__init__()
        self.hparams = {
            "width": width, "num_experts": num_experts, "appearance_dim": appearance_dim,
            "gaze_feat_dim": gaze_feat_dim, "expert_hidden": expert_hidden,
            "temperature": temperature, "routing": routing, "balance": balance,
            "appearance_stage": appearance_stage, "appearance_grad": appearance_grad,
            "router_grad": router_grad, "contrastive_tau": contrastive_tau,
            "rebalance_momentum": rebalance_momentum,
            "stem": stem, "input_norm": input_norm, "router_input": router_input,
            "group_train": group_train, "shared_expert": shared_expert,
        }
        self.route_mode, self.balance_mode = _checked_modes(self.hparams)
        self.num_experts, self.temperature = num_experts, temperature
        self.routing, self.balance = routing, balance
        self.appearance_stage, self.appearance_grad = appearance_stage, appearance_grad
        self.router_grad = router_grad
        self.router_input, self.group_train = router_input, group_train
        self.contrastive_tau, self.rebalance_momentum = contrastive_tau, rebalance_momentum
        # each part from its own seeded stream; this order fixes the state_dict's keys
        self.backbone = seeded_backbone(width, stem, input_norm, init_seed)
        style_dim = self._build_encoder(init_seed)
        self._build_experts(init_seed, expert_hidden, gaze_feat_dim, shared_expert)
        self.head = seeded(init_seed, 3, lambda: gaze_head(gaze_feat_dim))
        self.appearance = seeded(init_seed, 4, lambda: mlp(style_dim, 2 * appearance_dim,
                                                            appearance_dim))
        self.prototypes = nn.Parameter(
            seeded(init_seed, 5, lambda: torch.randn(num_experts, appearance_dim)),
            requires_grad=not self.balance_mode.rebalance,
        )
        self.register_buffer("running_load", torch.full((num_experts,), 1.0 / num_experts))
        # residual groups of the training subjects (empty until regroup is called)
        self.register_buffer("group_ids", torch.zeros(0, dtype=torch.long))
        self.register_buffer("group_of_id", torch.zeros(0, dtype=torch.long))

    def _build_encoder(self, init_seed: int) -> int:
        """The router's own image reader where ``router_input`` is "encoder" (stream 6);
        the width of what the appearance MLP reads (the style of the backbone's stage, or
        the encoder's output)."""
        self.encoder = None
        if self.router_input != "encoder":
            return 2 * self.backbone.widths[self.appearance_stage - 1]
        self.encoder = seeded(init_seed, 6, AppearanceEncoder)
        return AppearanceEncoder.out_dim

    def _build_experts(self, init_seed: int, expert_hidden: int, gaze_feat_dim: int,
                       shared_expert: bool) -> None:
        """The routed experts (stream 2) and, with ``shared_expert``, the shared one: the
        baseline's MLP (its stream, its shape) with the routed experts' output layers at
        zero, so the model starts as the seed's baseline."""
        out_dim = self.backbone.out_dim
        self.experts = seeded(init_seed, 2, lambda: ExpertBank(self.num_experts, out_dim,
                                                               expert_hidden, gaze_feat_dim))
        self.shared = None
        if shared_expert:
            self.shared = seeded(init_seed, 2, lambda: mlp(out_dim, expert_hidden,
                                                           gaze_feat_dim))
            with torch.no_grad():
                self.experts.w2.zero_()
                self.experts.b2.zero_()

    # -- pieces -------------------------------------------------------------------
    def appearance_embedding(self, maps: list[torch.Tensor],
                             x: torch.Tensor | None = None) -> torch.Tensor:
        """Unit appearance embedding from the channel mean/std of one stage's feature map
        (``router_input="encoder"``: of the router's own encoder, which reads ``x``)."""
        if self.encoder is not None:
            return F.normalize(self.appearance(self.encoder(x)), dim=1)
        fmap = maps[self.appearance_stage - 1]
        if not self.appearance_grad:
            fmap = fmap.detach()
        style = torch.cat([fmap.mean(dim=(2, 3)), fmap.flatten(2).std(dim=2)], dim=1)
        return F.normalize(self.appearance(style), dim=1)

    def router_probs(self, appearance: torch.Tensor) -> torch.Tensor:
        """softmax(cos(a, p_k) / T) over the K prototypes."""
        sims = appearance @ F.normalize(self.prototypes, dim=1).T
        return torch.softmax(sims / self.temperature, dim=1)

    def oracle_weights(self, labels: GazeLabels | None, n: int) -> torch.Tensor:
        """One-hot weights of each sample's true appearance cluster (routing="oracle")."""
        if labels is None:
            raise ConfigError("routing 'oracle' needs each sample's appearance cluster; "
                              "predict through outputs(x, labels)")
        c = labels.cluster
        if len(c) != n or bool(((c < 0) | (c >= self.num_experts)).any()):
            raise DataError(f"routing 'oracle' needs clusters in 0..{self.num_experts - 1} "
                            f"(experts = clusters); got values {sorted(set(c.tolist()))[:6]}")
        return F.one_hot(c, self.num_experts).float()

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Appearance embeddings of a batch (for k-means and plots)."""
        _, maps = self.backbone(x, return_stages=True)
        return self.appearance_embedding(maps, x)

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

    # -- the GazeModel interface -------------------------------------------------
    def outputs(self, x: torch.Tensor, labels: GazeLabels | None = None) -> GazeOutput:
        feats, maps = self.backbone(x, return_stages=True)
        appearance = self.appearance_embedding(maps, x)
        router_in = appearance if (self.appearance_grad or self.router_grad) else (
            appearance.detach())
        soft = self.router_probs(router_in)
        losses = {}
        if self.route_mode.oracle:
            weights = self.oracle_weights(labels, len(x))
        elif self.group_train and self.training:  # each image to its group's expert
            weights = F.one_hot(self.training_groups(labels), self.num_experts).float()
        else:
            weights = route(soft, self.routing, self.training)
            if self.balance_mode.loss and not self.group_train:  # groups set the load
                losses["balance"] = switch_balance_loss(soft)
        z = torch.einsum("nk,nkg->ng", weights, self.experts(feats))
        if self.shared is not None:
            z = z + self.shared(feats)
        if labels is not None and len(self.group_ids):
            if self.training:  # groups are known for training subjects only
                group = lookup_groups(self.group_ids, self.group_of_id, labels.subject)
                sims = appearance @ F.normalize(self.prototypes, dim=1).T
                losses["appearance"] = F.cross_entropy(sims / self.temperature, group)
        elif labels is not None:
            losses["appearance"] = subject_contrastive_loss(
                appearance, labels.subject, self.contrastive_tau
            )
        return GazeOutput(self.head(z), losses, weights, soft, appearance)

    def training_groups(self, labels: GazeLabels | None) -> torch.Tensor:
        """The sub-dataset (group) of each training sample's subject (group_train)."""
        if labels is None or not len(self.group_ids):
            raise ConfigError("group_train: training needs the subjects' groups (set_groups) "
                              "and each sample's labels")
        return lookup_groups(self.group_ids, self.group_of_id, labels.subject)

    @torch.no_grad()
    def set_groups(self, ids: torch.Tensor, groups: torch.Tensor) -> None:
        """Fix the training subjects' groups (sorted ``ids``; group of each in 0..K-1):
        the router's logits are then trained to name each sample's group, and with
        ``group_train`` each training image goes to its group's expert."""
        if len(ids) != len(groups) or (len(ids) > 1 and bool((ids[1:] <= ids[:-1]).any())):
            raise DataError("set_groups needs sorted, distinct subject ids and one group each")
        if len(groups) and (int(groups.min()) < 0 or int(groups.max()) >= self.num_experts):
            raise DataError(f"groups must lie in 0..{self.num_experts - 1}, got "
                            f"{int(groups.min())}..{int(groups.max())}")
        device = self.prototypes.device
        self.group_ids = ids.to(device=device, dtype=torch.long)
        self.group_of_id = groups.to(device=device, dtype=torch.long)

    def expert_predictions(self, x: torch.Tensor) -> torch.Tensor:
        """(pitch, yaw) of every sample through every expert alone: (N, K, 2)."""
        feats = self.backbone(x)
        z = self.experts(feats)
        if self.shared is not None:
            z = z + self.shared(feats)[:, None, :]
        return self.head(z)

    @torch.no_grad()
    def prepare(self, data, device, seed: int, batch_size: int = 256,
                max_images: int = 2048) -> None:
        """Prototypes from training appearance embeddings: k-means centroids, or with the
        subjects' groups set (set_groups) each group's mean embedding."""
        was_training = self.training
        self.eval()
        pick = np.sort(np.random.default_rng([seed, 7]).permutation(len(data))[:max_images])
        batches = (pick[b] for b in ordered_batches(len(pick), batch_size))
        emb, subjects = [], []
        for x, labels in data.load(batches):
            emb.append(self.embed(x.to(device)))
            subjects.append(labels.subject)
        emb = torch.cat(emb)
        if len(self.group_ids):
            group = lookup_groups(self.group_ids.cpu(), self.group_of_id.cpu(),
                                  torch.cat(subjects)).to(emb.device)
            self.prototypes_from_groups(emb, group)
        else:
            self.init_prototypes(emb, seed=seed)
        self.train(was_training)

    @torch.no_grad()
    def prototypes_from_groups(self, emb: torch.Tensor, group: torch.Tensor) -> None:
        """Each prototype to its group's mean appearance embedding (empty groups keep theirs)."""
        for j in range(self.num_experts):
            if bool((group == j).any()):
                self.prototypes[j] = F.normalize(emb[group == j].mean(dim=0), dim=0)
        self.running_load.fill_(1.0 / self.num_experts)

    @torch.no_grad()
    def regroup(self, data, device, seed: int, batch_size: int = 256) -> dict:
        """Group the training subjects by their residuals under the current model; set each
        prototype to its group's mean appearance (router logits are then trained against
        the groups). Returns the group sizes (and the groups' NMI with the true appearance
        clusters where the data know them)."""
        pred = predict(self, data, device, batch_size).gaze
        labels = data.labels
        ids, groups = group_subjects(pred, labels.gaze, labels.subject, self.num_experts, seed)
        self.group_ids = ids.to(self.prototypes.device)
        self.group_of_id = groups.to(self.prototypes.device)
        sample_group = lookup_groups(ids, groups, labels.subject)
        was_training = self.training
        self.eval()
        emb = torch.cat([self.embed(x.to(device)).cpu() for x, _ in
                         data.load(ordered_batches(len(data), batch_size))])
        self.train(was_training)
        self.prototypes_from_groups(emb, sample_group)
        stats = {"group_sizes": torch.bincount(groups, minlength=self.num_experts).tolist()}
        if bool((labels.cluster >= 0).all()):
            stats["group_cluster_nmi"] = float(normalized_mutual_info_score(
                labels.cluster.numpy(), sample_group.numpy()))
        return stats

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("group_ids", "group_of_id"):  # sized by the data: adopt the saved size
            key = prefix + name  # checkpoints written before residual groups have none
            state_dict.setdefault(key, torch.zeros(0, dtype=torch.long))
            setattr(self, name, torch.empty_like(state_dict[key]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def after_step(self, out: GazeOutput) -> None:
        if self.balance_mode.rebalance and not self.route_mode.oracle:
            # the global batch's assignments under torchrun (identical prototypes everywhere)
            self.rebalance_step(gather_batch(out.appearance.detach()),
                                gather_batch(out.router_probs.detach()))

    @torch.no_grad()
    def rebalance_step(self, appearance: torch.Tensor, probs: torch.Tensor) -> None:
        """Prototype re-balancing (balance "rebalance"): online k-means + starved re-seeding."""
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
