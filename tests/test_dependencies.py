"""The dependency checker (deptry, `make deps`, run by CI) passes on the tree and catches an
import that no declared dependency brings."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEPTRY = Path(sys.executable).with_name("deptry")
pytestmark = pytest.mark.skipif(not DEPTRY.exists(), reason="deptry (the dev extra) absent")


def _deptry(pyproject: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(DEPTRY), str(REPO / "src"), "--config", str(pyproject),
                           "--no-ansi"], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_the_tree_declares_what_it_imports():
    proc = _deptry(REPO / "pyproject.toml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_removed_declaration_is_caught(tmp_path):
    text = (REPO / "pyproject.toml").read_text()
    without = re.sub(r'^\s*"scipy>=[^"]*",\n', "", text, flags=re.M)
    assert without != text
    (tmp_path / "pyproject.toml").write_text(without)
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    proc = _deptry(tmp_path / "pyproject.toml")
    assert proc.returncode == 1
    # DEP001 (nothing brings it) or DEP003 (only another package brings it, here
    # scikit-learn): either way the undeclared import fails the check
    assert re.search(r"DEP00[13] 'scipy' imported but", proc.stderr), proc.stderr
