"""Datasets: embedded scikit-learn digits, CIFAR-10/100 python batches from disk, splits;
the user's own image folders in ``imagefolder``, the synthetic shapes in ``shapes``.

The modules: ``splits`` (Split, the seeded stratified split, standardisation), ``images``
(ImageData, what a checkpoint keeps to predict on image files), ``digits``, ``cifar`` (the
restricted unpickler and the batch readers), ``batches`` (seeded mini-batches, the
augmentation); this package re-exports their public names.

Digits (embedded, no download): 1,797 grey 8x8 images of 10 classes, values 0..16.
genlab scales them to [0, 1], optionally resizes them bilinearly to ``size`` x ``size``
(default 8: the native resolution) and standardises with the training mean/std.
Split (stratified, seeded): 20% test (360 images), the rest 50/50 into the
"train" and "val" halves that bilevel search uses (718 / 719 images); plain
training uses train+val.

CIFAR-10/100 are read from the python-pickle batches in a folder the user gives,
with a restricted unpickler that admits only dicts, lists, bytes, strings, numbers
and numpy arrays: never arbitrary objects.

The readers of other file formats in the same pickle layout use ``batch_arrays``,
``find_folder`` and ``split_arrays``; registries of named data sets live with the commands
that accept them.
"""

from genlab.core.data.batches import Batches, augment_images
from genlab.core.data.cifar import (
    CIFAR_FILES,
    batch_arrays,
    find_folder,
    load_cifar,
    safe_unpickle,
    split_arrays,
)
from genlab.core.data.digits import digit_splits, load_digits_data
from genlab.core.data.images import (
    RESIZE,
    ImageData,
    announce,
    floats,
    inference_record,
    warn_batch,
)
from genlab.core.data.splits import (
    TEST_FRACTION,
    Split,
    majority_accuracy,
    read_rows,
    search_fractions,
    split_bounds,
    standardise,
    stratified_split,
    streamed,
)

__all__ = ["CIFAR_FILES", "RESIZE", "TEST_FRACTION", "Batches", "ImageData", "Split",
           "announce", "augment_images", "batch_arrays", "digit_splits", "find_folder",
           "floats", "inference_record", "load_cifar", "load_digits_data", "majority_accuracy",
           "read_rows", "safe_unpickle", "search_fractions", "split_arrays", "split_bounds",
           "standardise", "stratified_split", "streamed", "warn_batch"]
