"""``ber-batch``: BER on the feature side, the compression a cell performs.

Our reconstruction after the batch entropy of Peer et al. (TMLR 2022), with genlab's earlier
estimator, not theirs (genlab.nas.entropy): H_B(T) = mean_j 0.5 log(2 pi e Var_batch(T_j) + 1)
over the units j of a cell's output T (population variance); R = mean over cells of
relu(H_B(cell input) - H_B(cell output)). Same schedules as ber-kl. Applied to alpha only
(the architecture step); it reads the cells' inputs and outputs through the probe
genlab.nas.supernet.probe.CellPairs that the search passes to the supernet.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError
from genlab.nas.entropy import gaussian_batch_entropy
from genlab.nas.regularizers.base import Penalty, register_penalty
from genlab.nas.supernet.probe import CellPairs


@register_penalty
class CellCompression(Penalty):
    """ber-batch: mean over cells of the Gaussian batch entropy a cell loses."""

    name = "ber-batch"
    needs_probe = True

    def make_probe(self) -> CellPairs:
        return CellPairs()

    def penalty(self, alphas, probe=None, val_loss=None, labels=None) -> torch.Tensor:
        if not isinstance(probe, CellPairs) or not probe.pairs:
            raise ConfigError("ber-batch needs the cell inputs and outputs: pass the probe "
                              "from make_probe() to the supernet's forward")
        drops = [F.relu(gaussian_batch_entropy(i) - gaussian_batch_entropy(o))
                 for i, o in probe.pairs]
        return torch.stack(drops).mean()
