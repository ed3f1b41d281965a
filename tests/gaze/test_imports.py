"""The gaze package has no import cycle, function-local imports included."""

import ast
from pathlib import Path

import genlab

SRC = Path(genlab.__file__).parent


def _graph() -> dict[str, set[str]]:
    mods = {".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in SRC.rglob("*.py")}
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):  # walks function bodies too
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            graph[m] |= {n for n in names if n in mods and n != m and not m.startswith(n + ".")}
    return graph


def _cycle(graph, start):
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph[node]:
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_gaze_package_has_no_import_cycle():
    graph = _graph()
    gaze = [m for m in graph if m.startswith("genlab.gaze")]
    assert len(gaze) > 20
    cycles = [c for m in gaze if (c := _cycle(graph, m))]
    assert not cycles, " ; ".join(" -> ".join(c) for c in cycles[:3])


def test_the_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}, "a") == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}, "a") is None
