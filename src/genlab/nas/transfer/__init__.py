"""Searched cells transferred to detection: `genlab nas detect` (VOC 07+12 -> VOC 2007 test,
COCO train2017 -> val2017, an embedded synthetic set) with torchvision's RetinaNet or
Faster R-CNN on ``genlab.nas.build_backbone`` + FPN; the modules import torchvision when used.

``detect(DetectConfig(...), out)`` is the command's driver (genlab.nas.transfer.detect).
"""
