"""`genlab optim train` / `optim measure` bad input (issue 18): exit 2, one line on stderr,
nothing left at --out; the corrected command then succeeds in the same --out."""

import pytest

from genlab.cli import main
from genlab.core.storage.checkpoints import model_record, save_checkpoint

TINY = ["--width", "8", "--depth", "1", "--epochs", "1"]
MEASURE_TINY = ["--measure-samples", "32", "--measure-iterations", "3", "--measure-probes", "2"]


def run_cli(args, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny `optim train` run, and folders holding checkpoints or configs of other kinds."""
    root = tmp_path_factory.mktemp("optim_bad")
    run = root / "run"
    with pytest.raises(SystemExit) as exc:
        main(["optim", "train", "--out", str(run), *TINY, "--no-measure"])
    assert exc.value.code in (0, None)
    good_config = (run / "config.json").read_text()
    for name, config in (("nonutf8", b"\xff\xfe{"), ("malformed", b'{"arch": '),
                         ("list", b"[1]"), ("gazeconfig", b'{"command": "gaze train"}')):
        (root / name).mkdir()
        (root / name / "checkpoint.pt").write_bytes((run / "checkpoint.pt").read_bytes())
        (root / name / "config.json").write_bytes(config)
    for name, kind, args in (("gaze", "gaze train", {"width": 4}),
                             ("nas", "nas train", {"arch": "|nor_conv_3x3~0|+|none~0|"})):
        (root / name).mkdir()
        save_checkpoint(root / name / "checkpoint.pt",
                        {"model_record": model_record(kind, "genlab.loading:load", args),
                         "model": {}})
        (root / name / "config.json").write_text(good_config)  # kind comes from the checkpoint
    return root


TRAIN = ["optim", "train", *TINY]
CASES = {
    "unknown arch": (TRAIN + ["--arch", "foo"], "arch"),
    "absurd width": (TRAIN + ["--width", "1000000000"], "width must be <= "),
    "too many parameters": (TRAIN + ["--width", "60000", "--depth", "2"], "parameters"),
    "absurd depth": (TRAIN + ["--depth", "1000000"], "depth must be <= "),
    "absurd epochs": (TRAIN + ["--epochs", str(10**12)], "epochs must be <= "),
    "absurd measure iterations": (TRAIN + ["--measure-iterations", str(10**9)], "<= "),
    "transformer width": (TRAIN + ["--arch", "transformer", "--width", "7"], "heads"),
    "unknown device": (["optim", "measure", "{root}/run", "--device", "foo"], "device"),
    "absurd toy steps": (["optim", "toy", "--iterations", str(10**12)],
                         "iterations must be <= "),
    "absurd sparse epochs": (["optim", "sparse", "--epochs", str(10**12)], "epochs must be <= "),
    "absurd sparse size": (["optim", "sparse", "--n", str(10**6), "--d", str(10**6)], "limit"),
    "backward seed range": (["optim", "toy", "--seeds", "3-1"], "--seeds"),
    "seeds not numbers": (["optim", "sparse", "--seeds", "a,b"], "--seeds"),
    "bn mode": (["optim", "measure", "{root}/run", "--bn-mode", "foo"], "--bn-mode"),
    "absurd probes": (["optim", "measure", "{root}/run", "--measure-probes", str(10**9)], "<= "),
    "missing checkpoint": (["optim", "measure", "{root}/nonexist.pt"], "nonexist.pt"),
    "non-UTF-8 config": (["optim", "measure", "{root}/nonutf8"], "config.json"),
    "malformed config": (["optim", "measure", "{root}/malformed"], "config.json"),
    "config not an object": (["optim", "measure", "{root}/list"], "config.json"),
    "config of a gaze run": (["optim", "measure", "{root}/run", "--train-config",
                              "{root}/gazeconfig/config.json"],
                             "is a gaze train run; optim measure needs an optim train run"),
    "gaze checkpoint": (["optim", "measure", "{root}/gaze"],
                        "is a gaze train run; optim measure needs an optim train run"),
    "nas train checkpoint": (["optim", "measure", "{root}/nas/checkpoint.pt"],
                             "is a nas train run; optim measure needs an optim train run"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_one_line_nothing_left(case, trained, tmp_path, capsys):
    argv, needle = CASES[case]
    out = tmp_path / "out"
    argv = [a.format(root=trained) for a in argv] + ["--out", str(out)]
    code, captured = run_cli(argv, capsys)
    lines = captured.err.strip().splitlines()
    assert code == 2, captured
    assert len(lines) == 1 and lines[0].startswith("genlab: "), lines
    assert needle in lines[0], lines[0]
    assert not out.exists()


def test_corrected_commands_then_succeed_in_the_same_out(trained, tmp_path, capsys):
    out = tmp_path / "train"
    assert run_cli(TRAIN + ["--arch", "foo", "--out", str(out)], capsys)[0] == 2
    code, captured = run_cli(TRAIN + ["--arch", "cnn", "--out", str(out),
                                      "--measure-samples", "32", "--measure-iterations", "2",
                                      "--measure-probes", "2"], capsys)
    assert code in (0, None) and (out / "summary.json").exists()
    assert "|" not in captured.out  # an aligned table, not Markdown
    assert "hessian_trace" in captured.out
    meas = tmp_path / "measure"
    assert run_cli(["optim", "measure", str(out), "--bn-mode", "foo", "--out", str(meas)],
                   capsys)[0] == 2
    code, _ = run_cli(["optim", "measure", str(out), "--bn-mode", "batch", "--out", str(meas),
                       *MEASURE_TINY], capsys)
    assert code in (0, None) and (meas / "summary.json").exists()
    # an absurd width, a missing checkpoint, absurd toy steps: refused, then corrected
    wide = tmp_path / "wide"
    assert run_cli(TRAIN + ["--width", "1000000000", "--out", str(wide)], capsys)[0] == 2
    assert not wide.exists()
    code, captured = run_cli(TRAIN + ["--no-measure", "--out", str(wide)], capsys)
    assert code in (0, None) and captured.out.strip().splitlines()[-1] == f"outputs in {wide}"
    again = tmp_path / "again"
    assert run_cli(["optim", "measure", str(tmp_path / "nonexist.pt"), "--out", str(again)],
                   capsys)[0] == 2
    code, _ = run_cli(["optim", "measure", str(wide), "--out", str(again), *MEASURE_TINY],
                      capsys)
    assert code in (0, None) and (again / "summary.json").exists()
    toy = tmp_path / "toy"
    assert run_cli(["optim", "toy", "--iterations", str(10**12), "--out", str(toy)],
                   capsys)[0] == 2
    code, _ = run_cli(["optim", "toy", "--iterations", "20", "--seeds", "0-1", "--out",
                       str(toy)], capsys)
    assert code in (0, None) and (toy / "summary.json").exists()


def test_help_lists_every_choice_and_what_measure_writes(capsys, monkeypatch):
    from genlab.optim.optimizers.registry import OPTIMIZERS
    from genlab.optim.training.models import ARCHS

    monkeypatch.setenv("COLUMNS", "300")
    code, captured = run_cli(["optim", "train", "--help"], capsys)
    assert code in (0, None)
    assert all(name in captured.out for name in (*ARCHS, *OPTIMIZERS)), captured.out
    assert "resnet" in captured.out
    code, captured = run_cli(["optim", "measure", "--help"], capsys)
    assert "metrics.jsonl" not in captured.out and "plots" not in captured.out
    assert "summary.json" in captured.out and "eval | batch" in captured.out
