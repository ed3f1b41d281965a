"""Zero-cost proxies: rankings of untrained networks that the field compares proxies with.

Each entry of ``ZERO_COST`` scores one freshly initialised network (higher = predicted
better); the data-dependent ones read one batch of training images. Definitions, checked
against the authors' code (the Conv2d and Linear weights are the scored layers everywhere):

- ``params``: trainable parameters (NAS-Bench-201's count, no auxiliary head).
- ``synflow`` (Tanaka et al., NeurIPS 2020; as mohsaied/zero-cost-nas computes it): a copy of
  the network in float64 with its BatchNorm layers removed and every parameter replaced by
  its absolute value; R = sum of the outputs for one all-ones input; score = sum over weights
  of |theta * dR/dtheta|. Data-free.
- ``snip`` (Lee et al., ICLR 2019; zero-cost-nas): cross-entropy on the batch in train mode;
  score = sum over weights of |theta * dL/dtheta| (the gradient with respect to a mask of
  ones on each weight).
- ``nwot`` (Mellor et al., ICML 2021, BayesWatch/nas-without-training): the binary code of
  each image is the sign pattern (x > 0) of the inputs of every ReLU module;
  K = sum over ReLUs of (c c^T + (1 - c)(1 - c)^T), the number of units on which two images
  agree; score = log|det K| (slogdet).
- ``zico`` (Li et al., ICLR 2023, SLDGroup/ZiCo): the batch split in ``ZICO_SPLITS`` parts;
  each part's cross-entropy gradient g_b of every weight (train mode, gradients zeroed
  between parts); per layer, over the weights whose std over the parts is not 0,
  s = sum(mean_b |g_b| / std_b g_b) (population std); score = sum over layers with s > 0 of
  log s.

The batch: ``BATCH`` training images of the data set, a seeded choice (NWOT's batch size on
NB201; snip and ZiCo read the same images, ZiCo as two halves of 64, its paper's batch).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.registry import Registry
from genlab.nas.spaces.nb201.network import count_parameters

BATCH = 128
ZICO_SPLITS = 2
Scorer = Callable[[nn.Module, torch.Tensor, torch.Tensor], float]


@dataclass(frozen=True)
class ZeroCostProxy:
    """A registered zero-cost proxy: ``score(net, images, labels)`` -> float (higher is
    predicted better); ``uses_data``: whether the images matter; ``source``: paper and code."""

    score: Scorer
    uses_data: bool
    source: str


ZERO_COST: Registry[ZeroCostProxy] = Registry("zero-cost proxy")


def scored_layers(net: nn.Module) -> list[nn.Module]:
    """The Conv2d and Linear layers, in module order: the layers every proxy scores."""
    return [m for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]


def params_score(net: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    return float(count_parameters(net))


def _without_batchnorm(net: nn.Module) -> nn.Module:
    """A deep copy of ``net`` whose BatchNorm layers are identities (zero-cost-nas' bn=False)."""
    twin = copy.deepcopy(net)
    for module in list(twin.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.modules.batchnorm._BatchNorm):
                setattr(module, child_name, nn.Identity())
    return twin


def synflow_score(net: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    twin = _without_batchnorm(net).double()
    with torch.no_grad():
        for p in twin.parameters():
            p.abs_()
    twin.zero_grad()
    ones = torch.ones((1, *images.shape[1:]), dtype=torch.float64)
    twin(ones).sum().backward()
    return _weight_times_gradient(twin)


def snip_score(net: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    net.train()
    net.zero_grad()
    F.cross_entropy(net(images), labels).backward()
    return _weight_times_gradient(net)


def _weight_times_gradient(net: nn.Module) -> float:
    """sum over the scored layers' weights of |theta * gradient| (synflow's and snip's sum)."""
    with torch.no_grad():
        return float(sum((m.weight * m.weight.grad).abs().sum() for m in scored_layers(net)
                         if m.weight.grad is not None))


def nwot_score(net: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    n = images.shape[0]
    kernel = torch.zeros(n, n, dtype=torch.float64)

    def hook(module, inputs, output):
        codes = (inputs[0].detach().reshape(n, -1) > 0).double()
        kernel.add_(codes @ codes.T + (1 - codes) @ (1 - codes).T)

    handles = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, nn.ReLU)]
    try:
        net.train()
        with torch.no_grad():
            net(images)
    finally:
        for h in handles:
            h.remove()
    return float(torch.linalg.slogdet(kernel)[1])


def zico_score(net: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    net.train()
    layers = scored_layers(net)
    grads: list[list[np.ndarray]] = [[] for _ in layers]
    for part in torch.tensor_split(torch.arange(images.shape[0]), ZICO_SPLITS):
        net.zero_grad()
        F.cross_entropy(net(images[part]), labels[part]).backward()
        for k, m in enumerate(layers):
            if m.weight.grad is not None:
                grads[k].append(m.weight.grad.detach().reshape(-1).double().numpy().copy())
    return zico_from_gradients(grads)


def zico_from_gradients(grads: list[list[np.ndarray]]) -> float:
    """ZiCo from each layer's per-part gradients (module docstring)."""
    score = 0.0
    for per_part in grads:
        if len(per_part) < 2:
            continue
        g = np.stack(per_part)
        std = g.std(axis=0)
        keep = std != 0
        total = float(np.sum(np.abs(g).mean(axis=0)[keep] / std[keep]))
        if total > 0:
            score += math.log(total)
    return score


ZERO_COST.register("params", ZeroCostProxy(params_score, False, "NAS-Bench-201 parameter count"))
ZERO_COST.register("synflow", ZeroCostProxy(
    synflow_score, False, "Tanaka et al., NeurIPS 2020; mohsaied/zero-cost-nas"))
ZERO_COST.register("snip", ZeroCostProxy(
    snip_score, True, "Lee et al., ICLR 2019; mohsaied/zero-cost-nas"))
ZERO_COST.register("nwot", ZeroCostProxy(
    nwot_score, True, "Mellor et al., ICML 2021; BayesWatch/nas-without-training"))
ZERO_COST.register("zico", ZeroCostProxy(
    zico_score, True, "Li et al., ICLR 2023; SLDGroup/ZiCo"))
