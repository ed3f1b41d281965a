"""benchmarks/nas_side_by_side.py loads each authors' checkout in turn: two checkouts whose
modules share names (model_search, operations) give each its own modules, none left behind."""

import sys
from pathlib import Path

import pytest
from benchmark_scripts import fake_autodl, load  # tests/ is on the path


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


@pytest.mark.parametrize("layout", ["xautodl", "lib"])
def test_autodl_checkout_loads_and_steps_as_darts_v1(tmp_path, side_by_side, layout):
    """AutoDL's NB-201 search network at C=16, 5 cells per stage, 4 nodes, BatchNorm with
    running statistics; its step moves the weights (SGD) and alpha (Adam)."""
    import torch

    model = side_by_side.autodl_model(str(fake_autodl(tmp_path / "AutoDL", layout)), 10)
    assert model.args == (16, 5, 4, 10, False, True)
    assert not any(name.startswith(("xautodl", "models")) for name in sys.modules)
    g = torch.Generator().manual_seed(0)
    batch = [(torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g))
             for _ in range(2)]
    before = [p.detach().clone() for p in model.parameters()]
    side_by_side.autodl_step(model, *batch)()
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))


def test_the_command_line_asks_for_a_checkout_and_a_device_it_has(side_by_side, capsys):
    import torch

    with pytest.raises(SystemExit):
        side_by_side.main(["--rounds", "1"])
    assert "give at least one checkout" in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            side_by_side.main(["--device", "cuda", "--autodl-src", "AutoDL"])
        assert "--device cuda: torch" in capsys.readouterr().err
