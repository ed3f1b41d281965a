"""The house's rules, checked on the source tree: folder sizes, function lengths, the import
direction, no import circle, a core that names no method, tests that import no script."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
METHODS = ("genlab.nas", "genlab.optim", "genlab.gaze")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}


def imports(path: Path) -> set[str]:
    """genlab modules ``path`` imports (anywhere in the file; ``from pkg import mod`` counts
    as importing ``pkg.mod`` when that is a module)."""
    found = set()
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
    return {m for m in found if m == "genlab" or m.startswith("genlab.")}


def test_every_package_and_module_states_its_concept():
    """One concept per sub-package (docs/design.md): each package's __init__ and each module
    opens with the docstring that names what it holds; flat prefixes that stand for a missing
    sub-package (darts_*, synth_*) are refused."""
    import ast

    for path in (SRC / "genlab").rglob("*.py"):
        assert ast.get_docstring(ast.parse(path.read_text())), path
    flat = [p.name for p in (SRC / "genlab").rglob("*.py")
            if p.name.startswith(("darts_", "synth_"))]
    assert flat == []


def test_core_imports_and_names_no_method():
    for name, path in MODULES.items():
        if not name.startswith("genlab.core"):
            continue
        assert not {m for m in imports(path) if m.startswith(METHODS)}, name
        text = path.read_text().lower()
        for word in ("nb201", "genlab.nas", "genlab.optim", "genlab.gaze", "darts"):
            assert word not in text, (name, word)


def test_method_packages_do_not_import_each_other_except_optims_optimisers():
    allowed = ("genlab.optim", "genlab.optim.optimizers", "genlab.optim.measures")
    for name, path in MODULES.items():
        own = next((m for m in METHODS if name == m or name.startswith(m + ".")), None)
        if own is None:
            continue
        for m in imports(path):
            other = next((x for x in METHODS if m == x or m.startswith(x + ".")), None)
            if other and other != own:
                assert m.startswith(allowed), (name, m)


def test_no_import_circle():
    graph = {name: imports(path) & set(MODULES) for name, path in MODULES.items()}
    # a package's __init__ may import its own sub-modules; a sub-module importing its
    # package root then closes no circle only if the root is lazy, which the walk sees
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_no_test_imports_a_script():
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text()
        for script_dir in ("benchmarks", "experiments"):
            assert f'sys.path.insert(0, str(REPO / "{script_dir}"' not in text, path
            assert f'"{script_dir}" / f"' not in text, path
        if path.name != "test_layout.py":
            assert "spec_from_file_location" not in text, path


MAX_MODULES = 16  # a folder above this holds more than one concept: split it (docs/design.md)


def test_no_folder_holds_more_than_sixteen_modules():
    """Each package folder of src/genlab holds at most MAX_MODULES modules beside its
    __init__ (sub-packages are folders of their own)."""
    crowded = {}
    for folder in (SRC / "genlab").rglob("*"):
        if folder.is_dir() and folder.name != "__pycache__":
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            if len(modules) > MAX_MODULES:
                crowded[str(folder.relative_to(SRC))] = len(modules)
    assert crowded == {}, crowded


MAX_FUNCTION_LINES = 60  # a longer function does several things: split it (docs/design.md)


def test_no_function_is_longer_than_sixty_lines():
    """Every function and method of src/genlab spans at most MAX_FUNCTION_LINES lines, from
    its ``def`` (decorators aside) to its last line; ruff's C901 (pyproject.toml) holds its
    branches to 12."""
    long = {}
    for path in (SRC / "genlab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{module_name(path)}.{node.name}"] = lines
    assert long == {}, long


def test_test_modules_have_unique_names():
    """The test folders are not packages: two test files with one name break collection."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
