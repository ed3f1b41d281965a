"""Gaze models: the shared interface, the baseline, MoEGaze and the registry that names them."""

from genlab.gaze.models.baseline import GazeBaseline
from genlab.gaze.models.gaze_model import GazeModel, GazeOutput
from genlab.gaze.models.moegaze import MoEGaze
from genlab.gaze.models.registry import MODELS, ModelEntry, build_gaze_model

__all__ = ["MODELS", "GazeBaseline", "GazeModel", "GazeOutput", "ModelEntry", "MoEGaze",
           "build_gaze_model"]
