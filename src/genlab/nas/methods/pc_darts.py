"""PC-DARTS (Xu et al., ICLR-20): partial channel connections and edge normalisation.

yuhuixu1993/PC-DARTS, ``model_search.py`` and ``train_search.py``: each mixed op runs its ops
on C/4 of the channels (the rest bypassed, max-pooled on reduction edges, then a channel
shuffle with 4 groups); per-edge betas (1e-3 N(0, 1)) softmaxed over each node's inputs scale
the edge outputs, and the derivation ranks edges by softmax(alpha) x beta. Alpha stays still
for the first 15 of 50 epochs (``if epoch >= 15``); alpha lr 6e-4 (2x DARTS' 3e-4), alpha
weight decay 1e-3, weight decay 3e-4; first order by default, ``--unrolled`` for second.
The supernet options are built by every space (genlab.nas.supernet.cells; NB201 after DrNAS'
partial-channel cell; edge normalisation in NB201 and everything in MobileNet is ours).
"""

from __future__ import annotations

from genlab.nas.methods.base import Method, register_method

PC_DARTS = register_method(Method(
    "pc-darts", "yuhuixu1993/PC-DARTS: model_search.py, train_search.py",
    "partial channels (K = 4) + edge normalisation, alpha frozen for the first 30% "
    "(Xu et al., ICLR-20)",
    supernet={"partial_channels": 4, "edge_norm": True, "arch_start": 15 / 50},
    w_weight_decay=3e-4, arch_weight_decay=0.0, arch_lr_scale=6e-4 / 3e-4, orders=(1, 2),
    ours="NB201 edge normalisation; MobileNet: partial channels on the skippable blocks",
    tuning=({}, {"supernet_params": {"partial_channels": 2}},
            {"supernet_params": {"partial_channels": 8}}),
    title="PC-DARTS"))
