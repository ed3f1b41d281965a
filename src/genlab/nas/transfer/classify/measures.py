"""What an ImageNet run reports besides the network's size (genlab.nas.supernet.model_cost):

- ``topk_correct(logits, targets, ks)``: per k, how many targets are among the k largest
  logits (k above the class count is the class count: every target is then counted).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def topk_correct(logits: torch.Tensor, targets: torch.Tensor, ks: Sequence[int]) -> list[int]:
    """How many rows have their target among their ``k`` largest logits, for each k."""
    kmax = min(max(ks), logits.shape[1])
    top = logits.topk(kmax, dim=1).indices  # (n, kmax), largest first
    hit = top == targets.view(-1, 1)
    return [int(hit[:, :min(k, kmax)].any(dim=1).sum()) for k in ks]
