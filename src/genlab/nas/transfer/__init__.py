"""Searched architectures transferred to large data sets (docs/nas_transfer.md).

- ``imagefolder``: streamed ImageFolder data (``ROOT/train/CLASS/*.JPEG``, ``ROOT/val/...``)
  read by DataLoader workers, sharded per rank, seeded per sample so a resumed run sees the
  same images and augmentations;
- ``imagenet``: `genlab nas train ... --dataset imagenet`, the ImageNet recipes of the DARTS
  and MobileNet-like spaces (``recipes``), top-1/top-5, parameters and multiply-adds
  (``measures``);
- ``detect``: `genlab nas detect` (VOC 07+12 -> VOC 2007 test, COCO train2017 -> val2017, an
  embedded synthetic set) with torchvision's RetinaNet or Faster R-CNN on
  ``genlab.nas.build_backbone`` + FPN (``DetectConfig``; readers ``voc``, ``coco``,
  ``synthetic``; ``metrics``: VOC 2007 11-point AP and the trivial detector).

torchvision is imported inside functions only.
"""
