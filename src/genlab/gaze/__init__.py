"""MoEGaze: gaze geometry, a procedural eye renderer with exact labels, readers, models.

Sub-packages: ``synth`` (the renderer, subjects, domains and worlds), ``data`` (typed
labels, in-memory and streaming data sets, ETH-XGaze and GazeHub readers, splits),
``models`` (backbone, routing, the baseline, MoEGaze and their registry) and ``studies``
(the synthetic bench, the paper protocol, their tables and statistics). The names below
are imported on first use (``import genlab.gaze`` stays light: no OpenCV, no h5py).
"""

from __future__ import annotations

from genlab.gaze.exports import lazy_getattr

_EXPORTS = {
    "ETHXGaze": "genlab.gaze.data.xgaze",
    "write_xgaze_h5": "genlab.gaze.data.xgaze",
    "GazeHub": "genlab.gaze.data.gazehub",
    "subject_split": "genlab.gaze.data.splits",
    "take_fraction": "genlab.gaze.data.splits",
    "draw_gaze_arrows": "genlab.gaze.draw",
    "NormalizedSample": "genlab.gaze.geometry",
    "angular_error_deg": "genlab.gaze.geometry",
    "normalize_sample": "genlab.gaze.geometry",
    "pitchyaw_to_vector": "genlab.gaze.geometry",
    "vector_to_pitchyaw": "genlab.gaze.geometry",
    "DOMAINS": "genlab.gaze.synth.domains",
    "DomainSpec": "genlab.gaze.synth.traits",
    "SubjectTraits": "genlab.gaze.synth.traits",
    "sample_subjects": "genlab.gaze.synth.domains",
    "render_eyes": "genlab.gaze.synth.render",
    "SynthBatch": "genlab.gaze.synth.dataset",
    "SyntheticGaze": "genlab.gaze.synth.dataset",
    "iris_centre_check": "genlab.gaze.synth.dataset",
    "render_domain": "genlab.gaze.synth.dataset",
    "render_to_folder": "genlab.gaze.synth.dataset",
    "MODELS": "genlab.gaze.models.registry",
    "build_gaze_model": "genlab.gaze.models.registry",
    "GazeBaseline": "genlab.gaze.models.baseline",
    "MoEGaze": "genlab.gaze.models.moegaze",
    "GazeTrainConfig": "genlab.gaze.train",
    "train_gaze": "genlab.gaze.train",
    "load_task_data": "genlab.gaze.protocol",
    "evaluate_run": "genlab.gaze.evaluate",
    "load_run": "genlab.gaze.predict",
    "predict_file": "genlab.gaze.predict",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
