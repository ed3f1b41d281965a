"""DARTS- (Chu et al., ICLR-21): an auxiliary skip on every edge, its weight decayed 1 -> 0.

Meituan-AutoML/DARTS-, ``src/search/model_search.py`` (MixedOp: ``res += aux(x) * beta``,
aux = identity, or ``FactorizedReduce(C, C, affine=False)``, a module of its own per
stride-2 edge) and ``src/utils.py`` (DecayScheduler, ``linear``: beta = (T - epoch) / T, as
``scripts/run_darts_minus.sh`` runs it: ``--skip_beta 1 --decay linear --auxiliary_skip``,
first order). Here beta = 1 - step / steps (``SearchMethod.begin_step``). Alpha lr 3e-4 and
weight decay 1e-3 (``src/search/args.py``), weight decay 3e-4. MobileNet: ours (beta x x on
the skippable blocks, spaces.mobilenet.network).
"""

from __future__ import annotations

from genlab.nas.methods.base import Method, register_method

DARTS_MINUS = register_method(Method(
    "darts-minus", "Meituan-AutoML/DARTS-: src/search/model_search.py, src/utils.py",
    "auxiliary skip beta x aux(x) on every edge, beta 1 -> 0 linearly (Chu et al., ICLR-21)",
    supernet={"aux_skip": True}, w_weight_decay=3e-4, arch_weight_decay=0.0, orders=(1,),
    ours="MobileNet: beta x input added on the skippable blocks; the tuning grid (its beta "
         "schedule is fixed here)",
    tuning=({}, {"arch_weight_decay": 1e-3}, {"arch_weight_decay": 1e-2}),
    title="DARTS-"))
