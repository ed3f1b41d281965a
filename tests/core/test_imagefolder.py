"""A user's own images (--dataset folder:PATH): the layout's checks, the lazy images against
PIL read independently, the seeded split, and the three commands that take them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from genlab.cli import main
from genlab.core.errors import ConfigError
from genlab.core.imagefolder import FolderImages, folder_data, scan_folder

CLASSES = ("circle", "cross", "square")


def _shape(kind: str, side: int) -> np.ndarray:
    a = np.zeros((side, side), np.uint8)
    yy, xx = np.mgrid[:side, :side]
    if kind == "circle":
        a[(yy - side / 2) ** 2 + (xx - side / 2) ** 2 < (side / 3) ** 2] = 255
    elif kind == "square":
        a[side // 4: 3 * side // 4, side // 4: 3 * side // 4] = 255
    else:
        a[side // 2 - 1: side // 2 + 2, :] = 255
        a[:, side // 2 - 1: side // 2 + 2] = 255
    return a


@pytest.fixture()
def folder(tmp_path):
    root = tmp_path / "shapes"
    for c, kind in enumerate(CLASSES):
        (root / kind).mkdir(parents=True)
        for i in range(8):
            side = 10 + 3 * i + c  # every image a different size
            Image.fromarray(_shape(kind, side)).save(root / kind / f"{i}.png")
    return root


def test_scan_lists_every_image_with_its_class(folder):
    scan = scan_folder(folder)
    assert scan.classes == CLASSES and scan.channels == 1
    assert len(scan.files) == 24
    for path, label in zip(scan.files, scan.labels, strict=True):
        assert f"/{CLASSES[label]}/" in path


def test_images_equal_pil_read_independently(folder):
    data = folder_data(folder, size=12, seed=3)
    images: FolderImages = data.train.images
    rows = [0, 2, 5]
    got = images[torch.tensor(rows)]
    raw = []
    for path in (images.files[r] for r in rows):
        with Image.open(path) as im:
            pixels = np.asarray(im.convert("L").resize((12, 12), Image.Resampling.BILINEAR),
                                np.float32)
        raw.append(torch.from_numpy(pixels / 255.0)[None])
    want = (torch.stack(raw) - images.mean) / images.std
    assert got.shape == (3, 1, 12, 12)
    assert torch.allclose(got, want, atol=1e-6)
    # the standardisation: mean and std of the training images (all 12 here, < 512)
    every = images[:]
    assert float(every.mean()) == pytest.approx(0.0, abs=1e-5)


def test_split_is_seeded_stratified_and_disjoint(folder):
    a, b, c = (folder_data(folder, size=8, seed=s) for s in (0, 0, 1))
    parts = [set(p.images.files) for p in (a.train, a.val, a.test)]
    assert sum(map(len, parts)) == 24 and len(set.union(*parts)) == 24
    assert [p.images.files for p in (a.train, a.val, a.test)] == \
        [p.images.files for p in (b.train, b.val, b.test)]
    assert a.train.images.files != c.train.images.files
    for split in (a.train, a.val, a.test):
        assert set(split.labels.tolist()) == {0, 1, 2}  # every class in every part


def _run(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


def test_search_and_trainings_run_on_a_folder(folder, tmp_path, capsys):
    data = f"folder:{folder}"
    code, _, err = _run(["nas", "search", "--dataset", data, "--steps", "2", "--size", "8",
                         "--out", str(tmp_path / "s")], capsys)
    assert code == 0, err
    code, _, err = _run(["nas", "train", "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+"
                         "|avg_pool_3x3~0|none~1|nor_conv_3x3~2|", "--dataset", data,
                         "--epochs", "1", "-C", "4", "--out", str(tmp_path / "t")], capsys)
    assert code == 0, err
    code, _, err = _run(["optim", "train", "--dataset", data, "--epochs", "1", "--size", "8",
                         "--measure-samples", "8", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert 0 <= summary["test_acc"] <= 100


def _bad(kind: str, root):
    if kind == "empty":
        root.mkdir()
    elif kind == "one-class":
        (root / "a").mkdir(parents=True)
        Image.fromarray(_shape("circle", 9)).save(root / "a" / "x.png")
    elif kind == "unreadable":
        for c in "ab":
            (root / c).mkdir(parents=True)
            Image.fromarray(_shape("circle", 9)).save(root / c / "x.png")
        (root / "b" / "broken.png").write_bytes(b"not an image")
    elif kind == "mixed":
        for c in "ab":
            (root / c).mkdir(parents=True)
        Image.fromarray(_shape("circle", 9)).save(root / "a" / "grey.png")
        Image.new("RGB", (9, 9)).save(root / "b" / "colour.png")
    elif kind == "empty-class":
        (root / "a").mkdir(parents=True)
        (root / "b").mkdir()
        Image.fromarray(_shape("circle", 9)).save(root / "a" / "x.png")
    return root


@pytest.mark.parametrize(("kind", "words"), [
    ("missing", "no such folder"), ("empty", "no class sub-folders"),
    ("one-class", "one class"), ("unreadable", "broken.png is not a readable image"),
    ("mixed", "grey and colour images mixed"), ("empty-class", "class folder b holds no image")])
@pytest.mark.parametrize("command", [["nas", "search", "--steps", "2"],
                                     ["optim", "train", "--epochs", "1"]])
def test_a_bad_folder_is_one_line_and_leaves_nothing(kind, words, command, tmp_path, capsys):
    root = tmp_path / "data"
    if kind != "missing":
        _bad(kind, root)
    with pytest.raises(ConfigError, match=words):
        scan_folder(root)
    out = tmp_path / "run"
    code, _, err = _run([*command, "--dataset", f"folder:{root}", "--out", str(out)], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and words in lines[0], err
    assert not out.exists()
