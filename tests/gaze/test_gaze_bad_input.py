"""Bad input to the gaze commands (issue 18): exit code 2, one line on stderr, nothing left
at --out; then the corrected command succeeds in the same --out."""

import os
import shutil
from dataclasses import asdict

import cv2
import numpy as np
import pytest
import torch

from genlab.cli import main
from genlab.core.registry import path_of
from genlab.core.runs import RunDir
from genlab.core.storage.checkpoints import MODEL_RECORD, model_record
from genlab.gaze.models import build_gaze_model
from genlab.gaze.synth.dataset import render_to_folder
from genlab.gaze.train import GazeTrainConfig

H, W = 16, 24
TINY = ["--width", "4", "--steps", "2", "--eval-every", "2", "--train-count", "64",
        "--test-count", "16", "--size", f"{H}x{W}"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A gaze run (untrained, in train_gaze's format), an eye image, samples.png and
    single-eye PNGs from gaze render, a nas search and an optim train run."""
    root = tmp_path_factory.mktemp("bad_input")
    cfg = GazeTrainConfig(width=4, appearance_dim=8, gaze_feat_dim=8, size=[H, W], experts=2)
    torch.manual_seed(0)
    model = build_gaze_model(cfg.model, **cfg.model_hparams())
    RunDir(root / "run", asdict(cfg)).save({"model": model.state_dict(),
                                            MODEL_RECORD: cfg.model_record()})
    cv2.imwrite(str(root / "eye.png"), np.full((H, W, 3), 128, np.uint8))
    render_to_folder(8, "app-e", 0, root / "render", size=(H, W), png=3)

    from genlab.nas.spaces import build_space_supernet
    from genlab.optim.training.models import build_model

    for kind, builder, args in (
        ("nas search", build_space_supernet,
         {"space": "nb201", "num_classes": 10, "in_channels": 3, "channels": 4, "cells": 1}),
        ("optim train", build_model, {"arch": "mlp", "width": 4, "depth": 1}),
    ):
        net = builder(**args)
        RunDir(root / kind.replace(" ", "_"), {"command": kind, **args}).save(
            {"model": net.state_dict(), MODEL_RECORD: model_record(kind, path_of(builder), args)})
    return root


def _bad_config(content: bytes):
    def make(root, tmp):
        run = tmp / "run"
        shutil.copytree(root / "run", run)
        (run / "config.json").write_bytes(content)
        return [str(run), str(root / "eye.png")]
    return make


def _read_only(root, tmp, monkeypatch):
    ro = tmp / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: let the folder look like a read-only mount
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(ro)
                            else real(p, mode, **kw))
    return [str(root / "run"), str(root / "eye.png")]


PREDICT = "gaze predict"
CASES = {
    # id: (command, make(root, tmp) -> arguments before --out, --out name, word in the line)
    "train-oracle-default-world": (
        "gaze train", lambda root, tmp: ["--routing", "oracle", *TINY], "r",
        "no appearance clusters"),
    "train-oracle-too-few-experts": (
        "gaze train", lambda root, tmp: ["--routing", "oracle", "--source", "app-e",
                                         "--target", "app-m", "--experts", "2", *TINY], "r",
        "--experts 4"),
    "predict-out-no-extension": (
        PREDICT, lambda root, tmp: [str(root / "run"), str(root / "eye.png")], "noext",
        "use a .png or .jpg name"),
    "predict-out-folder": (
        PREDICT, lambda root, tmp: [str(root / "run"), str(root / "eye.png")], "folder/",
        "is a folder"),
    "predict-out-read-only": (PREDICT, _read_only, "ro/a.png", "cannot write there"),
    "predict-config-not-utf8": (
        PREDICT, _bad_config(b'\xff\xfe{"model": 1}'), "p.png", "not UTF-8"),
    "predict-config-bad-json": (PREDICT, _bad_config(b'{"model": "moegaze", '), "p.png",
                                "not valid JSON"),
    "predict-config-not-an-object": (PREDICT, _bad_config(b"[1, 2]"), "p.png",
                                     "not a run's options"),
    "predict-config-bad-size": (
        PREDICT, _bad_config(b'{"model": "moegaze", "size": "16x24"}'), "p.png",
        "not a gaze training config"),
    "predict-nas-run": (
        PREDICT, lambda root, tmp: [str(root / "nas_search"), str(root / "eye.png")], "p.png",
        "is a nas search run; gaze predict needs a gaze train run"),
    "predict-optim-checkpoint": (
        PREDICT, lambda root, tmp: [str(root / "optim_train" / "checkpoint.pt"),
                                    str(root / "eye.png")], "p.png",
        "is an optim train run; gaze predict needs a gaze train run"),
    "predict-grid-of-eyes": (
        PREDICT, lambda root, tmp: [str(root / "run"), str(root / "render" / "samples.png")],
        "p.png", f"takes {H}x{W} (height x width)"),
    "predict-one-bad-image-in-a-batch": (
        PREDICT, lambda root, tmp: [str(root / "run"), str(root / "eye.png"),
                                    str(root / "render" / "samples.png")], "p.png",
        "samples.png"),
    "eval-optim-checkpoint": (
        "gaze eval", lambda root, tmp: [str(root / "optim_train" / "checkpoint.pt"), "--count",
                                        "8"], "ev",
        "is an optim train run; gaze eval needs a gaze train run"),
    "eval-nas-run": (
        "gaze eval", lambda root, tmp: [str(root / "nas_search"), "--count", "8"], "ev",
        "is a nas search run; gaze eval needs a gaze train run"),
    "eval-config-not-utf8": (
        "gaze eval", lambda root, tmp: [*_bad_config(b"\xff{}")(root, tmp)[:1], "--count", "8"],
        "ev", "not UTF-8"),
    "render-png-more-than-count": (
        "gaze render", lambda root, tmp: ["--count", "4", "--png", "5", "--size", f"{H}x{W}"],
        "eyes", "--png must be in 0..4"),
}


def _run(argv, capsys):
    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    return code, capsys.readouterr()


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exit_2_one_line_nothing_left(case, inputs, tmp_path, capsys, monkeypatch):
    command, make, out_name, word = CASES[case]
    args = (make(inputs, tmp_path, monkeypatch) if make is _read_only
            else make(inputs, tmp_path))
    out = tmp_path / out_name
    if out_name.endswith("/"):
        out.mkdir()
    code, res = _run([*command.split(), *args, "--out", str(out)], capsys)
    lines = res.err.strip().splitlines()
    assert code == 2, res.err
    assert len(lines) == 1 and lines[0].startswith("genlab: "), res.err
    assert word in lines[0], lines[0]
    if out_name.endswith("/"):
        assert out.is_dir() and not any(out.iterdir())  # the folder given stays empty
    else:
        assert not out.exists()
    if case == "predict-out-read-only":
        assert "png or .jpg" not in lines[0]


def test_oracle_corrected_succeeds_in_the_same_out(tmp_path, capsys):
    out = str(tmp_path / "r")
    code, _ = _run(["gaze", "train", "--out", out, "--routing", "oracle", *TINY], capsys)
    assert code == 2 and not (tmp_path / "r").exists()
    code, res = _run(["gaze", "train", "--out", out, "--routing", "oracle", "--source", "app-e",
                      "--target", "app-m", "--experts", "4", *TINY], capsys)
    assert code == 0, res.err
    assert "target app-m: mean angular error" in res.out


def test_render_png_then_predict_a_batch_with_a_readable_picture(inputs, tmp_path, capsys):
    """gaze render --png N writes single eyes that gaze predict takes, as one batch: one
    line per image, the same answers as one at a time, and a scaled picture with a legend."""
    from genlab.gaze.predict import PICTURE_TILE_HEIGHT, predict_file

    eyes = sorted((inputs / "render" / "eyes").glob("eye_*.png"))
    assert len(eyes) == 3 and (inputs / "render" / "eyes.csv").read_text().count("\n") == 4
    assert cv2.imread(str(eyes[0])).shape == (H, W, 3)
    pic = tmp_path / "pic" / "batch.png"
    code, res = _run(["gaze", "predict", str(inputs / "run"), *map(str, eyes), "--out",
                      str(pic)], capsys)
    assert code == 0, res.err
    lines = res.out.strip().splitlines()
    assert len(lines) == 4 and lines[-1] == f"outputs in {pic}"
    for eye, line in zip(eyes, lines, strict=False):
        single = predict_file(inputs / "run", eye)
        assert line == (f"{eye}: pitch {single['pitch_deg']:+.2f} deg, "
                        f"yaw {single['yaw_deg']:+.2f} deg")
    drawn = cv2.imread(str(pic))
    assert drawn.shape[0] > PICTURE_TILE_HEIGHT and drawn.shape[1] >= 3 * W * 8
    legend = drawn[:20]
    red = (legend[..., 2] > 180) & (legend[..., 1] < 80) & (legend[..., 0] < 80)
    assert red.any()  # the legend's red arrow (the prediction)


GOOD_RUN = lambda root, tmp: [str(root / "run"), str(root / "eye.png")]  # noqa: E731
# id of a refused case: (arguments of the corrected command, its --out if not the same)
CORRECTED = {
    "predict-out-no-extension": (GOOD_RUN, "noext.png"),
    "predict-out-folder": (GOOD_RUN, "folder/predicted.png"),  # the name the line suggests
    **{case: (GOOD_RUN, None) for case in CASES if case.startswith("predict-config")},
    "predict-nas-run": (GOOD_RUN, None),
    "predict-optim-checkpoint": (GOOD_RUN, None),
    "predict-grid-of-eyes": (lambda root, tmp: [str(root / "run"), str(root / "render" / "eyes"
                                                                     / "eye_0000.png")], None),
    "eval-optim-checkpoint": (lambda root, tmp: [str(root / "run"), "--count", "8"], None),
    "eval-nas-run": (lambda root, tmp: [str(root / "run"), "--count", "8"], None),
    "eval-config-not-utf8": (lambda root, tmp: [str(root / "run"), "--count", "8"], None),
    "render-png-more-than-count": (lambda root, tmp: ["--count", "4", "--png", "4", "--size",
                                                      f"{H}x{W}"], None),
}


@pytest.mark.parametrize("case", list(CORRECTED))
def test_the_corrected_command_succeeds_in_the_same_out(case, inputs, tmp_path, capsys):
    command, make, out_name, _ = CASES[case]
    out = tmp_path / out_name
    if out_name.endswith("/"):
        out.mkdir()
    code, res = _run([*command.split(), *make(inputs, tmp_path), "--out", str(out)], capsys)
    assert code == 2, res.err
    fix, fixed_out = CORRECTED[case]
    out = tmp_path / fixed_out if fixed_out else out
    code, res = _run([*command.split(), *fix(inputs, tmp_path), "--out", str(out)], capsys)
    assert code == 0, res.err
    assert res.out.strip().splitlines()[-1] == f"outputs in {out}" and out.exists()


@pytest.mark.parametrize(("option", "value", "limit"), [("--steps", "1000000000000", "10,000,000"),
                                                        ("--width", "100000", "1,024"),
                                                        ("--size", "100000x48", "2,048")])
def test_absurd_sizes_are_refused_before_anything_is_rendered(option, value, limit, tmp_path,
                                                               capsys):
    out = tmp_path / "run"
    code, captured = _run(["gaze", "train", "--out", str(out), option, value], capsys)
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and option in lines[0] and limit in lines[0], lines
    assert not out.exists()
