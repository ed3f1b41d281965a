"""Entropy estimators of NAS: edge entropy of the architecture weights, batch entropy of features.

- ``edge_entropy(alpha)``: H(softmax(alpha_e)) = -sum_k p_ek ln p_ek per edge (row), natural log;
  log K for a uniform edge (log 5 = 1.609 on NAS-Bench-201), 0 for a one-hot edge.
- ``batch_entropy(t)``: the batch entropy of Peer et al., "Improving the Trainability of Deep
  Neural Networks through Layerwise Batch-Entropy Regularization" (TMLR 2022), exactly as in
  their official code (github.com/peerdavid/layerwise-batch-entropy, commit be2337b,
  experiment_fnn/batch_entropy.py lines 10-20; the same function is in every experiment
  folder): the tensor is flattened to (batch, units) and

      H_B(T) = mean_j 0.5 ln(pi e sigma_j^2 + 1),   sigma_j = std of unit j over the batch,

  with ``torch.std``'s default, the unbiased standard deviation (divisor n - 1). A batch of one
  sample has no spread to measure; their code raises, and so does this one.
- ``conditional_batch_entropy(t, labels)``: the same estimator with sigma_j^2 replaced by the
  pooled within-class variance of unit j (sum over classes of the squared deviations from the
  class mean, divided by n - c for the c classes present), and ``label_information(t, labels)``
  = H_B(T) - H_B(T | Y): a batch estimate of the information the units carry about the labels
  (ours, for the ber-ib candidate): 0 for a constant tensor, and nearly unchanged when T is
  rescaled while its variances stay well above 1/(pi e), because it then tends to the mean of
  0.5 ln(sigma_j^2 / s_j^2): it sees through BatchNorm, which resets H_B itself to ~1.13.
- ``gaussian_batch_entropy(t)``: the estimator genlab used before (ours; kept so that the
  regularisers and diagnostics built on it keep their numbers):

      H_G(T) = mean_j 0.5 ln(2 pi e v_j + 1),   v_j = population variance (divisor n),

  i.e. the differential entropy of a Gaussian, 0.5 ln(2 pi e v), shifted inside the log.
  Per unit, 2 pi e v_j = 2 (n - 1)/n * pi e sigma_j^2, so H_G - H_B is 0 for a constant unit and
  tends to 0.5 ln(2 (n - 1)/n) (0.339 nats at n = 64) when the variance is large: the two are
  not interchangeable, and a threshold tuned on one does not carry over to the other.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError
from genlab.core.parallel.data_parallel import (
    batch_moments,
    global_moments,
    global_statistics_active,
)


def edge_entropy(arch_params: torch.Tensor) -> torch.Tensor:
    """Entropy H(softmax(alpha_e)) of each edge (natural log), shape (|E|,)."""
    logp = F.log_softmax(arch_params, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def _units(t: torch.Tensor) -> torch.Tensor:
    """(batch, units) view of a feature tensor: every non-batch entry is one unit."""
    if t.dim() == 0:
        raise ConfigError("batch entropy needs a tensor with a batch dimension, got a scalar")
    return t.reshape(t.shape[0], -1)


def batch_entropy(t: torch.Tensor) -> torch.Tensor:
    """Peer et al.'s batch entropy: mean_j 0.5 ln(pi e sigma_j^2 + 1), sigma_j unbiased."""
    flat = _units(t)
    if flat.shape[0] < 2:
        raise ConfigError(f"batch entropy needs a batch of at least 2 samples, got a tensor of "
                          f"shape {tuple(t.shape)}")
    return _peer_entropy(flat.var(dim=0, unbiased=True))


def _peer_entropy(var: torch.Tensor) -> torch.Tensor:
    """mean_j 0.5 ln(pi e var_j + 1): Peer et al.'s estimate from per-unit unbiased variances."""
    return 0.5 * torch.log(math.pi * math.e * var + 1).mean()


def global_batch_entropy(t: torch.Tensor) -> torch.Tensor:
    """batch_entropy of the global batch: under torchrun, inside
    ``genlab.core.parallel.data_parallel.global_batch_statistics``, the unbiased variance of
    every rank's rows together (a collective: every rank calls it, with the same unit
    shapes); otherwise exactly ``batch_entropy(t)``."""
    if not global_statistics_active():
        return batch_entropy(t)
    _, var, n = global_moments(_units(t), None, [0])
    if n < 2:
        raise ConfigError(f"batch entropy needs a global batch of at least 2 samples, got {n:g}")
    return _peer_entropy(var * (n / (n - 1)))


def conditional_batch_entropy(t: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """H_B(T | Y): mean_j 0.5 ln(pi e s_j^2 + 1), s_j^2 the pooled within-class variance."""
    flat = _units(t)
    if labels.shape != (flat.shape[0],):
        raise ConfigError(f"conditional batch entropy needs one label per sample: tensor of "
                          f"shape {tuple(t.shape)}, labels of shape {tuple(labels.shape)}")
    classes, index = torch.unique(labels, return_inverse=True)
    dof = flat.shape[0] - classes.numel()
    if dof < 1:
        raise ConfigError(f"conditional batch entropy needs more samples than classes: "
                          f"{flat.shape[0]} samples, {classes.numel()} classes")
    onehot = F.one_hot(index, classes.numel()).to(flat.dtype)
    means = (onehot.T @ flat) / onehot.sum(0)[:, None]
    var_within = ((flat - means[index]) ** 2).sum(0) / dof
    return 0.5 * torch.log(math.pi * math.e * var_within + 1).mean()


def label_information(t: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """H_B(T) - H_B(T | Y): batch estimate of the information T carries about the labels."""
    return batch_entropy(t) - conditional_batch_entropy(t, labels)


def spatial_mean(t: torch.Tensor) -> torch.Tensor:
    """(batch, channels) spatial mean of a (batch, channels, height, width) feature map; any
    other tensor unchanged (ber-xu's units across space)."""
    return t.mean(dim=(2, 3)) if t.dim() == 4 else t


def gaussian_batch_entropy(t: torch.Tensor) -> torch.Tensor:
    """genlab's earlier estimator, mean_j 0.5 ln(2 pi e v_j + 1) (population variance).

    Under torchrun, inside
    ``genlab.core.parallel.data_parallel.global_batch_statistics``, v_j is the variance of
    the global batch (the data-parallel search's regulariser).
    """
    _, var = batch_moments(_units(t), [0])
    return 0.5 * torch.log(2 * math.pi * math.e * var + 1).mean()

