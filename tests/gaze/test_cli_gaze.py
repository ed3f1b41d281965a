import json

import cv2
import numpy as np
import pytest

from genlab.cli import main


def _run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


@pytest.mark.parametrize(
    "args,word",
    [
        (["--experts", "0"], "experts"),
        (["--temperature", "0"], "temperature"),
        (["--fraction", "1.5"], "fraction"),
        (["--fraction", "0"], "fraction"),
        (["--routing", "top2"], "routing"),
        (["--source", "nowhere"], "nowhere"),
        (["--size", "32by48"], "size"),
        (["--steps", "0"], "steps"),
        (["--target", "mpii:"], "mpii"),
        (["--source", "nosuchset:/x"], "nosuchset"),
    ],
)
def test_train_bad_options_exit_2_with_one_line(args, word, tmp_path, capsys):
    code, out = _run(["gaze", "train", "--out", str(tmp_path / "r"), *args], capsys)
    assert code == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("genlab: ") and word in lines[0]
    assert not (tmp_path / "r").exists()  # nothing written for a bad option


def test_predict_missing_image_exit_2(tmp_path, capsys):
    code, out = _run(["gaze", "predict", str(tmp_path), str(tmp_path / "x.png")], capsys)
    assert code == 2 and len(out.err.strip().splitlines()) == 1


def _ok(args, capsys):
    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    return capsys.readouterr().out


def test_train_predict_eval_end_to_end(tmp_path, capsys):
    """A tiny CLI training, then predict with its run folder, then eval on another domain."""
    run = str(tmp_path / "run")
    out = _ok(
        [
            "gaze",
            "train",
            "--out",
            run,
            "--width",
            "4",
            "--steps",
            "2",
            "--eval-every",
            "2",
            "--train-count",
            "64",
            "--test-count",
            "16",
            "--size",
            "16x24",
            "--experts",
            "2",
        ],
        capsys,
    )
    assert "target narrow-m: mean angular error" in out and "constant predictor" in out
    assert out.strip().splitlines()[-1] == f"outputs in {run}"
    cv2.imwrite(str(tmp_path / "eye.png"), np.full((30, 40, 3), 128, np.uint8))
    out = _ok(
        ["gaze", "predict", run, str(tmp_path / "eye.png"), "--out", str(tmp_path / "p.png")],
        capsys,
    )
    assert "pitch" in out and (tmp_path / "p.png").is_file()
    _ok(
        [
            "gaze",
            "eval",
            run,
            "--out",
            str(tmp_path / "ev"),
            "--data",
            "narrow-d",
            "--count",
            "16",
        ],
        capsys,
    )
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["images"] == 16 and summary["mean_deg"] > 0
    assert len(summary["router"]["top1_share"]) == 2
    code, err = _run(["gaze", "train", "--out", run, "--width", "4"], capsys)
    assert code == 2 and "--resume" in err.err  # an existing run is never overwritten
