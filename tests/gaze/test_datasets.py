"""Data sets and readers against tiny files written in the real ETH-XGaze and GazeHub formats."""

import pickle

import cv2
import h5py
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from genlab.core.errors import ConfigError, DataError
from genlab.gaze import (
    ETHXGaze,
    GazeHub,
    SyntheticGaze,
    subject_split,
    take_fraction,
    write_xgaze_h5,
)
from genlab.gaze.geometry import angular_error_deg, pitchyaw_to_vector
from genlab.gaze.synth.dataset import SynthBatch, render_domain

# ----------------------------------------------------------------------------- synthetic


def test_synthetic_gaze_items_match_render_domain():
    ds = SyntheticGaze("broad-e", 20, seed=2, size=(32, 48))
    ref = render_domain("broad-e", 20, seed=2, size=(32, 48))
    img, gaze = ds[3]
    assert img.shape == (3, 32, 48) and img.dtype == torch.float32
    assert 0.0 <= img.min() and img.max() <= 1.0
    assert gaze.shape == (2,) and gaze.dtype == torch.float32
    np.testing.assert_allclose(img.permute(1, 2, 0).numpy() * 255, ref.images[3], atol=1e-3)
    np.testing.assert_array_equal(gaze.numpy(), ref.gaze[3])
    np.testing.assert_array_equal(ds.subject, ref.subject)
    assert ds.appearance.shape[0] == 20


def test_synthetic_gaze_subject_filter_and_fraction():
    full = SyntheticGaze("narrow-d", 40, seed=0, size=(16, 24))
    keep = sorted(set(full.subject.tolist()))[:3]
    part = SyntheticGaze("narrow-d", 40, seed=0, size=(16, 24), subjects=keep)
    assert set(part.subject.tolist()) == set(keep)
    assert len(part) == int(np.isin(full.subject, keep).sum())
    half = SyntheticGaze("narrow-d", 40, seed=0, size=(16, 24), fraction=0.5)
    assert len(half) == 20
    with pytest.raises(ConfigError):
        SyntheticGaze("narrow-d", 10, seed=0, size=(16, 24), subjects=[-5])


# ----------------------------------------------------------------------------- splits


def test_subject_split_is_disjoint_complete_and_seeded():
    ids = np.repeat(np.arange(10), 7)
    a, b = subject_split(ids, (0.8, 0.2), seed=1)
    assert not set(ids[a]) & set(ids[b])
    assert sorted(np.concatenate([a, b]).tolist()) == list(range(len(ids)))
    assert len(set(ids[a])) == 8 and len(set(ids[b])) == 2
    a2, _ = subject_split(ids, (0.8, 0.2), seed=1)
    np.testing.assert_array_equal(a, a2)
    parts = subject_split(np.arange(3), (0.98, 0.01, 0.01), seed=0)
    assert [len(p) for p in parts] == [1, 1, 1]
    with pytest.raises(ConfigError):
        subject_split(ids, (0.5, 0.2))
    with pytest.raises(ConfigError):
        subject_split(np.zeros(5), (0.5, 0.5))


def test_take_fraction():
    ds = SyntheticGaze("narrow-m", 30, seed=0, size=(16, 24))
    sub = take_fraction(ds, 0.1, seed=0)
    assert len(sub) == 3
    np.testing.assert_array_equal(sub.subject, ds.subject[sub.indices])
    assert sub.indices == take_fraction(ds, 0.1, seed=0).indices
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ConfigError):
            take_fraction(ds, bad, seed=0)


# ----------------------------------------------------------------------------- ETH-XGaze


def _write_real_xgaze(path, n=4, h=8, w=6, gaze=None):
    """An h5 file laid out like the ETH-XGaze release, written with h5py directly."""
    rng = np.random.default_rng(0)
    patch = rng.integers(0, 255, (n, h, w, 3), dtype=np.uint8)
    patch[:, 0, 0] = (0, 0, 255)  # BGR: pure red
    gaze = np.array([[0.1 * i, -0.3 + 0.05 * i] for i in range(n)], np.float32) \
        if gaze is None else gaze
    with h5py.File(path, "w") as f:
        f["face_patch"] = patch
        f["face_gaze"] = gaze
        f["face_head_pose"] = np.zeros((n, 2), np.float32)
        f["frame_index"] = np.arange(n).reshape(-1, 1)
        f["cam_index"] = np.zeros((n, 1), np.int64)
        f["face_mat_norm"] = np.tile(np.eye(3), (n, 1, 1))
    return patch, gaze


def test_ethxgaze_reads_real_layout_bgr_to_rgb_and_subject(tmp_path):
    patch, gaze = _write_real_xgaze(tmp_path / "subject0003.h5")
    _write_real_xgaze(tmp_path / "subject0007.h5", n=2)
    with ETHXGaze(tmp_path) as ds:
        assert len(ds) == 6
        img, g = ds[1]
        assert img.shape == (3, 8, 6)
        np.testing.assert_allclose(img[:, 0, 0].numpy(), [1.0, 0.0, 0.0])  # red stays red
        np.testing.assert_allclose(img.permute(1, 2, 0).numpy() * 255, patch[1][..., ::-1])
        np.testing.assert_allclose(g.numpy(), gaze[1])  # (pitch, yaw) kept as is
        assert ds.subject.tolist() == [3, 3, 3, 3, 7, 7]
    resized = ETHXGaze([tmp_path / "subject0003.h5"], size=(4, 3))
    assert resized[0][0].shape == (3, 4, 3)
    assert len(ETHXGaze(tmp_path, fraction=0.5, seed=1)) == 3
    assert len(ETHXGaze([tmp_path])) == 6  # a folder inside a list expands too


def test_ethxgaze_handles_pickle_and_workers(tmp_path):
    _write_real_xgaze(tmp_path / "subject0000.h5", n=6)
    ds = ETHXGaze(tmp_path)
    ds[0]  # opens a handle in this process
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._handles == {}
    torch.testing.assert_close(clone[2][0], ds[2][0])
    loader = DataLoader(ds, batch_size=3, num_workers=1, worker_init_fn=ETHXGaze.worker_init_fn)
    batches = list(loader)
    assert sum(len(b[0]) for b in batches) == 6
    ds.close()
    assert ds._handles == {}


def test_write_xgaze_h5_round_trip(tmp_path):
    images = np.zeros((3, 8, 10, 3), np.uint8)
    images[:, 2, 3] = (255, 0, 0)  # RGB red
    batch = SynthBatch(images, np.array([[0.1, 0.2], [0.3, -0.4], [0.0, 0.5]], np.float32),
                       np.zeros((3, 2), np.float32), np.array([5, 9, 5]),
                       np.zeros((3, 4), np.float32), "test")
    paths = write_xgaze_h5(tmp_path, batch)
    assert [p.name for p in paths] == ["subject0005.h5", "subject0009.h5"]
    with h5py.File(paths[0], "r") as f:
        assert f["face_patch"].shape == (2, 8, 10, 3)
        np.testing.assert_array_equal(f["face_patch"][0, 2, 3], [0, 0, 255])  # stored BGR
        np.testing.assert_allclose(f["face_gaze"][1], [0.0, 0.5])
    ds = ETHXGaze(paths)
    np.testing.assert_allclose(ds[0][0][:, 2, 3].numpy(), [1, 0, 0])
    assert ds.subject.tolist() == [5, 5, 9]


def _bad_file(path, case):
    if case == "corrupt":
        path.write_bytes(b"not an hdf5 file at all" * 10)
        return
    with h5py.File(path, "w") as f:
        n = 3
        patch = np.zeros((n, 4, 4, 3), np.uint8)
        gaze = np.zeros((n, 2), np.float32)
        if case == "no_patch":
            f["face_gaze"] = gaze
        elif case == "no_gaze":
            f["face_patch"] = patch
        elif case == "dims":
            f["face_patch"], f["face_gaze"] = np.zeros((n, 4, 4), np.uint8), gaze
        elif case == "channels":
            f["face_patch"], f["face_gaze"] = np.zeros((n, 4, 4, 4), np.uint8), gaze
        elif case == "gaze_shape":
            f["face_patch"], f["face_gaze"] = patch, np.zeros((n, 3), np.float32)
        elif case == "length":
            f["face_patch"], f["face_gaze"] = patch, np.zeros((n + 1, 2), np.float32)
        elif case == "head":
            f["face_patch"], f["face_gaze"] = patch, gaze
            f["face_head_pose"] = np.zeros((n, 3), np.float32)


@pytest.mark.parametrize("case, expect", [
    ("corrupt", "HDF5"), ("no_patch", "face_patch"), ("no_gaze", "face_gaze"),
    ("dims", "(N, H, W, 3)"), ("channels", "(N, H, W, 3)"), ("gaze_shape", "(N, 2)"),
    ("length", "samples"), ("head", "face_head_pose"),
])
def test_ethxgaze_malformed_files_name_file_and_expectation(tmp_path, case, expect):
    path = tmp_path / "subject0001.h5"
    _bad_file(path, case)
    with pytest.raises(DataError) as err:
        ETHXGaze([path])
    assert str(path) in str(err.value) and expect in str(err.value)


def test_ethxgaze_missing_paths(tmp_path):
    with pytest.raises(DataError, match="subject0042.h5: no such"):
        ETHXGaze([tmp_path / "subject0042.h5"])
    with pytest.raises(DataError, match="no .h5"):
        ETHXGaze(tmp_path)


# ----------------------------------------------------------------------------- GazeHub

HEADERS = {
    "mpiifacegaze": "Face Left Right Origin WhichEye 3DGaze 3DHead 2DGaze 2DHead Rmat Smat "
                    "GazeOrigin",
    "eyediap": "Face Left Right Grid Origin 3DGaze 3DHead 2DGaze 2DHead Rmat Smat GazeOrigin",
    "gaze360": "Face Left Right Origin WhichEye 3DGaze 2DGaze",
}
# (pitch, yaw) truths, deliberately asymmetric
TRUTH = np.array([[-0.1, 0.3], [0.25, -0.05]])


def _fmt(v):
    return ",".join(f"{x:.6f}" for x in v)


def _gazehub_line(header, face, pitch, yaw):
    vec = pitchyaw_to_vector(np.array([pitch, yaw]))
    values = {"Face": face, "Left": "left/x.jpg", "Right": "right/x.jpg", "Grid": "grid/x.jpg",
              "Origin": "p00/day01/0001.jpg", "WhichEye": "left", "3DGaze": _fmt(vec),
              "3DHead": _fmt([0.01, -0.02, -0.99]), "2DGaze": _fmt([yaw, pitch]),
              "2DHead": _fmt([0.02, 0.01]), "Rmat": _fmt(np.eye(3).ravel()),
              "Smat": _fmt(np.eye(3).ravel()), "GazeOrigin": _fmt([10.0, -5.0, 600.0])}
    return " ".join(values[c] for c in header.split())


def _write_gazehub(root, name, header=None):
    header = header or HEADERS[name]
    (root / "Image" / name).mkdir(parents=True, exist_ok=True)
    lines = [header]
    for i, (p, y) in enumerate(TRUTH):
        face = f"{name}/face{i}.png"
        img = np.full((6, 5, 3), 40, np.uint8)
        img[0, 0] = (0, 0, 255)  # BGR red
        cv2.imwrite(str(root / "Image" / face), img)
        lines.append(_gazehub_line(header, face, p, y))
    label = root / f"{name}.label"
    label.write_text("\n".join(lines) + "\n")
    return label


@pytest.mark.parametrize("name", list(HEADERS))
def test_gazehub_real_headers_swap_yaw_pitch(tmp_path, name):
    label = _write_gazehub(tmp_path, name)
    ds = GazeHub(tmp_path / "Image", [label])
    assert len(ds) == 2
    img, gaze = ds[1]
    assert img.shape == (3, 6, 5)
    np.testing.assert_allclose(img[:, 0, 0].numpy(), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(gaze.numpy(), TRUTH[1], atol=1e-6)  # (pitch, yaw)
    # the file's own 3D gaze agrees with the swapped 2D gaze (independent check of the order)
    err = angular_error_deg(pitchyaw_to_vector(ds.gaze.double()), ds.gaze_vector.double())
    assert err.max() < 1e-3
    sized = GazeHub(tmp_path / "Image", label, size=(3, 4))
    assert sized[0][0].shape == (3, 3, 4)


def test_gazehub_several_files_subject_index(tmp_path):
    a = _write_gazehub(tmp_path, "mpiifacegaze")
    b = _write_gazehub(tmp_path, "eyediap")
    ds = GazeHub(tmp_path / "Image", [a, b])
    assert ds.subject.tolist() == [0, 0, 1, 1]
    assert len(GazeHub(tmp_path / "Image", [a, b], fraction=0.5, seed=0)) == 2


def test_gazehub_malformed_files_name_file_and_line(tmp_path):
    label = _write_gazehub(tmp_path, "mpiifacegaze")
    root = tmp_path / "Image"
    lines = label.read_text().splitlines()

    bad_header = tmp_path / "bad_header.label"
    bad_header.write_text("\n".join([lines[0].replace("2DGaze", "Gaze2D")] + lines[1:]))
    with pytest.raises(DataError, match=r"bad_header\.label:1: .*2DGaze"):
        GazeHub(root, [bad_header])

    bad_count = tmp_path / "bad_count.label"
    bad_count.write_text("\n".join(lines[:2] + [lines[2] + " extra"]))
    with pytest.raises(DataError, match=r"bad_count\.label:3: 13 fields"):
        GazeHub(root, [bad_count])

    bad_num = tmp_path / "bad_num.label"
    fields = lines[1].split()
    fields[7] = "0.1;0.2"
    bad_num.write_text("\n".join([lines[0], " ".join(fields)]))
    with pytest.raises(DataError, match=r"bad_num\.label:2: column 2DGaze"):
        GazeHub(root, [bad_num])

    empty = tmp_path / "empty.label"
    empty.write_text("")
    with pytest.raises(DataError, match=r"empty\.label"):
        GazeHub(root, [empty])

    with pytest.raises(DataError, match="missing.label"):
        GazeHub(root, [tmp_path / "missing.label"])

    (root / "mpiifacegaze" / "face0.png").unlink()
    ds = GazeHub(root, [label])
    with pytest.raises(DataError, match="face0.png"):
        ds[0]
