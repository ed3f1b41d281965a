"""R-DARTS (DP) (Zela et al., ICLR-20): DARTS with drop-path in the search, ramped to 0.6.

automl/RobustDARTS, ``src/search/model_search.py``: in training, ``drop_path`` on every edge's
mixed output (``sum(drop_path(self._ops[offset+j](h, w), drop_prob) ...)``, per-sample masks,
survivors scaled by 1 / (1 - p)); ``src/search/train_search.py``: p = max x epoch / (epochs - 1)
(here max x step / steps, ``SearchMethod.begin_step``); the grid of ``scripts/start_search.sh``
is {0, 0.2, 0.4, 0.6} and R-DARTS (DP) is its strongest, 0.6. Alpha lr 3e-4, alpha weight
decay 1e-3, weight decay 3e-4 (``src/search/args.py``); ``scripts/DARTS_search.sh`` runs
``--unrolled`` (second order). MobileNet: ours (the skippable blocks' residual branch).
"""

from __future__ import annotations

from genlab.nas.methods.base import Method, register_method

RDARTS_DP = register_method(Method(
    "rdarts-dp", "automl/RobustDARTS: src/search/model_search.py, src/search/train_search.py",
    "drop-path on every edge in the search, probability 0 -> 0.6 (Zela et al., ICLR-20)",
    supernet={"drop_path": 0.6}, w_weight_decay=3e-4, arch_weight_decay=0.0, orders=(1, 2),
    ours="MobileNet: drop-path on the skippable blocks' residual branch",
    tuning=({}, {"supernet_params": {"drop_path": 0.2}},
            {"supernet_params": {"drop_path": 0.4}}),
    title="R-DARTS (DP)"))
