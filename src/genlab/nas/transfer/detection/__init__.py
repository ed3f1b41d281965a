"""A searched cell as a detection backbone (`genlab nas detect`): VOC 07+12 -> VOC 2007 test,
COCO train2017 -> val2017, an embedded synthetic set, with torchvision's RetinaNet or Faster
R-CNN on ``genlab.nas.build_backbone`` + FPN.

- readers: ``voc``, ``coco``, ``synthetic`` (behind ``sources``); ``batches``/``records``: how
  images and boxes travel through the one Trainer;
- ``models``: detectors on the searched backbone or a torchvision ResNet; ``training``: the
  1x schedule and the detection step; ``evaluation`` and ``metrics``: VOC 2007 11-point AP,
  COCOeval, the trivial detector;
- ``detect``: the command's driver (``DetectConfig``); ``demo``: its line in `genlab demo`.
"""
