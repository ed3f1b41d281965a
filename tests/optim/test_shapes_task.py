"""`optim train --dataset shapes`: the rendered objects-with-parts task, split as the digits
are, at its own side by default; its runs predict class names; the digits' own options
refused."""

from __future__ import annotations

import json

import pytest
import torch

from genlab.cli import main
from genlab.core.data.shapes import CLASS_NAMES, load_shapes_data
from genlab.core.errors import ConfigError
from genlab.optim.training.tasks import task_data
from genlab.optim.training.train import TrainConfig


def test_the_task_is_the_rendered_splits_at_its_own_side():
    assert TrainConfig(task="shapes").resolved().size == 32
    assert TrainConfig(task="digits").resolved().size == 8
    data = task_data("shapes", "full", data_seed=2, size=12)
    ref = load_shapes_data(12, 2)
    assert torch.equal(data.fit.images, ref.train_full().images)
    assert torch.equal(data.test.labels, ref.test.labels)
    assert (data.num_classes, data.in_channels, data.size) == (10, 3, 12)
    assert data.inference["classes"] == list(CLASS_NAMES)


def test_optim_train_on_shapes_through_the_cli_and_predict(tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(["optim", "train", "--dataset", "shapes", "--size", "12", "--arch", "cnn",
              "--width", "4", "--depth", "1", "--epochs", "1", "--batch-size", "256",
              "--no-measure", "--out", str(out)])
    assert done.value.code == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_train"] == 4000 and 0 <= summary["test_acc"] <= 100
    import genlab

    # the run keeps what reading an image needs: pixels in [0, 1] are standardised as the
    # training images were, so predicting on them repeats the model on the standardised ones
    ref = load_shapes_data(12, 0)
    std = torch.tensor(ref.inference["std"]).view(1, 3, 1, 1)
    mean = torch.tensor(ref.inference["mean"]).view(1, 3, 1, 1)
    run = genlab.load(out)
    rows = run.predict(ref.test.images[:5] * std + mean)
    run.model.eval()
    with torch.no_grad():
        expected = torch.softmax(run.model(ref.test.images[:5]), 1)
    assert [r.label for r in rows] == [CLASS_NAMES[int(i)] for i in expected.argmax(1)]
    for row, probs in zip(rows, expected, strict=True):
        got = torch.tensor([row.probabilities[name] for name in CLASS_NAMES])
        assert torch.allclose(got, probs, atol=1e-5)


@pytest.mark.parametrize(("options", "words"), [
    ({"translate": 1}, "--translate jitters the 8x8 digits"),
    ({"label_noise": 0.2, "noise_kind": "asymmetric"}, "asymmetric label noise"),
])
def test_digits_only_options_are_refused_on_shapes(tmp_path, options, words):
    cfg = TrainConfig(task="shapes", epochs=1, **options)
    with pytest.raises(ConfigError, match=words):
        cfg.validate()
    assert not (tmp_path / "run").exists()
