"""SDARTS (Chen & Hsieh, ICML-20): the weight step on perturbed mixing weights (RS and ADV).

Source: xiangning-chen/SmoothDARTS, ``attacker/perturb.py`` (``Random_alpha``,
``Linf_PGD_alpha``), ``sota/cnn/model_search.py`` (``softmax_arch_parameters``, ``clip``) and
``sota/cnn/train_search.py`` (the loop and the epsilon schedule). Only the weight step
changes: after the alpha step, p = softmax(alpha) row by row is perturbed and the weights are
trained on the perturbed p used directly as the mixing weights; alpha itself never moves here
(upstream writes p into alpha and restores it after the step).

- **RS** (``random``): p + U[-eps, eps] per entry, then ``clip``.
- **ADV** (``adversarial``): L-inf PGD on p maximising the train loss, with the network in
  eval mode (upstream's ``model.eval()``): a uniform random start in [-eps, eps] and ``clip``,
  then 7 steps p <- p + (2 eps / 7) sign(grad_p L), each followed by the projection onto the
  eps-box around the original p and ``clip``; if the train loss before the attack exceeds the
  loss after it, the original p is kept.
- ``clip`` (upstream's, not a Euclidean projection onto the simplex): per row, remember the
  argmax, clamp every entry to [0, 1], set the argmax to 1 if the row is then all zero, and
  divide by the row sum.
- eps = 0.03 + (0.3 - 0.03) t, t = step / total (upstream: epoch / epochs, the proxy rule).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from genlab.nas.methods.base import PERTURBATIONS, Method, Perturbation, register_method


def clip_rows(p: torch.Tensor) -> torch.Tensor:
    """SDARTS' ``clip`` of every row of ``p`` (a new tensor): clamp to [0, 1], the row's
    argmax (taken before the clamp) set to 1 where the clamped row is all zero, divided by the
    row sum."""
    top = p.argmax(dim=-1, keepdim=True)
    q = p.clamp(0.0, 1.0)
    empty = q.sum(dim=-1, keepdim=True) == 0
    q = torch.where(empty & (torch.arange(q.shape[-1], device=q.device) == top), 1.0, q)
    return q / q.sum(dim=-1, keepdim=True)


def epsilon(step: int, total: int, eps_min: float = 0.03, eps_max: float = 0.3) -> float:
    """The perturbation radius at ``step`` of ``total``: eps_min + (eps_max - eps_min) t."""
    return eps_min + (eps_max - eps_min) * step / total


def softmax_weights(net) -> dict[str, torch.Tensor]:
    """softmax(alpha) of every alpha of ``net``, detached (upstream's
    ``softmax_arch_parameters``)."""
    return {name: torch.softmax(a.detach(), dim=-1) for name, a in net.alphas().items()}


def uniform_like(p: torch.Tensor, eps: float) -> torch.Tensor:
    """U[-eps, eps] noise of p's shape from the global generator (upstream's draw)."""
    return torch.zeros_like(p).uniform_(-eps, eps)


class RandomSmoothing(Perturbation):
    """SDARTS-RS: the weight step on clip(softmax(alpha) + U[-eps, eps])."""

    name = "random"

    def __init__(self, eps_min: float = 0.03, eps_max: float = 0.3, **params):
        super().__init__(eps_min=eps_min, eps_max=eps_max, **params)
        self.eps_min, self.eps_max = eps_min, eps_max

    def weights(self, net, batch, step: int, total: int) -> dict[str, torch.Tensor]:
        eps = epsilon(step, total, self.eps_min, self.eps_max)
        with torch.no_grad():
            return {name: clip_rows(p + uniform_like(p, eps))
                    for name, p in softmax_weights(net).items()}


def train_loss(net, weights: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor
               ) -> torch.Tensor:
    """Cross-entropy of ``net`` on (x, y) with ``weights`` as its mixing weights."""
    net.mixing_override = weights
    try:
        return F.cross_entropy(net(x), y)
    finally:
        net.mixing_override = None


class Adversarial(Perturbation):
    """SDARTS-ADV: the weight step on the L-inf PGD attack of softmax(alpha) (module doc)."""

    name = "adversarial"

    def __init__(self, eps_min: float = 0.03, eps_max: float = 0.3, attack_steps: int = 7,
                 random_start: bool = True, **params):
        super().__init__(eps_min=eps_min, eps_max=eps_max, attack_steps=attack_steps,
                         random_start=random_start, **params)
        self.eps_min, self.eps_max = eps_min, eps_max
        self.attack_steps, self.random_start = attack_steps, random_start
        self.last: dict | None = None  # the attack's train losses (before, after, kept)

    def weights(self, net, batch, step: int, total: int) -> dict[str, torch.Tensor]:
        return self.attack(net, batch, epsilon(step, total, self.eps_min, self.eps_max))

    def attack(self, net, batch, eps: float) -> dict[str, torch.Tensor]:
        """The attacked weights at radius ``eps`` (the network in eval mode meanwhile)."""
        x, y = batch
        training = net.training
        net.eval()
        try:
            saved = softmax_weights(net)
            with torch.no_grad():
                before = float(train_loss(net, saved, x, y))
            p = dict(saved)
            if self.random_start:
                p = {n: clip_rows(v + uniform_like(v, eps)) for n, v in p.items()}
            lr = 2 * eps / self.attack_steps if self.attack_steps else 0.0
            for _ in range(self.attack_steps):
                leaves = {n: v.clone().requires_grad_() for n, v in p.items()}
                loss = train_loss(net, leaves, x, y)
                grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
                with torch.no_grad():
                    for (n, v), g in zip(leaves.items(), grads, strict=True):
                        moved = v if g is None else v + lr * g.sign()
                        box = (moved - saved[n]).clamp(-eps, eps)
                        p[n] = clip_rows(saved[n] + box)
            with torch.no_grad():
                after = float(train_loss(net, p, x, y))
        finally:
            net.train(training)
        kept = before > after  # upstream keeps the original when the attack lowered the loss
        self.last = {"before": before, "after": after, "kept_original": kept}
        return saved if kept else p


PERTURBATIONS.register(RandomSmoothing.name, RandomSmoothing)
PERTURBATIONS.register(Adversarial.name, Adversarial)

SOURCE = ("xiangning-chen/SmoothDARTS: attacker/perturb.py, sota/cnn/model_search.py (clip), "
          "sota/cnn/train_search.py")
SDARTS_RS = register_method(Method(
    "sdarts-rs", SOURCE,
    "DARTS with the weight step on randomly perturbed softmax(alpha) (Chen & Hsieh, ICML-20)",
    perturb=RandomSmoothing.name,
    tuning=({}, {"perturb_params": {"eps_max": 0.1}}, {"perturb_params": {"eps_max": 0.6}}),
    title="SDARTS-RS"))
SDARTS_ADV = register_method(Method(
    "sdarts-adv", SOURCE,
    "DARTS with the weight step on the 7-step L-inf PGD attack of softmax(alpha) "
    "(Chen & Hsieh, ICML-20)", perturb=Adversarial.name,
    tuning=({}, {"perturb_params": {"eps_max": 0.1}}, {"perturb_params": {"eps_max": 0.6}}),
    title="SDARTS-ADV"))
