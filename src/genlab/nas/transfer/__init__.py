"""Searched architectures transferred to large data sets (docs/nas_transfer.md): ``classify``
(ImageNet-1k retraining) and ``detection`` (VOC, COCO, the synthetic learning check).

torchvision is imported inside functions only.
"""
