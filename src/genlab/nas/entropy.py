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

from genlab.core.data_parallel import batch_moments
from genlab.core.errors import ConfigError


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
    var = flat.var(dim=0, unbiased=True)
    return 0.5 * torch.log(math.pi * math.e * var + 1).mean()


def gaussian_batch_entropy(t: torch.Tensor) -> torch.Tensor:
    """genlab's earlier estimator, mean_j 0.5 ln(2 pi e v_j + 1) (population variance).

    Under torchrun, inside ``genlab.core.data_parallel.global_batch_statistics``, v_j is the
    variance of the global batch (the data-parallel search's regulariser).
    """
    _, var = batch_moments(_units(t), [0])
    return 0.5 * torch.log(2 * math.pi * math.e * var + 1).mean()

