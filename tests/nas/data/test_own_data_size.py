"""Own data keeps its size (issue 48), on folders of PNGs made here: without --size a folder's
runs take its images' median shorter side (down to a multiple of 8, 8 to 32), say the split
sizes and the resize, and warn when a batch is larger than a split."""

import json

import numpy as np
import pytest
from image_folders import shape
from nas_reference import run_cli
from PIL import Image

from genlab.core.storage.checkpoints import MODEL_RECORD, load_checkpoint


def _square_folder(root, side: int, per_class: int = 20):
    for kind in ("circle", "cross", "square"):
        (root / kind).mkdir(parents=True)
        for i in range(per_class):
            image = np.clip(shape(kind, side, side).astype(int) + 5 * i, 0, 255)
            Image.fromarray(image.astype(np.uint8)).save(root / kind / f"{i}.png")
    return root


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    import genlab.core.data.imagefolder as imagefolder

    monkeypatch.setattr(imagefolder, "default_workers", lambda: 0)
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)


@pytest.mark.parametrize(("side", "expected"), [(48, 32), (20, 16), (12, 8), (5, 8)])
def test_the_default_size_follows_the_images(side, expected, tmp_path, capsys):
    data = f"folder:{_square_folder(tmp_path / 'pngs', side, per_class=3)}"
    for argv in (["nas", "search"], ["nas", "train", "|avg_pool_3x3~0|+|none~0|none~1|+|"
                                     "none~0|none~1|none~2|"], ["optim", "train"]):
        code, out, err = run_cli([*argv, "--dataset", data, "--print-config"], capsys)
        assert code == 0, err
        assert json.loads(out)["size"] == expected, argv
    code, out, err = run_cli(["nas", "search", "--dataset", data, "--size", "8",
                              "--print-config"], capsys)
    assert json.loads(out)["size"] == 8  # a --size given is kept


def test_sixty_48px_images_say_their_split_resize_and_batch(tmp_path, capsys):
    """The issue's case: 60 images of 48 px, a batch of 64, no --size."""
    root = _square_folder(tmp_path / "pngs", 48)
    run = tmp_path / "search"
    code, out, err = run_cli(["nas", "search", "--dataset", f"folder:{root}", "--steps", "1",
                              "-C", "2", "--hessian-points", "0", "--out", run], capsys)
    assert code == 0, err
    assert "(the diagnostic val batch, 24 images)" in out.splitlines()[-2]
    assert err.splitlines() == [
        f"genlab: folder:{root}: 3 classes; 24/24/12 train/val/test images; resized to 32x32 "
        "(shorter sides 48 px)",
        "genlab: warning: --batch-size 64 is larger than the 24 training images: each batch "
        "is all 24",
        "genlab: warning: --batch-size 64 is larger than the 24 validation images: each batch "
        "is all 24"]
    assert json.loads((run / "config.json").read_text())["size"] == 32
    record = load_checkpoint(run / "checkpoint.pt")[MODEL_RECORD]
    assert record["inference"]["size"] == 32
