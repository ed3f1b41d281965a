"""Gaze data: typed labels and data sets (GazeSet in memory, StreamingSet from disk), the
ETH-XGaze and GazeHub readers, real data sets by name, subject splits and shares.

Every set that training and evaluation see offers :class:`~genlab.gaze.data.gazeset.GazeData`
(``labels``, ``load``, ``subset``, ``preview``). The readers are torch Datasets that
:func:`~genlab.gaze.data.realdata.open_real` wraps in a StreamingSet. Names are imported
on first use (the readers import OpenCV and h5py).
"""

from __future__ import annotations

from genlab.gaze.exports import lazy_getattr

_EXPORTS = {
    "GazeData": "genlab.gaze.data.gazeset",
    "GazeLabels": "genlab.gaze.data.gazeset",
    "GazeSet": "genlab.gaze.data.gazeset",
    "StreamingSet": "genlab.gaze.data.streaming",
    "ETHXGaze": "genlab.gaze.data.xgaze",
    "write_xgaze_h5": "genlab.gaze.data.xgaze",
    "GazeHub": "genlab.gaze.data.gazehub",
    "read_gazehub_labels": "genlab.gaze.data.gazehub",
    "REAL_DATASETS": "genlab.gaze.data.realdata",
    "open_real": "genlab.gaze.data.realdata",
    "split_ref": "genlab.gaze.data.realdata",
    "GazeSubset": "genlab.gaze.data.splits",
    "fraction_indices": "genlab.gaze.data.splits",
    "subject_split": "genlab.gaze.data.splits",
    "take_fraction": "genlab.gaze.data.splits",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
