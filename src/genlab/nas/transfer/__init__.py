"""Searched architectures transferred to large data sets (docs/nas_transfer.md).

- ``imagefolder``: streamed ImageFolder data (``ROOT/train/CLASS/*.JPEG``, ``ROOT/val/...``)
  read by DataLoader workers, sharded per rank, seeded per sample so a resumed run sees the
  same images and augmentations;
- ``imagenet``: `genlab nas train ... --dataset imagenet`, the ImageNet recipes of the DARTS
  and MobileNet-like spaces (``recipes``), top-1/top-5, parameters and multiply-adds
  (``measures``).

torchvision is imported inside functions only.
"""
