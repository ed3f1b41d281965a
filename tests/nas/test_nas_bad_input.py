"""Bad input to `genlab nas ...` (issue 18): exit code 2, one line on stderr, nothing at --out;
then the corrected command succeeds in the same --out. In process, at tiny sizes."""

import pytest
from nas_reference import DARTS_V2

import genlab.nas.retrain as retrain_mod
import genlab.nas.search as search_mod
from genlab.cli import main
from genlab.nas.inputs import LIMITS

NB201 = "|nor_conv_3x3~0|+|skip_connect~0|nor_conv_3x3~1|+|skip_connect~0|none~1|nor_conv_3x3~2|"
TINY_SEARCH = ["-C", "2", "--steps", "1", "--batch-size", "8", "--hessian-points", "0"]
TINY_TRAIN = ["-C", "2", "--epochs", "1", "--batch-size", "32"]


def _run(argv, capsys):
    """Exit code, stdout and stderr of the CLI run in this process."""
    capsys.readouterr()
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def quiet(monkeypatch):
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)
    monkeypatch.setattr(search_mod, "_plots", lambda run, history, space: None)
    monkeypatch.setattr(retrain_mod, "_plot_curves", lambda run: None)


def _bad_table(tmp_path):
    path = tmp_path / "table.csv"
    path.write_bytes(b"\xff\xfeArchitectureString,\x00\x81\n")
    return path


# (case id, argv after "nas" with OUT and TABLE placeholders, a word the line must hold)
CASES = [
    ("unknown-dataset", ["search", "--out", "OUT", "--dataset", "mnist"], "--dataset"),
    ("dataset-without-root", ["search", "--out", "OUT", "--dataset", "cifar10"], "--data-root"),
    ("search-size-1", ["search", "--out", "OUT", "--size", "1", *TINY_SEARCH], "--size 3"),
    ("train-size-1", ["train", NB201, "--out", "OUT", "--size", "1", *TINY_TRAIN], "--size 3"),
    ("lookup-non-utf8-table", ["lookup", NB201, "--nb201-table", "TABLE"], "UTF-8"),
    ("search-non-utf8-table", ["search", "--out", "OUT", "--nb201-table", "TABLE",
                               *TINY_SEARCH], "UTF-8"),
    ("darts-genotype-without-space", ["train", DARTS_V2, "--out", "OUT"], "--space darts"),
    ("absurd-steps", ["search", "--out", "OUT", "--steps", str(10**12)],
     f"{LIMITS['steps']:,}"),
    ("absurd-epochs", ["train", NB201, "--out", "OUT", "--epochs", str(10**12)],
     f"{LIMITS['epochs']:,}"),
]


@pytest.mark.parametrize(("argv", "word"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_and_leaves_nothing(argv, word, tmp_path, capsys, quiet):
    out = tmp_path / "run"
    subs = {"OUT": out, "TABLE": _bad_table(tmp_path)}
    code, _, err = _run(["nas", *(subs.get(a, a) for a in argv)], capsys)
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("genlab: "), err
    assert word in lines[0], lines[0]
    assert not out.exists()


def test_corrected_search_succeeds_in_the_same_out(tmp_path, capsys, quiet):
    out = tmp_path / "run"
    code, _, err = _run(["nas", "search", "--out", out, "--size", "1", *TINY_SEARCH], capsys)
    assert code == 2 and not out.exists()
    code, stdout, err = _run(["nas", "search", "--out", out, "--size", "3", *TINY_SEARCH],
                             capsys)
    assert code == 0, err
    assert (out / "summary.json").is_file()
    assert "--reg ber stands for ber-kl" in stdout.splitlines()[0]


def test_corrected_train_succeeds_in_the_same_out(tmp_path, capsys, quiet):
    out = tmp_path / "run"
    code, _, _ = _run(["nas", "train", DARTS_V2, "--out", out, *TINY_TRAIN, "-N", "3"], capsys)
    assert code == 2 and not out.exists()
    code, _, err = _run(["nas", "train", DARTS_V2, "--space", "darts", "--out", out,
                         *TINY_TRAIN, "-N", "3"], capsys)
    assert code == 0, err
    assert (out / "summary.json").is_file()


def test_help_lists_every_regulariser_and_the_ber_alias(capsys):
    from genlab.nas.regularizers import PENALTIES, describe_setting, preset_of

    code, stdout, _ = _run(["nas", "search", "--help"], capsys)
    assert code == 0
    text = " ".join(stdout.replace("\u2502", " ").split())  # the rich panel's borders
    for name in PENALTIES.choices():
        assert name in text
    assert "ber is an alias of the chosen setting" in text
    assert " ".join(describe_setting(preset_of("ber")).split()) in text


def test_bench_resume_has_help(capsys):
    code, stdout, _ = _run(["nas", "bench", "--help"], capsys)
    assert code == 0
    text = " ".join(stdout.replace("\u2502", " ").split())
    assert "Continue a stopped bench in --out" in text


def test_spaces_columns_align(capsys):
    code, stdout, _ = _run(["nas", "spaces"], capsys)
    assert code == 0
    lines = stdout.splitlines()
    starts = {ln.index(ln.split()[1], len(ln.split()[0])) for ln in lines}
    assert len(starts) == 1, lines
