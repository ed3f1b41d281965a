"""`optim train --dataset folder:PATH`: a folder of the user's images as the task, split as
the digits are (the folder's train + val the pool, its test the test set), through the CLI
and the library; the digits-only options refused before a run folder exists."""

from __future__ import annotations

import json

import pytest
import torch
from image_folders import CLASSES, PER_CLASS, write_folder

from genlab.cli import main
from genlab.core.data import streamed
from genlab.core.data.imagefolder import folder_data
from genlab.core.errors import ConfigError
from genlab.optim.measures import MeasureConfig
from genlab.optim.training.tasks import task_data
from genlab.optim.training.train import TrainConfig, measured_rows, train_digits

TEST = 1  # images of each class in the folder's test part (PER_CLASS = 5: 2 / 2 / 1)


@pytest.fixture()
def folder(tmp_path):
    return write_folder(tmp_path / "shapes")


def test_optim_train_on_a_folder_through_the_cli(folder, tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(["optim", "train", "--dataset", f"folder:{folder}", "--epochs", "1", "--size", "8",
              "--batch-size", "4", "--measure-samples", "6", "--out", str(out)])
    assert done.value.code == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_train"] == len(CLASSES) * (PER_CLASS - TEST)  # full: train + val
    assert 0 <= summary["test_acc"] <= 100
    assert summary["measures"]["n_samples"] == 6
    config = json.loads((out / "config.json").read_text())
    assert config["task"] == f"folder:{folder}" and config["size"] == 8


def test_optim_train_on_a_folder_through_the_library(folder, tmp_path):
    cfg = TrainConfig(task=f"folder:{folder}", epochs=1, size=6, split="holdout",
                      batch_size=4, measure=False)
    summary = train_digits(cfg, tmp_path / "run")
    # holdout: a quarter of each class's pool (4 images: 3 fit, 1 val), as the digits' pool
    assert summary["n_train"] == len(CLASSES) * 3 and "val_acc" in summary
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["n_train"] == 9


def test_the_task_is_the_folders_split_kept_on_disk(folder):
    full = task_data(f"folder:{folder}", "full", data_seed=4, size=8)
    data = folder_data(folder, size=8, seed=4)
    assert streamed(full.fit.images) and streamed(full.test.images)
    assert full.fit.images.files == data.train.images.files + data.val.images.files
    assert full.test.images.files == data.test.images.files
    assert (full.num_classes, full.in_channels, full.size) == (3, 1, 8)
    hold = task_data(f"folder:{folder}", "holdout", data_seed=4, size=8)
    fit, val = set(hold.fit.images.files), set(hold.val.images.files)
    assert not fit & val and fit | val == set(full.fit.images.files)
    few = task_data(f"folder:{folder}", "full", data_seed=4, size=8, per_class=1)
    assert sorted(few.fit.labels.tolist()) == [0, 1, 2]
    noisy = task_data(f"folder:{folder}", "full", data_seed=4, size=8, label_noise=0.5,
                      noise_seed=1)
    assert torch.equal(noisy.clean_fit_labels, full.fit.labels)
    assert not torch.equal(noisy.fit.labels, full.fit.labels)
    assert torch.equal(noisy.test.labels, full.test.labels)


def test_the_measures_decode_only_the_rows_they_read(folder):
    fit = task_data(f"folder:{folder}", "full", size=8).fit
    x, y = measured_rows(fit, MeasureConfig(n_samples=3, sharpness_samples=5), seed=0)
    assert x.shape == (5, 1, 8, 8) and len(y) == 5
    order = torch.randperm(len(fit), generator=torch.Generator().manual_seed(0))[:5]
    assert torch.allclose(x, fit.images[order]) and torch.equal(y, fit.labels[order])


@pytest.mark.parametrize(("options", "words"), [
    ({"translate": 1}, "--translate jitters the 8x8 digits"),
    ({"label_noise": 0.2, "noise_kind": "asymmetric"}, "asymmetric label noise"),
])
def test_digits_only_options_are_refused_on_a_folder(folder, tmp_path, options, words):
    cfg = TrainConfig(task=f"folder:{folder}", epochs=1, **options)
    with pytest.raises(ConfigError, match=words):
        cfg.validate()
    with pytest.raises(ConfigError, match=words):
        train_digits(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_folder_too_small_for_a_validation_set_is_refused(tmp_path):
    folder = write_folder(tmp_path / "tiny", per_class=3)  # pool: 2 per class, no quarter
    cfg = TrainConfig(task=f"folder:{folder}", epochs=1, split="holdout")
    with pytest.raises(ConfigError, match="too few images for a validation set"):
        train_digits(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()
