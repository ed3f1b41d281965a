"""benchmarks/nas_side_by_side.py loads each authors' checkout in turn: two checkouts whose
modules share names (model_search, operations) give each its own modules, none left behind."""

import sys
from pathlib import Path

import pytest
from benchmark_scripts import load  # tests/ is on the path


@pytest.fixture
def side_by_side():
    return load("nas_side_by_side")


def _checkout(root: Path, tag: str) -> Path:
    root.mkdir()
    (root / "operations.py").write_text(f"TAG = {tag!r}\n")
    (root / "model_search.py").write_text(
        "import sys\nfrom operations import TAG\nprint('printed at import')\n"
        "ARGV = list(sys.argv)\nclass Network:\n    tag = TAG\n")
    return root


def test_two_checkouts_with_the_same_module_names_load_apart(tmp_path, side_by_side, capsys):
    a = _checkout(tmp_path / "a", "darts")
    b = _checkout(tmp_path / "b", "pc-darts")
    (ma,) = side_by_side.import_from(str(a), ["model_search"], argv=["train_search.py", "--x"])
    (mb,) = side_by_side.import_from(str(b), ["model_search"])
    assert (ma.Network.tag, mb.Network.tag) == ("darts", "pc-darts")
    assert ma.ARGV == ["train_search.py", "--x"]  # their argparse at import sees our argv
    assert "model_search" not in sys.modules and "operations" not in sys.modules
    assert str(a) not in sys.path and str(b) not in sys.path
    assert "printed at import" not in capsys.readouterr().out


def test_a_missing_checkout_is_refused(tmp_path, side_by_side):
    with pytest.raises(SystemExit, match="no folder"):
        side_by_side.import_from(str(tmp_path / "nowhere"), ["model_search"])
