"""Measures of a trained model: sharpness, curvature, gradient noise, and their correlation.

Every name of measures.py's ``__all__`` (``MeasureConfig``, ``all_measures``,
``noise_trace``, ``hessian_trace``...) is re-exported here; per-sample gradients come
from the layers (ghost.py, ghost_rules.py), rank correlations from correlation.py.
"""

from genlab.optim.measures.measures import *  # noqa: F403 - the measures' public names
from genlab.optim.measures.measures import __all__  # noqa: F401
