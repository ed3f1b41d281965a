"""Real data sets by name from tiny files in their real layouts; streaming batches."""

import math

import h5py
import numpy as np
import pytest
import torch

from genlab.core.errors import ConfigError, DataError
from genlab.gaze.data.gazehub import GazeHub
from genlab.gaze.data.realdata import open_real, split_ref
from genlab.gaze.data.xgaze import ETHXGaze
from tests.gaze.conftest import write_gazehub_root, write_xgaze_release


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("real")
    truth = {"xgaze": write_xgaze_release(base / "xgaze")}
    for kind in ("gaze360", "mpii", "eyediap"):
        truth[kind] = write_gazehub_root(base / kind, kind)
    return base, truth


def test_xgaze_release_reads_the_labelled_train_split(roots):
    base, truth = roots
    ds = open_real(f"xgaze:{base / 'xgaze'}", (32, 32))
    assert len(ds) == 12 and ds.labels.labelled
    assert ds.labels.subject.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    np.testing.assert_allclose(ds.labels.gaze[4:8].numpy(), truth["xgaze"][1])  # (pitch, yaw)
    with h5py.File(base / "xgaze" / "train" / "subject0001.h5") as f:
        bgr = f["face_patch"][2]
    images, labels = next(ds.load([[5, 6]]))
    assert images.shape == (2, 3, 32, 32) and labels.subject.tolist() == [1, 1]
    ref = ETHXGaze(base / "xgaze" / "train", size=(224, 224))
    np.testing.assert_allclose(ref[6][0].permute(1, 2, 0).numpy() * 255, bgr[..., ::-1],
                               atol=1e-3)  # BGR on disk, RGB in genlab


def test_unlabelled_test_split_is_explicit(roots):
    base, _ = roots
    with pytest.raises(DataError, match="unlabelled") as err:
        ETHXGaze(base / "xgaze" / "test")
    assert "subject0090.h5" in str(err.value)
    ds = open_real(f"xgaze:{base / 'xgaze' / 'test'}", (16, 16), labels="optional")
    assert len(ds) == 4 and not ds.labels.labelled
    assert torch.isnan(ds.labels.gaze).all()


def test_gaze360_subjects_come_from_the_image_paths(roots):
    base, truth = roots
    ds = open_real(f"gaze360:{base / 'gaze360'}", (16, 16))
    assert ds.labels.subject.tolist() == [10, 10, 11, 11, 12, 12, 13, 13]  # rec_010 ... rec_013
    got = dict(zip(ds.dataset.faces, ds.labels.gaze.tolist(), strict=True))
    for face, (pitch, yaw) in truth["gaze360"].items():
        assert got[face] == [pytest.approx(pitch, abs=1e-6), pytest.approx(yaw, abs=1e-6)]
    label = base / "gaze360" / "Label" / "train.label"
    lines = label.read_text().splitlines()
    bad = base / "bad360.label"
    bad.write_text("\n".join([lines[0], lines[1].replace("rec_010", "recording_x")]) + "\n")
    with pytest.raises(DataError, match=r"bad360\.label:2: .*rec_"):
        GazeHub(base / "gaze360" / "Image", [bad], subject_pattern=r"rec_(\d+)")
    with pytest.raises(ConfigError, match="group"):
        GazeHub(base / "gaze360" / "Image", [label], subject_pattern=r"rec_\d+")


@pytest.mark.parametrize("kind", ["mpii", "eyediap"])
def test_gazehub_targets_one_label_file_per_person(roots, kind):
    base, truth = roots
    ds = open_real(f"{kind}:{base / kind}", (16, 16))
    assert len(ds) == 8 and ds.labels.subject.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    for face, g in zip(ds.dataset.faces, ds.labels.gaze.tolist(), strict=True):
        assert g == [pytest.approx(v, abs=1e-6) for v in truth[kind][face]]


def test_streaming_batches_equal_items_with_and_without_workers(roots):
    base, _ = roots
    ds = open_real(f"mpii:{base / 'mpii'}", (16, 16))
    part = ds.subset([7, 1, 4])
    direct = torch.stack([ds.dataset[i][0] for i in (7, 1, 4)])
    (x0, l0), = list(part.load([[0, 1, 2]]))
    assert torch.equal(x0, direct) and l0.subject.tolist() == [3, 0, 2]
    ds.workers = 1
    (x1, _), = list(ds.subset([7, 1, 4]).load([[0, 1, 2]]))
    assert torch.equal(x1, direct)
    assert part.preview(2).shape == (2, 3, 16, 16)


def test_bad_references_and_layouts(roots, tmp_path):
    base, _ = roots
    assert split_ref("narrow-m") is None
    with pytest.raises(ConfigError, match="real data set"):
        split_ref("imagenet:/data")
    with pytest.raises(ConfigError, match="names no folder"):
        split_ref("mpii:")
    with pytest.raises(DataError, match="no such folder"):
        open_real(f"mpii:{tmp_path / 'absent'}", (16, 16))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="GazeHub layout"):
        open_real(f"eyediap:{tmp_path / 'empty'}", (16, 16))
    with pytest.raises(DataError, match="no .h5"):
        open_real(f"xgaze:{tmp_path / 'empty'}", (16, 16))


def test_eval_on_unlabelled_split_writes_predictions(roots, tmp_path):
    from genlab.gaze.evaluate import evaluate_run
    from genlab.gaze.protocol import load_task_data
    from genlab.gaze.train import GazeTrainConfig, train_gaze

    base, _ = roots
    cfg = GazeTrainConfig(model="baseline", source=f"xgaze:{base / 'xgaze'}",
                          targets=[f"mpii:{base / 'mpii'}"], width=4, steps=1, eval_every=1,
                          batch_size=4, size=[16, 16], gaze_feat_dim=8)
    train_gaze(cfg, load_task_data(cfg), tmp_path / "run", progress_bar=False, plots=False)
    s = evaluate_run(tmp_path / "run", tmp_path / "ev", data=f"xgaze:{base / 'xgaze' / 'test'}")
    assert s == {"data": f"xgaze:{base / 'xgaze' / 'test'}", "images": 4, "labelled": False,
                 "processes": 1}
    rows = (tmp_path / "ev" / "predictions.csv").read_text().splitlines()
    assert rows[0] == "index,subject,pitch_rad,yaw_rad" and len(rows) == 5
    assert all(math.isfinite(float(v)) for v in rows[1].split(",")[2:])
