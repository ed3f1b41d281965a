"""Bad input to `genlab nas ...` (issue 18): exit code 2, one line on stderr, nothing at --out;
then the corrected command succeeds in the same --out. In process, at tiny sizes."""

import pytest
from nas_reference import DARTS_V2
from nas_reference import NB201_CELL as NB201
from nas_reference import run_cli as _run

import genlab.nas.retrain as retrain_mod
import genlab.nas.search as search_mod
from genlab.nas.inputs import LIMITS

TINY_SEARCH = ["-C", "2", "--steps", "1", "--batch-size", "8", "--hessian-points", "0"]
TINY_TRAIN = ["-C", "2", "--epochs", "1", "--batch-size", "32"]




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
    ("absurd-size", ["search", "--out", "OUT", "--size", "5000"], f"{LIMITS['size']:,}"),
    ("size-not-square", ["search", "--out", "OUT", "--size", "8x6", *TINY_SEARCH], "square"),
    ("size-not-a-size", ["train", NB201, "--out", "OUT", "--size", "big"], "HEIGHTxWIDTH"),
    ("nb201-cell-without-space", ["train", NB201, "--space", "darts", "--out", "OUT"],
     "looks like a nb201 genotype; pass --space nb201"),
    ("bench-seeds-backwards", ["bench", "--out", "OUT", "--seeds", "3-1", "--steps", "1",
                               "--retrain-epochs", "0"], "--seeds"),
    ("bench-seed-repeated", ["bench", "--out", "OUT", "--seeds", "0,0", "--steps", "1",
                             "--retrain-epochs", "0"], "repeated"),
    ("bench-absent-device", ["bench", "--out", "OUT", "--device", "cuda:7", "--steps", "1",
                             "--retrain-epochs", "0"], "--device"),
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
    assert "--reg ber stands for ber-anchor" in stdout.splitlines()[0]
    assert stdout.splitlines()[-1] == f"outputs in {out}"


def test_corrected_train_succeeds_in_the_same_out(tmp_path, capsys, quiet):
    out = tmp_path / "run"
    code, _, _ = _run(["nas", "train", DARTS_V2, "--out", out, *TINY_TRAIN, "-N", "3"], capsys)
    assert code == 2 and not out.exists()
    code, stdout, err = _run(["nas", "train", DARTS_V2, "--space", "darts", "--out", out,
                              *TINY_TRAIN, "-N", "3"], capsys)
    assert code == 0, err
    assert (out / "summary.json").is_file()
    assert stdout.splitlines()[-1] == f"outputs in {out}"


def _other_runs(tmp_path) -> dict:
    """Run folders of every kind nas must not take for its own (config.json as each writes)."""
    from dataclasses import asdict

    from genlab.core.runs import write_json
    from genlab.core.storage.checkpoints import MODEL_RECORD, model_record, save_checkpoint
    from genlab.nas.retrain import RetrainConfig
    from genlab.nas.search import SearchConfig, run_config

    folders = {}
    for name, config in (("search", run_config(SearchConfig())),
                         ("train", asdict(RetrainConfig(arch=NB201))),
                         ("gaze", {"experts": 2, "size": [36, 60]}),
                         ("unknown", {"something": 1})):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        if name != "unknown":  # what every genlab run records
            config = {**config, "genlab_version": "0.1.0"}
        write_json(folders[name] / "config.json", config)
    save_checkpoint(folders["gaze"] / "checkpoint.pt",
                    {MODEL_RECORD: model_record("gaze train", "x:y", {}), "model": {}})
    return folders


# (command after "nas" with OUT, the folder given as OUT, the words of its one line)
OTHER_KIND = [
    (["train", NB201, "--out", "OUT", "--resume"], "search",
     "run exists: OUT is a nas search run; nas train needs its own --out"),
    (["bench", "--out", "OUT", "--resume"], "search",
     "run exists: OUT is a nas search run; nas bench needs its own --out"),
    (["search", "--out", "OUT", "--resume"], "train",
     "run exists: OUT is a nas train run; nas search needs its own --out"),
    (["search", "--out", "OUT"], "gaze",
     "run exists: OUT is a gaze train run; nas search needs its own --out"),
    (["train", NB201, "--out", "OUT", "--resume"], "unknown",
     "bad option: OUT is not a genlab run folder (its config.json was not written by genlab"),
    (["search", "--out", "OUT"], "unknown",
     "bad option: OUT is not a genlab run folder (its config.json was not written by genlab"),
]


@pytest.mark.parametrize(("argv", "kind", "words"), OTHER_KIND,
                         ids=[f"{a[0]}-on-{k}{'-resume' * ('--resume' in a)}"
                              for a, k, _ in OTHER_KIND])
def test_a_folder_of_another_kind_is_named_and_left_alone(argv, kind, words, tmp_path, capsys,
                                                          quiet):
    folder = _other_runs(tmp_path)[kind]
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    code, _, err = _run(["nas", *(folder if a == "OUT" else a for a in argv)], capsys)
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("genlab: " + words.replace("OUT", str(folder))), lines[0]
    assert "--resume" not in lines[0]  # no advice that cannot work
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_folder_of_the_users_files_is_refused_and_left_as_it_was(tmp_path, capsys, quiet):
    """`nas search --steps 10 --out mydocs`, mydocs holding the user's readme.txt (issue 48):
    one line, exit 2, nothing written beside it; an empty folder is taken."""
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "readme.txt").write_text("my notes")
    code, _, err = _run(["nas", "search", "--out", docs, *TINY_SEARCH], capsys)
    assert code == 2, err
    assert err.splitlines() == [f"genlab: bad option: {docs} is not a genlab run folder (it "
                                "holds readme.txt); --out must be a new or empty folder, or a "
                                "run of nas search"]
    assert [p.name for p in docs.iterdir()] == ["readme.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = _run(["nas", "search", "--out", empty, *TINY_SEARCH], capsys)
    assert code == 0, err
    assert (empty / "summary.json").is_file()


def test_help_lists_every_regulariser_and_the_ber_alias(capsys):
    from genlab.nas.regularizers import PENALTIES, describe_setting, preset_of

    code, stdout, _ = _run(["nas", "search", "--help"], capsys)
    assert code == 0
    text = " ".join(stdout.replace("\u2502", " ").split())  # the rich panel's borders
    # rich may break a line after a name's hyphen ("ber-" / "commit"): names are looked
    # for with every space removed, so the check holds at any terminal width
    packed = "".join(text.split())
    assert "|".join(PENALTIES.choices()) in packed
    assert "ber is an alias of the chosen setting" in text
    assert "".join(describe_setting(preset_of("ber")).split()) in packed


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
