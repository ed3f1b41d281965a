"""ImageNet-1k retraining of a searched cell (`genlab nas train ... --dataset imagenet`).

- ``imagefolder``: streamed ImageFolder data (``ROOT/train/CLASS/*.JPEG``, ``ROOT/val/...``)
  read by DataLoader workers, sharded per rank, seeded per sample so a resumed run sees the
  same images and augmentations;
- ``imagenet``: the command's driver; ``recipes``: the DARTS and MobileNet-like recipes;
  ``measures``: top-1/top-5, parameters and multiply-adds.
"""
