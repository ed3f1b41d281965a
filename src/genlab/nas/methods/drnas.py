"""DrNAS (Chen et al., ICLR-21): mixing weights sampled from a Dirichlet over each row.

Source: xiangning-chen/DrNAS, ``201-space/search_model.py`` (``TinyNetwork.forward``),
``utils.py`` (``process_step_vector``), ``architect.py`` (the alpha optimiser) and
``201-space/train_search.py`` (defaults). Every forward, in training and in eval mode alike
(upstream's ``forward`` samples whatever the mode, its ``infer`` included), draws the mixing
weights of each row as a reparameterised sample (``rsample``) of
Dirichlet(ELU(alpha) + 1), so the weight and the alpha step each see a fresh draw. The
derivation is upstream's argmax of softmax(alpha) (the space's rule, unchanged: softmax and
ELU + 1 are both increasing); ``expected()`` is the Dirichlet mean, what the entropy
diagnostics read.

The regulariser of the default ``--reg_type l2`` is Adam's weight decay 1e-3 on alpha
(``reg_scale`` becomes the arch optimiser's ``weight_decay``). The alpha learning rate is
3e-4 in the 201-space search (``arch_lr_scale`` 1; the progressive DARTS-space search uses
6e-4). The progressive variant (two stages, partial channels, pruning 7 -> 4 ops) is not
built.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from genlab.nas.methods.base import RELAXATIONS, Method, Relaxation, register_method


def concentration(alpha: torch.Tensor) -> torch.Tensor:
    """The Dirichlet concentration of every row: ELU(alpha) + 1 (positive)."""
    return F.elu(alpha) + 1


class Dirichlet(Relaxation):
    """A reparameterised Dirichlet(ELU(alpha) + 1) sample per row, on every forward."""

    name = "dirichlet"

    def __call__(self, name: str, alpha: torch.Tensor, training: bool) -> torch.Tensor:
        return torch.distributions.Dirichlet(concentration(alpha)).rsample()

    def expected(self, name: str, alpha: torch.Tensor) -> torch.Tensor:
        c = concentration(alpha.detach())
        return c / c.sum(dim=-1, keepdim=True)


RELAXATIONS.register(Dirichlet.name, Dirichlet)

DRNAS = register_method(Method(
    "drnas", "xiangning-chen/DrNAS: 201-space/search_model.py, utils.py "
             "(process_step_vector), architect.py, 201-space/train_search.py",
    "Dirichlet(ELU(alpha) + 1) mixing weights by rsample, L2 on alpha by Adam weight decay "
    "1e-3 (Chen et al., ICLR-21)",
    relaxation=Dirichlet.name, arch_weight_decay=1e-3,
    tuning=({}, {"arch_weight_decay": 1e-4}, {"arch_weight_decay": 1e-2}),
    title="DrNAS"))
