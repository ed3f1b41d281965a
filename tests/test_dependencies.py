"""The dependency checker (deptry, `make deps`, run by CI) passes on the tree, catches an import
that no declaration brings (base or extra) and a declaration nothing imports; the packages
genlab imports by name (the official NAS-Bench-201 readers) are those the nb201 extra declares."""

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEPTRY = Path(sys.executable).with_name("deptry")
needs_deptry = pytest.mark.skipif(not DEPTRY.exists(), reason="deptry (the dev extra) absent")


def _deptry(pyproject: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(DEPTRY), str(REPO / "src"), "--config", str(pyproject),
                           "--no-ansi"], capture_output=True, text=True, cwd=REPO, timeout=300)


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _edited_copy(tmp_path: Path, old: str, new: str) -> Path:
    text = (REPO / "pyproject.toml").read_text()
    assert text.count(old) == 1, old
    (tmp_path / "pyproject.toml").write_text(text.replace(old, new))
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    return tmp_path / "pyproject.toml"


def _canonical(name: str) -> str:  # PEP 503
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(project: dict, group: str | None, name: str) -> str:
    reqs = project["dependencies"] if group is None else project["optional-dependencies"][group]
    found = [r for r in reqs if re.match(rf"{re.escape(name)}\s*(>|=|<|~|!|$)", r)]
    assert len(found) == 1, (group, name, reqs)
    return found[0]


@needs_deptry
def test_the_tree_declares_what_it_imports():
    proc = _deptry(REPO / "pyproject.toml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_deptry
@pytest.mark.parametrize(("group", "name", "module"), [
    (None, "scipy", "scipy"),                     # a base dependency
    (None, "opencv-python-headless", "cv2"),      # one whose module has another name
    ("detect", "pycocotools", "pycocotools"),     # an extra's
])
def test_a_removed_declaration_is_caught(group, name, module, tmp_path):
    req = _requirement(_pyproject()["project"], group, name)
    # the line of a base dependency; an extra's list keeps its brackets
    proc = _deptry(_edited_copy(tmp_path, f'"{req}",' if group is None else f'"{req}"', ""))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # DEP001 where the package is absent, DEP003 where it is installed all the same (here
    # every extra is): either way the undeclared import fails the check
    assert re.search(rf"DEP00[13] '{re.escape(module)}' imported but", proc.stderr), proc.stderr


@needs_deptry
def test_an_unused_declaration_is_caught(tmp_path):
    proc = _deptry(_edited_copy(tmp_path, '    "numpy>=', '    "click>=8",\n    "numpy>='))
    assert proc.returncode == 1
    assert "DEP002 'click' defined as a dependency but not used" in proc.stderr, proc.stderr


def test_the_packages_read_by_name_are_the_nb201_extra():
    from genlab.nas.spaces.nb201 import official

    config = _pyproject()
    module_map = config["tool"]["deptry"]["package_module_name_map"]
    assert "genlab[nb201]" in official.EXTRA
    for module, pip_name, _ in official.PACKAGES.values():
        _requirement(config["project"], "nb201", pip_name)
        assert module_map.get(pip_name, pip_name) == module
        dists = importlib.metadata.packages_distributions().get(module, [])
        if dists:  # installed: its metadata says which distribution brings the module
            assert _canonical(pip_name) in map(_canonical, dists), (module, dists)
