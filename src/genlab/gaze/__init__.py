"""MoEGaze: gaze geometry, a procedural eye renderer with exact labels, readers, models."""

from genlab.gaze.datasets import (
    ETHXGaze,
    GazeHub,
    SyntheticGaze,
    subject_split,
    take_fraction,
    write_xgaze_h5,
)
from genlab.gaze.draw import draw_gaze_arrows
from genlab.gaze.geometry import (
    NormalizedSample,
    angular_error_deg,
    normalize_sample,
    pitchyaw_to_vector,
    vector_to_pitchyaw,
)
from genlab.gaze.synth import (
    DOMAINS,
    DomainSpec,
    SubjectTraits,
    SynthBatch,
    iris_centre_check,
    render_domain,
    render_eyes,
    render_to_folder,
    sample_subjects,
)

__all__ = [
    "DOMAINS", "DomainSpec", "ETHXGaze", "GazeHub", "NormalizedSample", "SubjectTraits",
    "SynthBatch", "SyntheticGaze", "angular_error_deg", "draw_gaze_arrows",
    "iris_centre_check", "normalize_sample", "pitchyaw_to_vector", "render_domain",
    "render_eyes", "render_to_folder", "sample_subjects", "subject_split", "take_fraction",
    "vector_to_pitchyaw", "write_xgaze_h5",
]
