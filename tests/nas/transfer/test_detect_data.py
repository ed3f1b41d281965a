"""The detection readers on files in the official VOC and COCO layouts (coordinates, difficult
and crowd boxes, category ids), the packed batches and their per-epoch order, and bad input:
one line naming the file, exit 2, nothing written."""

import json

import numpy as np
import pytest
import torch
from detect_fixtures import COCO_TRAIN, VOC_TRAIN, make_coco, make_voc, voc_xml
from nas_reference import DARTS_V2, run_cli

from genlab.nas.transfer.detection.batches import TrainBatches
from genlab.nas.transfer.detection.coco import read_coco
from genlab.nas.transfer.detection.records import pack, sample, unpack
from genlab.nas.transfer.detection.synthetic import read_synthetic
from genlab.nas.transfer.detection.voc import VOC_CLASSES, read_voc


def test_voc_reader_keeps_difficult_and_shifts_to_continuous(tmp_path):
    train, test, classes = read_voc(make_voc(tmp_path))
    assert classes == list(VOC_CLASSES) and len(train) == 4 and len(test) == 2
    third = train[2]  # 000003: a dog (1, 1, 48, 30) and a difficult cat (8, 35, 40, 64)
    assert (third.height, third.width) == (64, 48)
    np.testing.assert_array_equal(third.boxes, [[0, 0, 48, 30], [7, 34, 40, 64]])
    assert [VOC_CLASSES[i] for i in third.labels] == ["dog", "cat"]
    assert third.ignore.tolist() == [False, True]
    boxes, labels = third.training_boxes()  # difficult boxes are not trained on
    assert labels.tolist() == [VOC_CLASSES.index("dog")]
    assert third.target()["difficult"].tolist() == [False, True]  # but kept for the AP


def test_voc2012_trainval_joins_training_when_present(tmp_path):
    make_voc(tmp_path)
    make_voc(tmp_path, train={"2012_000001": VOC_TRAIN["000001"]}, test={}, year="VOC2012")
    train, test, _ = read_voc(tmp_path)
    assert len(train) == 5 and len(test) == 2


def test_coco_reader_maps_ids_drops_crowds_and_empty_training_images(tmp_path):
    train, val, names, ids = read_coco(make_coco(tmp_path))
    assert ids == [3, 18] and names == ["car", "dog"]
    assert [it.image_id for it in train] == [11, 12, 13]  # 14 has no box
    second = train[1]
    assert second.ignore.tolist() == [False, True]  # the crowd box
    np.testing.assert_array_equal(second.training_boxes()[0], [[10, 6, 50, 40]])
    assert second.training_boxes()[1].tolist() == [1]  # category 18 -> label 1
    assert len(val) == 2


def test_pack_unpack_and_flip_round_trip(tmp_path):
    train, _, _ = read_voc(make_voc(tmp_path))
    a, b = sample(train[0], 0, False, True), sample(train[2], 2, True, True)
    images, targets = pack([a, b])
    assert images.shape == (2, 3, 64, 64) and targets.shape == (2, 3, 5)
    imgs, tgts, idx = unpack(images, targets)
    assert idx == [0, 2] and imgs[1].shape == (3, 64, 48)
    torch.testing.assert_close(imgs[0], a[0])
    # flipped: dog (0, 0, 48, 30) in a 48-wide image stays (0, 0, 48, 30); the difficult cat
    # is not a training box
    assert tgts[1]["boxes"].tolist() == [[0, 0, 48, 30]]
    flipped = sample(train[0], 0, True, True)[1]
    assert flipped[:, :4].tolist() == [[64 - 30, 5, 64 - 4, 40], [64 - 60, 1, 64 - 34, 45]]


def test_synthetic_boxes_are_tight_and_batches_repeat_per_epoch():
    train, test, classes = read_synthetic(32, seed=3)
    assert classes == ["square", "disk", "triangle"] and len(test) == 16
    again, _, _ = read_synthetic(32, seed=3)
    np.testing.assert_array_equal(train[5].pixels, again[5].pixels)
    for it in train[:8]:
        for x1, y1, x2, y2 in it.boxes.astype(int):
            assert 0 <= x1 < x2 <= 64 and 0 <= y1 < y2 <= 64
            assert 22 <= max(x2 - x1, y2 - y1) <= 40
    batches = TrainBatches(train, 8, total_steps=10, checkpoint_steps=3, seed=1)
    assert batches.steps_per_epoch == 4 and batches.segments == 4
    keys = [k for s in range(4) for k in batches.keys(s)]
    assert len(keys) == 10 and keys[:4] == batches.epoch_keys(0)
    assert keys[4:8] == batches.epoch_keys(1) and keys[4:8] != keys[:4]
    assert sorted(i for b in keys[:4] for i, _ in b) == list(range(32))


def _detect(tmp_path, data, capsys, *extra):
    out = tmp_path / "run"
    code, _, err = run_cli(["nas", "detect", DARTS_V2, "--data", data, "--channels", "8",
                            "--fpn-channels", "16", "--out", out, "--max-steps", "1", *extra],
                           capsys)
    return code, err, out


def _break_voc(root, what):
    base = root / "VOCdevkit" / "VOC2007"
    if what == "missing split folder":
        import shutil

        shutil.rmtree(base / "JPEGImages")
        return base / "JPEGImages"
    if what == "annotation does not parse":
        (base / "Annotations" / "000002.xml").write_text("<annotation><size>")
        return base / "Annotations" / "000002.xml"
    if what == "box outside its image":
        (base / "Annotations" / "000004.xml").write_text(
            voc_xml(64, 48, [("person", 20, 5, 44, 49, 0)]))
        return base / "Annotations" / "000004.xml"
    if what == "class not in the set":
        (base / "Annotations" / "000001.xml").write_text(
            voc_xml(64, 48, [("unicorn", 5, 6, 30, 40, 0)]))
        return base / "Annotations" / "000001.xml"
    (base / "ImageSets" / "Main" / "test.txt").write_text("\n")
    return base / "ImageSets" / "Main" / "test.txt"


@pytest.mark.parametrize("what", ["missing split folder", "annotation does not parse",
                                  "box outside its image", "class not in the set",
                                  "empty image list"])
def test_bad_voc_input_one_line_exit_2_nothing_written(tmp_path, capsys, what):
    bad = _break_voc(make_voc(tmp_path / "voc"), what)
    code, err, out = _detect(tmp_path, f"voc:{tmp_path / 'voc'}", capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(bad) in err
    assert not out.exists()


def _break_coco(root, what):
    file = root / "annotations" / "instances_train2017.json"
    data = json.loads(file.read_text())
    if what == "missing split folder":
        import shutil

        shutil.rmtree(root / "val2017")
        return root / "val2017"
    if what == "annotation does not parse":
        file.write_text(file.read_text()[:-10])
    elif what == "box outside its image":
        data["annotations"][0]["bbox"] = [50, 5, 20, 30]  # 50 + 20 > 64
        file.write_text(json.dumps(data))
    elif what == "class not in the set":
        data["annotations"][0]["category_id"] = 99
        file.write_text(json.dumps(data))
    else:
        data["images"], data["annotations"] = [], []
        file.write_text(json.dumps(data))
    return file


@pytest.mark.parametrize("what", ["missing split folder", "annotation does not parse",
                                  "box outside its image", "class not in the set",
                                  "empty image list"])
def test_bad_coco_input_one_line_exit_2_nothing_written(tmp_path, capsys, what):
    assert COCO_TRAIN[0][3][0][1] + COCO_TRAIN[0][3][0][3] <= 64  # the fixture's box fits
    bad = _break_coco(make_coco(tmp_path / "coco"), what)
    code, err, out = _detect(tmp_path, f"coco:{tmp_path / 'coco'}", capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(bad) in err
    assert not out.exists()


@pytest.mark.parametrize("args, word", [
    (["--data", "imagenet:x"], "--data"), (["--detector", "yolo"], "detector"),
    (["--backbone", "vgg"], "backbone"), (["--lr-steps", "3,2"], "lr-steps"),
    (["--space", "darts", "--backbone-weights", "nowhere"], "nowhere")])
def test_bad_options_one_line_exit_2(tmp_path, capsys, args, word):
    code, err, out = _detect(tmp_path, "synthetic:4", capsys, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and word in err, err
    assert not out.exists()
