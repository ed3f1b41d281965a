"""DARTS-space genotypes (DARTS, RobustDARTS S1-S4): upstream text, validation, derivation.

Text (quark0/darts genotypes.py, the namedtuple's repr), so published genotypes paste in:

    Genotype(normal=[('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ...], normal_concat=[2, 3, 4, 5],
             reduce=[('max_pool_3x3', 0), ...], reduce_concat=[2, 3, 4, 5])

``normal``/``reduce`` hold two (op, input) genes per intermediate node, in node order; input
0/1 are the outputs of the two previous cells, 2.. the cell's earlier nodes. ``range(2, 6)``
is accepted for a concat list. The text is read with Python's ``ast`` (never evaluated).

Derivation (quark0/darts model_search.py, RobustDARTS model_search.py), per cell type, on
W = softmax(alpha) (14, K): for node i (rows of its i + 2 incoming edges) keep the two edges
with the largest max_k W[e, k] (stable sort), then on each the op of largest weight; `none`
is excluded from both when the edge offers it (DARTS, S3), and otherwise every op counts
(S1, S2, S4, the 7-op DARTS variant): RobustDARTS' ValueError fallback.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from genlab.core.errors import SpecError
from genlab.nas.supernet.ops import PARAM_FREE_OPS

Gene = tuple[str, int]
STEPS = 4  # intermediate nodes per cell
CELL_TYPES = ("normal", "reduce")
# quark0/darts genotypes.py DARTS_V2 (second-order DARTS on CIFAR-10), as its text
DARTS_V2 = ("Genotype(normal=[('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0), "
            "('sep_conv_3x3', 1), ('sep_conv_3x3', 1), ('skip_connect', 0), ('skip_connect', 0), "
            "('dil_conv_3x3', 2)], normal_concat=[2, 3, 4, 5], reduce=[('max_pool_3x3', 0), "
            "('max_pool_3x3', 1), ('skip_connect', 2), ('max_pool_3x3', 1), ('max_pool_3x3', 0), "
            "('skip_connect', 2), ('skip_connect', 2), ('max_pool_3x3', 1)], "
            "reduce_concat=[2, 3, 4, 5])")


@dataclass(frozen=True)
class DartsGenotype:
    """One normal and one reduction cell: genes and the nodes concatenated into the output."""

    normal: tuple[Gene, ...]
    normal_concat: tuple[int, ...]
    reduce: tuple[Gene, ...]
    reduce_concat: tuple[int, ...]

    def __post_init__(self):
        for name in CELL_TYPES:
            genes = tuple((str(op), int(j)) for op, j in getattr(self, name))
            object.__setattr__(self, name, genes)
            object.__setattr__(self, f"{name}_concat",
                               tuple(int(c) for c in getattr(self, f"{name}_concat")))

    def genes(self, cell: str) -> tuple[Gene, ...]:
        return getattr(self, cell)

    def concat(self, cell: str) -> tuple[int, ...]:
        return getattr(self, f"{cell}_concat")

    def to_string(self) -> str:
        """The upstream text (``parse_darts_genotype(g.to_string()) == g``)."""
        def genes(gs):
            return "[" + ", ".join(f"({op!r}, {j})" for op, j in gs) + "]"

        def concat(cs):
            return "[" + ", ".join(str(c) for c in cs) + "]"

        return (f"Genotype(normal={genes(self.normal)}, normal_concat={concat(self.normal_concat)}"
                f", reduce={genes(self.reduce)}, reduce_concat={concat(self.reduce_concat)})")

    __str__ = to_string

    def count(self, cell: str, ops) -> int:
        """Number of genes of ``cell`` whose op is in ``ops``."""
        return sum(op in ops for op, _ in self.genes(cell))

    def param_free_count(self, cell: str = "normal") -> int:
        return self.count(cell, PARAM_FREE_OPS)


# -- parsing ---------------------------------------------------------------------------------
def parse_darts_genotype(text: str) -> DartsGenotype:
    """Read the upstream ``Genotype(...)`` text; SpecError naming the offending token."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError("empty genotype; expected \"Genotype(normal=[('sep_conv_3x3', 0), ...], "
                        "normal_concat=[2, 3, 4, 5], reduce=[...], reduce_concat=[2, 3, 4, 5])\"")
    src = text.strip()
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError as exc:
        raise SpecError(f"genotype {src!r} is not readable ({exc.msg} at character "
                        f"{exc.offset})") from exc
    if not isinstance(tree, ast.Call) or _call_name(tree) != "Genotype":
        raise SpecError(f"genotype {src!r} must be written Genotype(normal=..., "
                        "normal_concat=..., reduce=..., reduce_concat=...)")
    fields = ("normal", "normal_concat", "reduce", "reduce_concat")
    values = dict(zip(fields, tree.args, strict=False))
    for kw in tree.keywords:
        if kw.arg not in fields:
            raise SpecError(f"unknown field {kw.arg!r} in genotype {src!r}; expected "
                            f"{', '.join(fields)}")
        values[kw.arg] = kw.value
    missing = [f for f in fields if f not in values]
    if missing or len(tree.args) > len(fields):
        raise SpecError(f"genotype {src!r} lacks field(s) {', '.join(missing)}")
    return DartsGenotype(
        normal=_genes(src, values["normal"], "normal"),
        normal_concat=_concat(src, values["normal_concat"], "normal_concat"),
        reduce=_genes(src, values["reduce"], "reduce"),
        reduce_concat=_concat(src, values["reduce_concat"], "reduce_concat"),
    )


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _token(src: str, node: ast.AST) -> str:
    return ast.get_source_segment(src, node) or ast.dump(node)


def _genes(src: str, node: ast.AST, field: str) -> tuple[Gene, ...]:
    if not isinstance(node, (ast.List, ast.Tuple)):
        raise SpecError(f"{field} must be a list of (op, input) pairs, got {_token(src, node)!r}")
    genes = []
    for item in node.elts:
        ok = (isinstance(item, ast.Tuple) and len(item.elts) == 2
              and isinstance(item.elts[0], ast.Constant) and isinstance(item.elts[0].value, str)
              and isinstance(item.elts[1], ast.Constant) and type(item.elts[1].value) is int)
        if not ok:
            raise SpecError(f"bad gene {_token(src, item)!r} in {field}; expected "
                            "('op_name', input_index)")
        genes.append((item.elts[0].value, item.elts[1].value))
    return tuple(genes)


def _concat(src: str, node: ast.AST, field: str) -> tuple[int, ...]:
    if isinstance(node, ast.Call) and _call_name(node) == "range":
        args = [a.value for a in node.args if isinstance(a, ast.Constant)
                and type(a.value) is int]
        if len(args) == len(node.args) and 1 <= len(args) <= 3:
            return tuple(range(*args))
    elif isinstance(node, (ast.List, ast.Tuple)):
        vals = [e.value for e in node.elts if isinstance(e, ast.Constant)
                and type(e.value) is int]
        if len(vals) == len(node.elts):
            return tuple(vals)
    raise SpecError(f"{field} must be a list of node indices such as [2, 3, 4, 5], got "
                    f"{_token(src, node)!r}")


# -- validation against a space ------------------------------------------------------------------
def edge_count() -> int:
    """Edges of a cell: 2 + 3 + 4 + 5 = 14."""
    return edge_row(STEPS, 0)


def edge_row(node: int, source: int) -> int:
    """Alpha row of the edge from state ``source`` into intermediate node ``node`` (0-based)."""
    return node * (node + 3) // 2 + source


def validate(genotype: DartsGenotype, edge_ops: dict[str, Sequence[Sequence[str]]],
             space: str) -> DartsGenotype:
    """SpecError naming the token unless every gene fits ``edge_ops[cell][row]``."""
    for cell in CELL_TYPES:
        genes = genotype.genes(cell)
        if len(genes) != 2 * STEPS:
            raise SpecError(f"{cell} cell of a {space} genotype has {len(genes)} (op, input) "
                            f"genes; expected {2 * STEPS} (two per node for {STEPS} nodes)")
        for g, (op, j) in enumerate(genes):
            node = g // 2
            if not 0 <= j < node + 2:
                raise SpecError(f"input index {j} of gene ({op!r}, {j}) in the {cell} cell: node "
                                f"{node + 2} reads states 0..{node + 1}")
            allowed = edge_ops[cell][edge_row(node, j)]
            if op not in allowed:
                raise SpecError(f"op {op!r} of gene ({op!r}, {j}) in the {cell} cell is not in "
                                f"space {space} (edge {node + 2}<-{j} offers "
                                f"{', '.join(allowed)})")
        if not genotype.concat(cell):
            raise SpecError(f"{cell}_concat is empty; the cell's output concatenates at least "
                            "one state, such as [2, 3, 4, 5]")
        for c in genotype.concat(cell):
            if not 0 <= c < STEPS + 2:
                raise SpecError(f"{cell}_concat index {c} is outside 0..{STEPS + 1}")
    return genotype


# -- derivation ---------------------------------------------------------------------------------
def derive_cell(weights: torch.Tensor, edge_ops: Sequence[Sequence[str]]) -> tuple[Gene, ...]:
    """Top-2 inputs per node and the best op on each (module docstring); W rows = edges."""
    w = torch.as_tensor(weights).detach().double().tolist()
    genes = []
    for node in range(STEPS):
        start = edge_row(node, 0)
        rows = range(node + 2)

        def eligible(j, start=start):
            ops = edge_ops[start + j]
            return [k for k in range(len(ops)) if ops[k] != "none"] or list(range(len(ops)))

        ranked = sorted(rows, key=lambda j, s=start: -max(w[s + j][k] for k in eligible(j)))
        for j in ranked[:2]:
            best = None
            for k in eligible(j):
                if best is None or w[start + j][k] > w[start + j][best]:
                    best = k
            genes.append((edge_ops[start + j][best], j))
    return tuple(genes)


def derive_darts_genotype(alphas: dict[str, torch.Tensor],
                          edge_ops: dict[str, Sequence[Sequence[str]]],
                          edge_scales: dict[str, torch.Tensor] | None = None) -> DartsGenotype:
    """Genotype from the named alphas ("normal", "reduce") by softmax then ``derive_cell``;
    ``edge_scales`` (per cell type, (14,)) multiply each edge's row first (PC-DARTS: the
    edge strength is softmax(alpha) x the node-normalised beta)."""
    concat = tuple(range(2, STEPS + 2))
    cells = {}
    for c in CELL_TYPES:
        w = torch.softmax(alphas[c].detach(), dim=-1)
        if edge_scales is not None:
            w = w * torch.as_tensor(edge_scales[c]).detach().to(w.dtype).reshape(-1, 1)
        cells[c] = derive_cell(w, edge_ops[c])
    return DartsGenotype(cells["normal"], concat, cells["reduce"], concat)
