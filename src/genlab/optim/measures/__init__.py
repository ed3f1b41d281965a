"""Measures of a trained model: sharpness, curvature, gradient noise, and their correlation.

The measures of measures.py (``MeasureConfig``, ``all_measures``, ``noise_trace``,
``hessian_trace``...) are re-exported here; per-sample gradients come from the layers
(ghost.py, ghost_rules.py), rank correlations from correlation.py.
"""

from genlab.optim.measures.hessian import (
    TraceEstimate,
    curvature_nonuniformity,
    hessian_top_eigenvalue,
    hessian_trace,
    hvp,
)
from genlab.optim.measures.measures import MEASURE_NAMES, MeasureConfig, all_measures
from genlab.optim.measures.per_sample import (
    gradient_diversity,
    gradient_noise_stats,
    minibatch_factor,
    minibatch_noise,
    noise_scale,
    noise_trace,
    per_sample_grads,
)
from genlab.optim.measures.sharpness import average_sharpness, worst_case_sharpness

__all__ = [
    "MEASURE_NAMES", "MeasureConfig", "TraceEstimate", "all_measures", "average_sharpness",
    "curvature_nonuniformity", "gradient_diversity", "gradient_noise_stats",
    "hessian_top_eigenvalue", "hessian_trace", "hvp", "minibatch_factor", "minibatch_noise",
    "noise_scale", "noise_trace", "per_sample_grads", "worst_case_sharpness",
]
