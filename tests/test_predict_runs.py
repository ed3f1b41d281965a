"""Runs that predict (issue 48), on a folder of PNGs made here: image folder -> `nas search`
-> `nas train --from` -> `genlab.load(run).predict(...)` on the held-out files, and `optim
train` -> `optim predict`; the predictions score the run's own test accuracy and give the
probabilities of the run's own evaluation pipeline; old runs and other kinds are refused in
one line."""

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "nas"))

from image_folders import write_folder  # noqa: E402
from nas_reference import run_cli  # noqa: E402

import genlab  # noqa: E402
from genlab.core.data.imagefolder import folder_data  # noqa: E402
from genlab.core.storage.checkpoints import MODEL_RECORD, load_checkpoint, save_checkpoint  # noqa: E402

SIZE = 8


@pytest.fixture
def pngs(tmp_path, monkeypatch):
    import genlab.core.data.imagefolder as imagefolder

    monkeypatch.setattr(imagefolder, "default_workers", lambda: 0)  # tiny: decoded in-process
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)
    return write_folder(tmp_path / "pngs", per_class=8)


def _held_out(root):
    """The test split's files and labels, as the runs (seed 0) split them."""
    test = folder_data(root, SIZE, 0).test
    return list(test.images.files), test.labels.tolist(), test


def _check_predictions(run, root):
    files, labels, test = _held_out(root)
    loaded = genlab.load(run)
    preds = loaded.predict(files, batch_size=2)  # several batches
    classes = sorted(p.name for p in root.iterdir())
    assert [p.image for p in preds] == files
    correct = sum(p.label == classes[y] for p, y in zip(preds, labels, strict=True))
    summary = json.loads((run / "summary.json").read_text())
    assert 100 * correct / len(files) == pytest.approx(summary["test_acc"], abs=1e-4)  # float32
    # the probabilities of the run's own pipeline (its test split as training read it)
    with torch.no_grad():
        out = loaded.model.eval()(test.images[list(range(len(files)))])
        truth = torch.softmax(out[0] if isinstance(out, tuple) else out, dim=1)
    got = torch.tensor([[p.probabilities[c] for c in classes] for p in preds])
    assert torch.allclose(got, truth, atol=1e-6)
    return preds


def test_folder_search_train_from_then_predict_scores_the_runs_test_accuracy(
        pngs, tmp_path, capsys):
    data = f"folder:{pngs}"
    search, train = tmp_path / "search", tmp_path / "train"
    code, _, err = run_cli(["nas", "search", "--dataset", data, "--steps", "2", "--size", SIZE,
                            "--batch-size", "4", "-C", "2", "--hessian-points", "0",
                            "--out", search], capsys)
    assert code == 0, err
    code, _, err = run_cli(["nas", "train", "--from", search, "--dataset", data, "--epochs", "2",
                            "--size", SIZE, "-C", "4", "--out", train], capsys)
    assert code == 0, err
    config = json.loads((train / "config.json").read_text())
    searched = json.loads((search / "summary.json").read_text())
    assert (config["arch"], config["space"]) == (searched["genotype"], searched["space"])
    preds = _check_predictions(train, pngs)
    files = [p.image for p in preds]
    code, out, err = run_cli(["nas", "predict", train, *files[:2]], capsys)
    assert code == 0, err
    assert out.splitlines() == [f"{p.image}: {p.label}  (probability {p.probability:.3f})"
                                for p in preds[:2]]


def test_optim_train_then_optim_predict(pngs, tmp_path, capsys):
    run = tmp_path / "optim"
    code, _, err = run_cli(["optim", "train", "--dataset", f"folder:{pngs}", "--size", SIZE,
                            "--epochs", "2", "--no-measure", "--out", run], capsys)
    assert code == 0, err
    preds = _check_predictions(run, pngs)
    code, out, err = run_cli(["optim", "predict", run, preds[0].image], capsys)
    assert code == 0, err
    assert out == f"{preds[0].image}: {preds[0].label}  (probability " \
                  f"{preds[0].probability:.3f})\n"
    # a PIL image and a tensor in [0, 1] are predicted as the file is
    from PIL import Image

    with Image.open(preds[0].image) as im:
        again = genlab.load(run).predict([im.copy()])[0]
    assert again.probabilities == pytest.approx(preds[0].probabilities, abs=1e-6)


def test_old_runs_other_kinds_and_missing_files_are_one_line(pngs, tmp_path, capsys):
    run = tmp_path / "optim"
    code, _, err = run_cli(["optim", "train", "--dataset", f"folder:{pngs}", "--size", SIZE,
                            "--epochs", "1", "--no-measure", "--out", run], capsys)
    assert code == 0, err
    image = str(next(pngs.glob("*/*.png")))
    cases = [
        (["nas", "predict", run, image], f"genlab: bad checkpoint: {run} is an optim train "
                                         "run; nas predict needs a nas train or a nas search "
                                         "run"),
        (["optim", "predict", run, tmp_path / "none.png"],
         f"genlab: bad data: {tmp_path / 'none.png'}: no such image file"),
    ]
    state = load_checkpoint(run / "checkpoint.pt")  # as an earlier genlab wrote it
    del state[MODEL_RECORD]["inference"]
    old = tmp_path / "old"
    old.mkdir()
    save_checkpoint(old / "checkpoint.pt", state)
    cases.append((["optim", "predict", old, image],
                  f"genlab: bad checkpoint: {old / 'checkpoint.pt'}: keeps no inference facts "
                  "(classes, mode, size, mean, std): written by an earlier genlab, or trained "
                  "on data that are not images; train it again to predict"))
    for argv, line in cases:
        code, out, err = run_cli(argv, capsys)
        assert (code, out, err.splitlines()) == (2, "", [line])


def test_a_digits_run_predicts_digit_pictures(tmp_path, capsys):
    """The README's line: an optim train run on the digits predicts a PNG of a digit (light
    ink on a dark ground, its pixels / 255 as the digits' values / 16) as it scores the
    digit itself."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    from genlab.core.data import digit_splits

    run = tmp_path / "digits"
    code, _, err = run_cli(["optim", "train", "--epochs", "1", "--no-measure", "--out", run],
                           capsys)
    assert code == 0, err
    digits = load_digits()
    files = []
    for i in range(20):
        files.append(tmp_path / f"{i}.png")
        Image.fromarray((digits.images[i] * 255 / 16).round().astype(np.uint8)).save(files[-1])
    preds = genlab.load(run).predict(files)
    # the same digits standardised as the run's data are: by the training split's statistics
    train = digit_splits(8, 0)[0][0]
    mean, std = float(train.mean()), float(train.std())
    x = (torch.from_numpy(digits.images[:20] / 16).float().unsqueeze(1) - mean) / std
    with torch.no_grad():
        truth = torch.softmax(genlab.load(run).model(x), dim=1)
    got = torch.tensor([[p.probabilities[str(c)] for c in range(10)] for p in preds])
    assert torch.allclose(got, truth, atol=0.02)  # the PNGs' 8-bit rounding
    assert [p.label for p in preds] == [str(int(k)) for k in truth.argmax(1)]
