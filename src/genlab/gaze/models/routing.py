"""MoEGaze routing pieces: k-means, batched experts, routing modes, auxiliary losses.

All of this is our reconstruction from the MoEGaze abstract (AAAI-26; no code or
full text is public); each choice is a flag of :class:`genlab.gaze.models.moegaze.MoEGaze`.

Router (ours): with appearance embedding ``a`` (unit norm) and K prototypes ``p_k``,
``s_k = cos(a, p_k)`` and ``r = softmax(s / T)``; r sums to one.
Routing modes:

* ``soft``: z = sum_k r_k z_k in training and inference.
* ``hard-train-soft-infer``: in training the top-1 one-hot ``h`` replaces r with a
  straight-through estimator, ``r_st = h + r - stopgrad(r)``. Its value is one-hot,
  so each expert receives gaze-loss gradient only from the samples assigned to it
  (experts are trained on appearance sub-datasets), while the router still gets
  the gradient of the soft weights. Inference uses soft r.
* ``hard``: straight-through one-hot in training, one-hot in inference.
* ``oracle``: the sample's true appearance cluster, one-hot (synthetic appearance world
  only; the router is bypassed). A reference for what appearance routing can gain.

Load balancing (no capacity limit: no sample is ever dropped):

* ``switch``: Switch-Transformer auxiliary loss (Fedus et al., JMLR-22, eq. 4),
  ``L_bal = K * sum_k f_k P_k`` with f_k the fraction of the batch whose top-1
  prototype is k and P_k the mean router probability of k; 1 when balanced.
* ``rebalance``: prototypes are not learned by gradient; after each step they move
  (EMA, rate ``momentum``) to the mean appearance of the samples assigned to them
  (online k-means), and a prototype whose running load falls under 1/(4K) is
  re-seeded on the batch's least well-covered appearance.
* ``none``.

Appearance signal (ours): a supervised contrastive loss over training subjects
(Khosla et al., NeurIPS-20, eq. 2): embeddings of the same subject attract, others
repel, ``L_app = mean_i -1/|P(i)| sum_{p in P(i)} log softmax_j(a_i.a_j / tau)_p``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError, require_positive
from genlab.core.parallel.data_parallel import gather_batch
from genlab.core.registry import Registry
from genlab.core.seeding import make_generator


@dataclass(frozen=True)
class Routing:
    """How a routing mode mixes the experts: one-hot (straight-through) in training and/or
    in evaluation, or by the sample's true appearance cluster (``oracle``)."""

    hard_train: bool = False
    hard_eval: bool = False
    oracle: bool = False


@dataclass(frozen=True)
class Balance:
    """How a balance mode keeps the experts in use: the Switch loss and/or prototype
    re-balancing (online k-means, frozen prototypes)."""

    loss: bool = False
    rebalance: bool = False


ROUTINGS: Registry[Routing] = Registry("routing")
ROUTINGS.register("soft", Routing())
ROUTINGS.register("hard-train-soft-infer", Routing(hard_train=True))
ROUTINGS.register("hard", Routing(hard_train=True, hard_eval=True))
ROUTINGS.register("oracle", Routing(oracle=True))

BALANCES: Registry[Balance] = Registry("balance")
BALANCES.register("switch", Balance(loss=True))
BALANCES.register("rebalance", Balance(rebalance=True))
BALANCES.register("none", Balance())


def kmeans(x: torch.Tensor, k: int, *, iters: int = 100, seed: int = 0,
           restarts: int = 1) -> torch.Tensor:
    """Lloyd's k-means with k-means++ seeding; returns the (k, D) centroids. ``restarts``
    > 1 runs it from that many seedings and keeps the lowest within-cluster sum of squares
    (the first seeding is the one ``restarts=1`` uses)."""
    require_positive("k", k)
    require_positive("restarts", restarts)
    x = x.detach().float().cpu()  # seeded CPU draws: the same centroids on every device
    if x.shape[0] == 0:
        raise ConfigError("k-means needs at least one embedding, got none")
    best, best_cost = None, float("inf")
    for r in range(restarts):
        centroids = _lloyd(x, k, iters, make_generator(seed, r))
        cost = float(torch.cdist(x, centroids).min(dim=1).values.pow(2).sum())
        if cost < best_cost:
            best, best_cost = centroids, cost
    return best


def _lloyd(x: torch.Tensor, k: int, iters: int, g: torch.Generator) -> torch.Tensor:
    n = x.shape[0]
    centroids = x[torch.randint(n, (1,), generator=g)]
    while centroids.shape[0] < k:  # k-means++: draw proportional to squared distance
        d2 = torch.cdist(x, centroids).pow(2).min(dim=1).values
        probs = d2 / d2.sum() if d2.sum() > 0 else torch.full((n,), 1.0 / n)
        centroids = torch.cat([centroids, x[torch.multinomial(probs, 1, generator=g)]])
    assign = None
    for _ in range(iters):
        new_assign = torch.cdist(x, centroids).argmin(dim=1)
        if assign is not None and torch.equal(new_assign, assign):
            break
        assign = new_assign
        for j in range(k):
            members = x[assign == j]
            if len(members):
                centroids[j] = members.mean(dim=0)
            else:  # empty cluster: move it to the point farthest from its centroid
                far = torch.cdist(x, centroids).min(dim=1).values.argmax()
                centroids[j] = x[far]
    return centroids


class ExpertBank(nn.Module):
    """K two-layer MLP experts evaluated in one batched einsum: (N, D) -> (N, K, G)."""

    def __init__(self, num_experts: int, in_dim: int, hidden: int, out_dim: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(num_experts, in_dim, hidden))
        self.b1 = nn.Parameter(torch.empty(num_experts, hidden))
        self.w2 = nn.Parameter(torch.empty(num_experts, hidden, out_dim))
        self.b2 = nn.Parameter(torch.empty(num_experts, out_dim))
        for w, b, fan_in in ((self.w1, self.b1, in_dim), (self.w2, self.b2, hidden)):
            bound = 1.0 / math.sqrt(fan_in)  # nn.Linear's default range
            nn.init.uniform_(w, -bound, bound)
            nn.init.uniform_(b, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(torch.einsum("nd,kdh->nkh", x, self.w1) + self.b1)
        return torch.einsum("nkh,khg->nkg", h, self.w2) + self.b2

    def forward_one(self, x: torch.Tensor, k: int) -> torch.Tensor:
        """Expert ``k`` alone (reference for tests and per-expert analysis)."""
        h = torch.relu(x @ self.w1[k] + self.b1[k])
        return h @ self.w2[k] + self.b2[k]


class AppearanceEncoder(nn.Module):
    """A small CNN of its own that reads the image for the router (``router_input="encoder"``):
    three 3x3 stride-2 convolutions (16, 32, 32 channels) with batch norm and ReLU, then the
    channel mean and standard deviation of the last map: (N, 3, H, W) -> (N, 64)."""

    out_dim = 64

    def __init__(self):
        super().__init__()
        layers, c_in = [], 3
        for c_out in (16, 32, 32):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1, bias=False),
                       nn.BatchNorm2d(c_out), nn.ReLU()]
            c_in = c_out
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fmap = self.body(x - 0.5)
        return torch.cat([fmap.mean(dim=(2, 3)), fmap.flatten(2).std(dim=2)], dim=1)


def route(soft: torch.Tensor, mode: str, training: bool) -> torch.Tensor:
    """Mixing weights from soft router probabilities (N, K) for ``mode`` (rows sum to one)."""
    routing = ROUTINGS.get(mode) if mode in ROUTINGS else None
    if routing is None or routing.oracle:
        raise ConfigError(f"route: mode {mode!r} is not a router mode ("
                          + ", ".join(n for n, r in ROUTINGS.items() if not r.oracle) + ")")
    hard = routing.hard_train if training else routing.hard_eval
    if not hard:
        return soft
    onehot = F.one_hot(soft.argmax(dim=1), soft.shape[1]).to(soft.dtype)
    return onehot + soft - soft.detach() if training else onehot


def switch_balance_loss(soft: torch.Tensor) -> torch.Tensor:
    """K * sum_k f_k P_k (Switch Transformer): 1 when top-1 load and probability are uniform.

    f and P are fractions of the global batch under torchrun (genlab.core.parallel.data_parallel's
    gather_batch inside global_batch_statistics), so P processes balance what one balances.
    """
    soft = gather_batch(soft)
    k = soft.shape[1]
    f = F.one_hot(soft.argmax(dim=1), k).to(soft.dtype).mean(dim=0)
    p = soft.mean(dim=0)
    return k * (f * p).sum()


def subject_contrastive_loss(
    emb: torch.Tensor, subjects: torch.Tensor, tau: float = 0.1
) -> torch.Tensor:
    """Supervised contrastive loss of unit embeddings grouped by subject id (0 if no pairs).

    Anchors, positives and negatives come from the global batch under torchrun (see
    :func:`switch_balance_loss`): every pair one process would see.
    """
    emb, subjects = gather_batch(emb), gather_batch(subjects)
    n = emb.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=emb.device)
    logits = (emb @ emb.T / tau).masked_fill(eye, float("-inf"))
    log_prob = torch.log_softmax(logits, dim=1).masked_fill(eye, 0.0)
    pos = (subjects[:, None] == subjects[None, :]) & ~eye
    count = pos.sum(dim=1)
    has = count > 0
    if not has.any():
        return emb.sum() * 0.0
    per_anchor = -(log_prob * pos).sum(dim=1)[has] / count[has]
    return per_anchor.mean()
