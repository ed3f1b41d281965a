"""The data sets of the NAS commands (``--dataset``): a core.registry Registry of builders.

Every entry is a :class:`DatasetEntry` (``builder(root=..., size=..., seed=...)`` returns an
ImageData, whether it reads files from ``root``, a description); ``load_image_data`` looks
names up in ``DATASETS`` (both in ``registry``). The generic readers (digits, CIFAR python
batches) are in genlab.core.data; ``builders`` registers the NAS proxies and NB201's
ImageNet16 subset:

- ``digits``, ``cifar10``, ``cifar100``: genlab.core.data's readers;
- ``imagenet16``: NAS-Bench-201's ImageNet16-120 (train_data_batch_1..10, val_data; 1-based
  labels), the first 120 classes;
- ``digits-noisy``: contrast lowered by a factor in [0.5, 1], Gaussian noise (std 0.25 of the
  [0, 1] range) and an occluding square of a quarter of the side, in every split;
- ``digits-clutter``: the digits as coloured figures of random polarity on coloured 1/f
  clutter (natural-image spectrum), 3 channels, three composites per image of the train and
  val halves and one per test image. Use ``size`` 16 or more;
- ``shapes``: genlab.core.data.shapes, objects made of parts on textured clutter, 10 balanced
  classes of 500 images rendered at ``size`` (its default side: 32), split in the digits'
  shares by the seed (stratified);
- ``folder:PATH``: one entry for every folder of the user's images (genlab.core.data.imagefolder:
  the ImageFolder layout, checked by ``check_dataset`` before a run folder is made, decoded
  batch by batch by DataLoader workers); the path is in the name, not in ``root``.

:class:`StepBatches` (``steps``) gives the search its batch of each step; for image files it
streams: one DataLoader reads the rows of step t, t+1, ... (across epochs) as its workers ask for
them, so batches are decoded ahead of the step that needs them, and a jump to another step
(a resumed run, a selection rule's fixed batches) starts the stream there.

The proxies keep the digits' stratified split; their corruption (genlab.nas.data.clutter) is drawn
once per image from the seed, so every split is fixed.
"""

from genlab.nas.data.builders import CLUTTER_COPIES, load_imagenet16
from genlab.nas.data.registry import (
    DATASETS,
    DatasetEntry,
    check_dataset,
    default_size,
    load_image_data,
    register_dataset,
)
from genlab.nas.data.steps import StepBatches

__all__ = ["CLUTTER_COPIES", "DATASETS", "DatasetEntry", "StepBatches", "check_dataset",
           "default_size", "load_image_data", "load_imagenet16", "register_dataset"]
