"""`genlab nas train --dataset imagenet` on generated image folders in the real layout
(3 classes x 4 training and 2 val JPEGs of 40x48 pixels, trained at --image-size 32): smoke
runs of both spaces, a mid-epoch resume after a kill that ends bit for bit as the
uninterrupted run, top-k, transforms, multiply-adds and the recipes' schedules by hand, the
sampler's shards, and every bad input (one line, exit 2)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from nas_reference import DARTS_V2, run_cli
from PIL import Image
from torch import nn

from genlab.core.storage.checkpoints import load_checkpoint
from genlab.nas.spaces import build_space_network
from genlab.nas.supernet.model_cost import count_macs, parameter_counts
from genlab.nas.transfer.classify import imagefolder
from genlab.nas.transfer.classify.imagefolder import (
    ShardedBatchSampler,
    eval_transform,
    train_transform,
)
from genlab.nas.transfer.classify.imagenet import ImageNetTrainConfig, train_imagenet
from genlab.nas.transfer.classify.measures import topk_correct
from genlab.nas.transfer.classify.recipes import lr_at, network_options, parameter_groups

REPO = Path(__file__).resolve().parents[3]
CLASSES = ("ant", "bee", "cat")
MOBILE = ",".join(["3x3_MBConv3"] + ["zero"] * 3 + (["5x5_MBConv6"] + ["zero"] * 3) * 3
                  + ["3x3_MBConv6"] + ["zero"] * 3 + ["7x7_MBConv3"])
SMOKE = ["--max-steps", "2", "--channels", "8", "--image-size", "32", "--batch-size", "4",
         "--workers", "0"]


def make_root(root: Path, train: int = 4, val: int = 2) -> Path:
    rng = np.random.default_rng(0)
    for split, n in (("train", train), ("val", val)):
        for c in CLASSES:
            (root / split / c).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                pixels = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / c / f"{i}.JPEG")
    return root


@pytest.fixture()
def root(tmp_path):
    return make_root(tmp_path / "imagenet")


def train_cli(capsys, arch, space, root, out, *extra):
    return run_cli(["nas", "train", arch, "--space", space, "--dataset", "imagenet",
                    "--data-root", str(root), *SMOKE, "--out", str(out), *extra], capsys)


@pytest.mark.parametrize("space, arch", [("darts", DARTS_V2), ("mobilenet", MOBILE)])
def test_smoke_run_writes_top1_top5_and_the_recipe(capsys, tmp_path, root, space, arch):
    code, stdout, stderr = train_cli(capsys, arch, space, root, tmp_path / "run")
    assert code == 0, stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["top5_k"] == 3 and "min(5, classes)" in summary["top5_note"]
    assert summary["top5"] == 100.0  # top-3 of 3 classes: every target
    assert 0 <= summary["top1"] <= 100 and summary["steps"] == 2
    assert summary["params"] <= summary["params_trained"] and summary["macs"] > 0
    assert f"{summary['params']:,}" in stdout and "multiply-adds" in stdout
    record = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert {"top1", "top5", "val_loss", "train_loss"} <= set(record)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    expected = ({"lr": 0.5, "weight_decay": 3e-5, "schedule": "linear", "warmup_epochs": 5,
                 "auxiliary_weight": 0.4, "grad_clip": 5.0, "epochs": 250, "cells": 14,
                 "bn_weight_decay": True} if space == "darts" else
                {"lr": 0.05, "weight_decay": 4e-5, "schedule": "cosine", "epochs": 300,
                 "bn_weight_decay": False, "nesterov": True})
    assert {k: config[k] for k in expected} == expected
    assert (config["label_smoothing"], config["batch_size"], config["image_size"]) == (
        0.1, 4, 32)


def _config(root, **kw):
    base = dict(arch=DARTS_V2, space="darts", data_root=str(root), channels=8, image_size=32,
                batch_size=4, workers=0, max_steps=2, threads=1)
    return ImageNetTrainConfig(**{**base, **kw})


KILLED = """
import os, sys
from genlab.core.runs import RunDir
from genlab.nas.transfer.classify.imagenet import ImageNetTrainConfig, train_imagenet
save = RunDir.save
def save_then_die(self, state):
    save(self, state)
    os._exit(9)  # killed right after the step-1 checkpoint
RunDir.save = save_then_die
train_imagenet(ImageNetTrainConfig(arch=sys.argv[1], space="darts", data_root=sys.argv[2],
               channels=8, image_size=32, batch_size=4, workers=0, max_steps=2, threads=1,
               checkpoint_steps=1), sys.argv[3], progress_bar=False)
"""


def test_resume_after_a_kill_mid_epoch_ends_bit_for_bit(tmp_path, root, monkeypatch):
    reads = []
    read = imagefolder.read_image
    monkeypatch.setattr(imagefolder, "read_image", lambda p: reads.append(p) or read(p))
    full = train_imagenet(_config(root, checkpoint_steps=1), tmp_path / "full",
                          progress_bar=False)
    assert len(reads) == 2 * 4 + 6  # two training batches of 4, the 6 val images
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-c", KILLED, DARTS_V2, str(root),
                           str(tmp_path / "part")], env=env, capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    state = load_checkpoint(tmp_path / "part" / "checkpoint.pt")
    assert state["position"]["step"] == 1 and state["global_step"] == 1
    assert not (tmp_path / "part" / "summary.json").exists()
    reads.clear()
    part = train_imagenet(_config(root, checkpoint_steps=1), tmp_path / "part", resume=True,
                          progress_bar=False)
    assert len(reads) == 4 + 6  # the sampler skipped the consumed batch unread
    a = load_checkpoint(tmp_path / "full" / "checkpoint.pt")["model"]
    b = load_checkpoint(tmp_path / "part" / "checkpoint.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (full["top1"], full["val_loss"]) == (part["top1"], part["val_loss"])
    lines = [(tmp_path / r / "metrics.jsonl").read_text() for r in ("full", "part")]
    assert lines[0] == lines[1]


def test_topk_by_hand():
    logits = torch.tensor([[0.1, 0.9, 0.3, 0.2],    # order 1, 2, 3, 0
                           [0.8, 0.1, 0.05, 0.7],   # order 0, 3, 1, 2
                           [0.2, 0.3, 0.4, 0.1]])   # order 2, 1, 0, 3
    targets = torch.tensor([3, 0, 3])
    # top-1: row 1 only; top-3: rows 0 (3 is third) and 1; top-5 = top-4: every row
    assert topk_correct(logits, targets, (1, 3, 5)) == [1, 2, 3]


def test_transform_output_sizes():
    image = Image.fromarray(np.zeros((40, 48, 3), dtype=np.uint8))  # 48 wide, 40 high
    assert tuple(train_transform(32)(image).shape) == (3, 32, 32)
    assert tuple(eval_transform(32)(image).shape) == (3, 32, 32)
    assert (imagefolder.resize_size(224), imagefolder.resize_size(32)) == (256, 37)
    resize = eval_transform(32).transforms[0]
    assert resize(image).size == (44, 37)  # shorter side 37, aspect kept: 48 * 37 / 40


def test_multiply_adds_and_parameters_by_hand():
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 3, 2, 1, groups=4),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
    # 8x8x4 outputs x 3x9, then 4x4x4 outputs x 1x9 (depthwise), then 2 outputs x 4
    assert count_macs(net, 8) == 8 * 8 * 4 * 27 + 4 * 4 * 4 * 9 + 2 * 4
    darts = build_space_network("darts", DARTS_V2, 1000, channels=48, cells=14,
                                options=network_options("darts", 0.4, 0.0))
    assert parameter_counts(darts) == (5_979_528, 4_718_752)


def test_schedules_and_weight_decay_groups_by_hand():
    assert lr_at("linear", 0.5, 0, 250, 5) == pytest.approx(0.1)  # warm-up (e + 1) / 5
    assert lr_at("linear", 0.5, 5, 250, 5) == pytest.approx(0.5 * 240 / 245)
    assert lr_at("linear", 0.5, 245, 250, 5) == pytest.approx(0.5 * 5 / (245 * 5))
    assert lr_at("cosine", 0.05, 150, 300, 0) == pytest.approx(0.025)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    decay, flat = parameter_groups(net, 4e-5, bn_weight_decay=False)
    assert [tuple(p.shape) for p in decay["params"]] == [(4, 3, 3, 3)]
    assert len(flat["params"]) == 3 and flat["weight_decay"] == 0.0


def test_sampler_shards_skips_and_reshuffles():
    def keys(**kw):
        return list(ShardedBatchSampler(10, 4, seed=0, shuffle=True, **kw))

    one = keys(epoch=0)
    assert len(one) == 2 and all(len(b) == 4 for b in one)  # the incomplete batch dropped
    two = [keys(epoch=0, rank=r, world=2) for r in (0, 1)]
    assert [a + b for a, b in zip(*two, strict=True)] == one
    assert keys(epoch=0, start=1) == one[1:]
    assert keys(epoch=1) != one
    val = list(ShardedBatchSampler(10, 4, epoch=0, seed=0, shuffle=False, limit=2))
    assert [[i for _, i in b] for b in val] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    last = [list(ShardedBatchSampler(5, 4, epoch=0, seed=0, shuffle=False, rank=r, world=3))
            for r in range(3)]  # the last val batch holds 1 image: ranks 1 and 2 skip it
    assert [[[i for _, i in b] for b in r] for r in last] == [[[0, 1], [4]], [[2]], [[3]]]


def _break(root: Path, how: str) -> str:
    """Damage the layout; return the path the error line must name."""
    if how == "no train":
        os.rename(root / "train", root / "elsewhere")
        return str(root / "train")
    if how == "no val":
        os.rename(root / "val", root / "elsewhere")
        return str(root / "val")
    if how == "no classes":
        for c in CLASSES:
            for f in (root / "train" / c).iterdir():
                f.unlink()
            (root / "train" / c).rmdir()
        return str(root / "train")
    if how == "empty class":
        for f in (root / "train" / "bee").iterdir():
            f.unlink()
        return str(root / "train" / "bee")
    (root / "val" / "dog").mkdir()
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(root / "val" / "dog" / "0.JPEG")
    return str(root / "val" / "dog")


@pytest.mark.parametrize("how", ["no train", "no val", "no classes", "empty class",
                                 "val class not in train"])
def test_bad_layouts_are_one_line_naming_the_folder(capsys, tmp_path, root, how):
    named = _break(root, how)
    code, _, stderr = train_cli(capsys, DARTS_V2, "darts", root, tmp_path / "run")
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and named in stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("workers", ["0", "2"])
def test_an_image_that_does_not_decode_is_named_at_load_time(capsys, tmp_path, root, workers):
    bad = root / "train" / "cat" / "1.JPEG"
    bad.write_bytes(b"not a jpeg at all")
    code, _, stderr = train_cli(capsys, DARTS_V2, "darts", root, tmp_path / "run",
                                "--workers", workers)
    assert code == 2, stderr
    assert len(stderr.strip().splitlines()) == 1 and f"{bad}: cannot decode" in stderr
    assert not (tmp_path / "run" / "summary.json").exists()


@pytest.mark.parametrize("argv, word", [(["--max-steps", "0"], "max-steps"),
                                        (["--schedule", "step"], "schedule"),
                                        (["--size", "32"], "--image-size")])
def test_bad_options_write_nothing(capsys, tmp_path, root, argv, word):
    code, _, stderr = train_cli(capsys, DARTS_V2, "darts", root, tmp_path / "run", *argv)
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and word in stderr
    assert not (tmp_path / "run").exists()


def test_imagenet_options_are_refused_for_other_datasets(capsys, tmp_path):
    code, _, stderr = run_cli(["nas", "train", "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",
                               "--max-steps", "2", "--out", str(tmp_path / "run")], capsys)
    assert code == 2 and "--max-steps is an option of --dataset imagenet" in stderr


def _rank_run(rank: int, world: int, port: int, root: str, out: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GENLAB_QUIET="1")
    torch.set_num_threads(1)
    train_imagenet(_config(root, image_size=64, lr=0.01), out, progress_bar=False)


def test_two_processes_train_what_one_trains(tmp_path, root):
    """torchrun's data parallel (gloo): each rank reads half of every batch of 4; the weights
    agree up to rounding (relative difference of all of them: 3e-6 here). At 64 px and lr
    0.01: at 32 px the last cells' BatchNorms normalise 4 values of 1x1 maps, and at the
    recipe's lr this tiny network's second step turns the first step's rounding (1e-4) into a
    10-20% difference between the two trajectories."""
    import socket

    import torch.multiprocessing as mp

    one = train_imagenet(_config(root, image_size=64, lr=0.01), tmp_path / "one",
                         progress_bar=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_rank_run, args=(2, port, str(root), str(tmp_path / "two")), nprocs=2,
                       join=True, start_method="spawn")
    two = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert two["processes"] == 2 and two["steps"] == one["steps"] == 2
    a = load_checkpoint(tmp_path / "one" / "checkpoint.pt")["model"]
    b = load_checkpoint(tmp_path / "two" / "checkpoint.pt")["model"]
    keys = [k for k in a if a[k].is_floating_point()]
    flat_a, flat_b = (torch.cat([w[k].double().flatten() for k in keys]) for w in (a, b))
    assert float((flat_a - flat_b).norm() / flat_a.norm()) < 1e-4
    assert two["top1"] == one["top1"] and two["val_loss"] == pytest.approx(one["val_loss"],
                                                                           rel=1e-4)


def test_trainer_max_steps_cross_epochs_and_count_resumed_steps(tmp_path):
    """The Trainer's max_steps: 3 batches an epoch, 5 steps = 2 epochs (the second cut short
    after 2 steps, then logged and checkpointed); a resume of the finished budget trains none."""
    from genlab.core.runs import RunDir
    from genlab.core.trainer import Trainer

    x, y = torch.randn(12, 3), torch.randint(0, 2, (12,))
    seen = []

    def source(epoch):
        seen.append(epoch)
        return [(x[i:i + 4], y[i:i + 4]) for i in range(0, 12, 4)]

    def trainer():
        torch.manual_seed(0)
        net = nn.Linear(3, 2)
        return Trainer(net, torch.optim.SGD(net.parameters(), lr=0.1),
                       nn.functional.cross_entropy, progress_bar=False)

    t = trainer()
    result = t.fit(source, 10, run=RunDir(tmp_path / "r", {"x": 1}), max_steps=5)
    assert (t.global_step, len(result.history), seen) == (5, 2, [0, 1])
    again = trainer()
    again.fit(source, 10, run=RunDir(tmp_path / "r", {"x": 1}, resume=True), max_steps=5)
    assert again.global_step == 5 and seen == [0, 1]
    assert torch.equal(again.model.weight, t.model.weight)


def test_an_imagenet_run_predicts_as_its_evaluation_reads(tmp_path, root):
    """The run keeps the evaluation's resize (shorter side to 256/224 of the crop, centre
    crop) and ImageNet's normalisation: a val file, or its pixels as a tensor, is predicted
    as the model scores eval_transform's input."""
    import genlab

    train_imagenet(_config(root), tmp_path / "run", progress_bar=False)
    run = genlab.load(tmp_path / "run")
    image = root / "val" / CLASSES[1] / "0.JPEG"
    x = imagefolder.eval_transform(32)(Image.open(image).convert("RGB"))
    run.model.eval()
    with torch.no_grad():
        expected = torch.softmax(run.model(x[None]), 1)[0]
    pixels = torch.from_numpy(np.array(Image.open(image))).permute(2, 0, 1)  # uint8, C x H x W
    for given in (image, pixels):
        [row] = run.predict([given])
        got = torch.tensor([row.probabilities[c] for c in CLASSES])
        assert row.label == CLASSES[int(expected.argmax())]
        tol = 1e-5 if given is image else 2e-2  # a tensor is resized by torch, not PIL
        assert torch.allclose(got, expected, atol=tol), (got, expected)
