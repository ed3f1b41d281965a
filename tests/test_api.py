"""docs/api.md and docs/api/*.md: every name they list imports.

The pages list the public API as ```python blocks of ``from genlab... import a, b`` lines;
this test execs each line, so a name that moves without its export breaks the suite.
"""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = [DOCS / "api.md", *sorted((DOCS / "api").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
IMPORT = re.compile(r"^from (genlab[\w.]*) import (.+)$")


def api_imports() -> list[tuple[str, str, str]]:
    """(page, module, name) for every name an API page lists."""
    found = []
    for page in PAGES:
        for block in BLOCK.findall(page.read_text()):
            for line in block.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                match = IMPORT.match(line)
                assert match, f"{page.name}: not an import line: {line!r}"
                for name in match.group(2).split(","):
                    found.append((page.name, match.group(1), name.strip()))
    return found


def test_the_pages_list_names():
    assert (DOCS / "api.md").is_file()
    listed = api_imports()
    modules = {module for _, module, _ in listed}
    for root in ("genlab", "genlab.core", "genlab.nas", "genlab.optim", "genlab.gaze"):
        assert any(m == root or m.startswith(root + ".") for m in modules), root


@pytest.mark.parametrize("page,module,name", api_imports())
def test_every_listed_name_imports(page, module, name):
    namespace: dict = {}
    exec(f"from {module} import {name}", namespace)  # noqa: S102 - lines of our own docs
    assert namespace[name] is not None
