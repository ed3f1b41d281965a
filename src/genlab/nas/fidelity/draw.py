"""The fixed draw of NAS-Bench-201 cells a proxy is calibrated on (docs/nas_proxy.md).

``draw_cells(uniform, few, seed)``: ``uniform`` cells drawn uniformly over the 15,625 cells of
the space (nothing excluded: cells whose output is cut off from their input stay in), then
``few`` drawn uniformly among the cells with at most ``FEW_PFREE`` parameter-free ops
(``none``, ``skip_connect``, ``avg_pool_3x3``: the region where searches end) that the first
part did not draw, so no cell appears twice. Both parts come from one
``numpy.random.default_rng(seed)`` stream: the first ``choice(15625, uniform)`` over the
indices of ``Genotype.all()``, then ``choice`` over the remaining few-parameter-free indices.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from genlab.core.errors import ConfigError
from genlab.core.options import option
from genlab.nas.spaces.nb201.genotype import Genotype

SPACE_SIZE = 5 ** 6
FEW_PFREE = 1  # "conv-rich": at most this many parameter-free ops
UNIFORM, FEW, DRAW_SEED = 150, 50, 0  # the protocol's draw
UNIFORM_GROUP, FEW_GROUP = "uniform", "few-pfree"


@dataclass(frozen=True)
class DrawnCell:
    """One cell of a draw: its index into Genotype.all(), its string and its part of the draw."""

    index: int
    arch: str
    group: str

    @property
    def param_free(self) -> int:
        return Genotype.from_string(self.arch).param_free_count()

    @property
    def connected(self) -> bool:
        return output_connected(self.arch)


@functools.lru_cache(maxsize=1)
def _all_cells() -> tuple[str, ...]:
    """Every cell's string, in Genotype.all()'s order (made once per process)."""
    return tuple(g.to_string() for g in Genotype.all())


def draw_cells(uniform: int = UNIFORM, few: int = FEW, seed: int = DRAW_SEED) -> list[DrawnCell]:
    """The seeded draw (module docstring), uniform part first, each part in draw order."""
    return list(_draw(uniform, few, seed))


@functools.lru_cache(maxsize=4)
def _draw(uniform: int, few: int, seed: int) -> tuple[DrawnCell, ...]:
    """The draw, made once per process for each (uniform, few, seed): a command checks,
    resolves and plans its cells from the same draw."""
    if uniform < 0 or few < 0 or uniform + few == 0:
        raise ConfigError(f"a draw needs at least one cell, got --uniform {uniform} and "
                          f"--few {few}")
    cells = _all_cells()
    rng = np.random.default_rng(seed)
    first = [int(i) for i in rng.choice(SPACE_SIZE, uniform, replace=False)]
    taken = set(first)
    pool = [i for i, a in enumerate(cells)
            if i not in taken and Genotype.from_string(a).param_free_count() <= FEW_PFREE]
    if few > len(pool):
        raise ConfigError(f"--few {few}: only {len(pool)} cells with at most {FEW_PFREE} "
                          "parameter-free op are left to draw")
    second = [pool[int(k)] for k in rng.choice(len(pool), few, replace=False)]
    return (tuple(DrawnCell(i, cells[i], UNIFORM_GROUP) for i in first)
            + tuple(DrawnCell(i, cells[i], FEW_GROUP) for i in second))


def given_cells(archs: list[str]) -> list[DrawnCell]:
    """Cells named by the user (NB201 strings, checked), in their order."""
    index = {a: i for i, a in enumerate(_all_cells())}
    out = []
    for arch in archs:
        text = Genotype.from_string(arch).to_string()  # SpecError on a malformed string
        out.append(DrawnCell(index[text], text, "given"))
    return out


def output_connected(arch: str) -> bool:
    """Whether the cell's output depends on its input (a path of ops other than `none`)."""
    reached = [True]
    for node in Genotype.from_string(arch).nodes:
        reached.append(any(op != "none" and reached[j] for op, j in node))
    return reached[-1]


@dataclass
class CellsOptions:
    """Which NB201 cells: those given, else the protocol's seeded draw (docs/nas_proxy.md)."""

    arch: list[str] = option(factory=list, parse="list", help="NB201 cells to use, "
                             "comma-separated official strings (default: the seeded draw).")
    uniform: int = option(UNIFORM, help="Cells of the draw taken uniformly over the space.",
                          ge=0)
    few: int = option(FEW, help="Cells of the draw taken among those with at most one "
                      "parameter-free op (none, skip, pool), apart from the uniform ones.", ge=0)
    draw_seed: int = option(DRAW_SEED, help="Seed of the draw.", ge=0)

    def selected_cells(self) -> list[DrawnCell]:
        return given_cells(self.arch) if self.arch else draw_cells(self.uniform, self.few,
                                                                   self.draw_seed)
