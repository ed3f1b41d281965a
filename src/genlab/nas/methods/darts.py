"""DARTS (Liu et al., ICLR-19) and beta-DARTS (Ye et al., CVPR-22): the relaxation, no other part.

DARTS: softmax mixing weights, first or second order, argmax derivation (quark0/darts,
``model_search.py``, ``architect.py``). beta-DARTS is DARTS with its Beta-Decay penalty on the
alpha side (genlab.nas.regularizers.baselines; Sunshine-Ye/Beta-DARTS).
"""

from __future__ import annotations

from genlab.nas.methods.base import Method, register_method

DARTS = register_method(Method(
    "darts", "quark0/darts: cnn/model_search.py, cnn/architect.py",
    "softmax relaxation, bilevel first or second order, argmax (Liu et al., ICLR-19)",
    tuning=({}, {"arch_weight_decay": 1e-3}, {"arch_weight_decay": 1e-2}),
    title="DARTS"))
BETA = register_method(Method(
    "beta", "Sunshine-Ye/Beta-DARTS: optimizers/darts/architect.py (beta-decay loss)",
    "DARTS + the Beta-Decay regulariser on alpha (Ye et al., CVPR-22)", reg="beta",
    tuning=({}, {"reg_strength": 20.0}, {"reg_strength": 100.0}),
    title="beta-DARTS"))
