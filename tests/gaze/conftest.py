"""Helpers shared by the gaze tests."""

import pytest
import torch


def torchvision_resnet18_state(width=64, seed=0) -> dict:
    """Every key of torchvision's resnet18().state_dict() with its shape, random values."""
    g = torch.Generator().manual_seed(seed)
    state = {}

    def conv(name, o, i, k):
        state[f"{name}.weight"] = torch.randn(o, i, k, k, generator=g) * (2 / (i * k * k)) ** 0.5

    def bn(name, c):
        state[f"{name}.weight"] = 1 + 0.1 * torch.randn(c, generator=g)
        state[f"{name}.bias"] = 0.1 * torch.randn(c, generator=g)
        state[f"{name}.running_mean"] = 0.1 * torch.randn(c, generator=g)
        state[f"{name}.running_var"] = 0.5 + torch.rand(c, generator=g)
        state[f"{name}.num_batches_tracked"] = torch.tensor(100)

    conv("conv1", width, 3, 7)
    bn("bn1", width)
    cin = width
    for i, c in enumerate([width, 2 * width, 4 * width, 8 * width], start=1):
        for b in range(2):
            p, inp = f"layer{i}.{b}", (cin if b == 0 else c)
            conv(f"{p}.conv1", c, inp, 3)
            bn(f"{p}.bn1", c)
            conv(f"{p}.conv2", c, c, 3)
            bn(f"{p}.bn2", c)
            if b == 0 and i > 1:
                conv(f"{p}.downsample.0", c, cin, 1)
                bn(f"{p}.downsample.1", c)
        cin = c
    state["fc.weight"] = torch.randn(1000, 8 * width, generator=g) * 0.01
    state["fc.bias"] = torch.zeros(1000)
    return state


# ----------------------------------------------------------------------------- real formats
# Tiny files in the real layouts (ETH-XGaze release h5, GazeHub label files and images),
# written here with h5py and OpenCV directly.

GAZEHUB_HEADERS = {
    "mpii": "Face Left Right Origin WhichEye 3DGaze 3DHead 2DGaze 2DHead Rmat Smat GazeOrigin",
    "eyediap": "Face Left Right Grid Origin 3DGaze 3DHead 2DGaze 2DHead Rmat Smat GazeOrigin",
    "gaze360": "Face Left Right Origin WhichEye 3DGaze 2DGaze",
}


def _face(rng, size=224):
    """A face-sized uint8 BGR image: noise plus a bright block (not blank, compresses badly)."""
    import numpy as np

    img = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    img[size // 4:size // 2, size // 4:size // 2] = (30, 60, 220)
    return img


def write_xgaze_release(root, subjects=(0, 1, 2), per_subject=4, test_subjects=(90,), seed=0):
    """ETH-XGaze release layout: train/subjectXXXX.h5 with labels, test/ without face_gaze."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(seed)
    labels = {}
    for split, ids in (("train", subjects), ("test", test_subjects)):
        (root / split).mkdir(parents=True, exist_ok=True)
        for sid in ids:
            n = per_subject
            with h5py.File(root / split / f"subject{sid:04d}.h5", "w") as f:
                f.create_dataset("face_patch", data=np.stack([_face(rng) for _ in range(n)]),
                                 chunks=(1, 224, 224, 3))
                if split == "train":
                    gaze = rng.uniform(-0.5, 0.5, (n, 2)).astype(np.float32)
                    f["face_gaze"] = gaze
                    labels[sid] = gaze
                f["face_head_pose"] = rng.uniform(-0.3, 0.3, (n, 2)).astype(np.float32)
                f["frame_index"] = np.arange(n).reshape(-1, 1)
                f["cam_index"] = np.zeros((n, 1), np.int64)
                f["face_mat_norm"] = np.tile(np.eye(3, dtype=np.float32), (n, 1, 1))
    return labels


def gazehub_line(header, face, pitch, yaw, origin="p00/day01/0001.jpg"):
    """One label line; 2DGaze written as (yaw, pitch), 3DGaze as the matching vector."""
    import numpy as np

    from genlab.gaze.geometry import pitchyaw_to_vector

    fmt = lambda v: ",".join(f"{x:.6f}" for x in v)  # noqa: E731
    vec = pitchyaw_to_vector(np.array([pitch, yaw]))
    values = {"Face": face, "Left": "left/x.jpg", "Right": "right/x.jpg", "Grid": "grid/x.jpg",
              "Origin": origin, "WhichEye": "left", "3DGaze": fmt(vec),
              "3DHead": fmt([0.01, -0.02, -0.99]), "2DGaze": fmt([yaw, pitch]),
              "2DHead": fmt([0.02, 0.01]), "Rmat": fmt(np.eye(3).ravel()),
              "Smat": fmt(np.eye(3).ravel()), "GazeOrigin": fmt([10.0, -5.0, 600.0])}
    return " ".join(values[c] for c in header.split())


def write_gazehub_root(root, kind, persons=4, per_person=2, seed=0):
    """A GazeHub-layout data set: Image/... and Label/*.label (Gaze360: one train.label whose
    Origin paths name the recording). Returns {face path: (pitch, yaw)}."""
    import cv2
    import numpy as np

    rng = np.random.default_rng([seed, len(kind)])
    header = GAZEHUB_HEADERS[kind]
    (root / "Label").mkdir(parents=True, exist_ok=True)
    truth, files = {}, {}
    for p in range(persons):
        for i in range(per_person):
            person = f"p{p:02d}" if kind == "mpii" else f"p{p + 1}"
            face = f"Face/{p * per_person + i}.jpg" if kind == "gaze360" else \
                f"{person}/face/{i}.jpg"
            (root / "Image" / face).parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / "Image" / face), _face(rng))
            pitch, yaw = rng.uniform(-0.4, 0.4, 2)
            origin = f"rec_{10 + p:03d}/head/{i:06d}/{i:06d}.jpg"
            label = "train.label" if kind == "gaze360" else f"{person}.label"
            files.setdefault(label, [header]).append(gazehub_line(header, face, pitch, yaw,
                                                                  origin))
            truth[face] = (float(pitch), float(yaw))
    for name, lines in files.items():
        (root / "Label" / name).write_text("\n".join(lines) + "\n")
    return truth


def killed_then_resumed(monkeypatch, cfg, task, folder, kill_at: int = 5):
    """Train ``cfg`` into ``folder``, interrupted at the ``kill_at``-th optimiser step, then
    resume it; returns (model, summary) of the resumed run. Asserts the interrupted run left
    no summary."""
    from genlab.gaze import train as train_mod

    real_step, calls = train_mod.GazeTrainer.step, {"n": 0}

    def dying_step(self, x, y):
        calls["n"] += 1
        if calls["n"] == kill_at:
            raise KeyboardInterrupt
        return real_step(self, x, y)

    monkeypatch.setattr(train_mod.GazeTrainer, "step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        train_mod.train_gaze(cfg, task, folder, progress_bar=False)
    monkeypatch.setattr(train_mod.GazeTrainer, "step", real_step)
    assert not (folder / "summary.json").exists()
    return train_mod.train_gaze(cfg, task, folder, resume=True, progress_bar=False)
