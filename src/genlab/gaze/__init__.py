"""MoEGaze data side: gaze geometry, a procedural eye renderer with exact labels, and readers."""

from genlab.gaze.geometry import (
    NormalizedSample,
    angular_error_deg,
    normalize_sample,
    pitchyaw_to_vector,
    vector_to_pitchyaw,
)

__all__ = [
    "NormalizedSample",
    "angular_error_deg",
    "normalize_sample",
    "pitchyaw_to_vector",
    "vector_to_pitchyaw",
]
