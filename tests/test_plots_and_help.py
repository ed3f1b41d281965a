"""Plots and help texts (issue 48, point 7): search_curves.png plots the losses and the
accuracy that metrics.jsonl holds; gaze_arrows.png carries its legend; the help texts show
defaults as their options spell them, list --reg's choices once, mark --out required, say
what optim train trains, and list imagenet among nas train's data sets."""

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent / "nas"))

from nas_reference import run_cli  # noqa: E402

from genlab.gaze.draw import draw_gaze_arrows  # noqa: E402
from genlab.gaze.plots import gaze_arrow_grid  # noqa: E402
from genlab.nas.diagnostics import plot_search_curves  # noqa: E402


def test_search_curves_plot_train_and_val_loss_and_the_val_accuracy():
    history = [{"step": s, "train_loss": 2.0 / s, "val_loss": 2.5 / s, "val_acc": 10.0 * s,
                "mean_entropy": 1.6, "param_free_ops": 2} for s in (1, 2, 3)]
    fig = plot_search_curves(history, 1.61)
    axes = {ax.get_title(): ax for ax in fig.axes}
    loss = axes["loss (train and val batches)"]
    lines = {line.get_label(): list(line.get_ydata()) for line in loss.get_lines()}
    assert lines == {"train": [2.0, 1.0, 2 / 3], "val": [2.5, 1.25, 2.5 / 3]}
    assert loss.get_legend() is not None
    acc = axes["supernet val accuracy % (diagnostic batch)"].get_lines()[0]
    assert list(acc.get_ydata()) == [10.0, 20.0, 30.0]


def test_gaze_arrows_carry_their_legend():
    images = torch.rand(2, 3, 12, 20, generator=torch.Generator().manual_seed(0))
    gaze = torch.zeros(2, 2)
    grid = gaze_arrow_grid(images, gaze, gaze + 0.1)
    bare = draw_gaze_arrows((images.permute(0, 2, 3, 1).numpy() * 255).astype(np.uint8),
                            gaze.numpy(), pred=(gaze + 0.1).numpy())
    assert grid.shape[0] > bare.shape[0]  # the legend strip on top
    assert np.array_equal(grid[-bare.shape[0]:, :bare.shape[1]], bare)


def _help(argv, capsys) -> str:
    code, out, err = run_cli([*argv, "--help"], capsys)
    assert code == 0, err
    return " ".join(out.split())


def test_help_texts(capsys):
    text = _help(["gaze", "train"], capsys)
    assert "[default: 32x48]" in text and "[default: narrow-m]" in text
    reg = _help(["nas", "search"], capsys).split("--reg ", 1)[1].split("--reg-strength")[0]
    assert reg.count("ber-anchor") == 1 + reg.count("ber is an alias")  # the list once
    assert "--out DIR Run folder to write (required)" in text
    optim = _help(["optim", "train"], capsys)
    assert "digits classifier" not in optim and "folder:PATH" in optim
    train = _help(["nas", "train"], capsys)
    choices = train.split("--dataset <str>", 1)[1].split("[default: digits]")[0]
    assert choices.rstrip(" .").endswith("| imagenet")
