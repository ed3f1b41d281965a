"""Seed-paired differences and bootstrap intervals over seeds and test subjects.

A *cell* of a results table is a set of runs (one per seed) evaluated on the same test
subjects; each run gives per-subject mean errors ``m[s, j]`` with image counts ``n_j``.
Its value is the image-weighted mean error averaged over seeds,

    E = (1/S) sum_s sum_j n_j m[s, j] / sum_j n_j.

The 95% interval is a two-level bootstrap: each replicate draws S seeds and J subjects
with replacement (multiplicities c_s, d_j) and recomputes
``sum_s c_s sum_j d_j n_j m[s, j] / (S sum_j d_j n_j)``; the interval is the 2.5 and
97.5 percentiles of 2000 replicates. A *paired* difference between two cells uses the
same draws for both (runs of one seed share initialisation and batch order, and both
are tested on the same subjects), so what seeds and subjects have in common cancels.
Relative reduction = 100 (E_a - E_b) / E_a, bootstrapped the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from genlab.core.errors import DataError


@dataclass
class Cell:
    """Per-subject mean errors of one cell: m (S seeds, J subjects), counts n (J,)."""

    m: np.ndarray
    n: np.ndarray
    subjects: list[str]

    @classmethod
    def from_runs(cls, per_subject: Sequence[dict[str, list[float]]], name: str = "") -> Cell:
        """From each seed's ``{subject: [mean error, count]}`` (the same subjects in each)."""
        if not per_subject:
            raise DataError(f"{name}: no runs to summarise")
        subjects = sorted(per_subject[0])
        if any(sorted(p) != subjects for p in per_subject):
            raise DataError(f"{name}: runs were tested on different subjects")
        m = np.array([[p[s][0] for s in subjects] for p in per_subject], dtype=np.float64)
        n = np.array([per_subject[0][s][1] for s in subjects], dtype=np.float64)
        return cls(m, n, subjects)

    @property
    def value(self) -> float:
        return float((self.m @ self.n).mean() / self.n.sum())


@dataclass
class Draws:
    """Bootstrap multiplicities: seeds (B, S) and subjects (B, J)."""

    seeds: np.ndarray
    subjects: np.ndarray

    @classmethod
    def make(cls, n_seeds: int, n_subjects: int, n_boot: int = 2000, seed: int = 0,
             stream: int = 0) -> Draws:
        """Seed draws depend on (seed, n_seeds) only, subject draws also on ``stream``.

        Cells on different test sets (one stream each) thus share their seed draws, so
        an average over tasks can be bootstrapped with the seeds resampled jointly.
        """
        seeds = np.random.default_rng([seed, 1]).multinomial(
            n_seeds, np.full(n_seeds, 1.0 / n_seeds), n_boot)
        subjects = np.random.default_rng([seed, 2, stream]).multinomial(
            n_subjects, np.full(n_subjects, 1.0 / n_subjects), n_boot)
        return cls(seeds, subjects)


def replicates(cell: Cell, draws: Draws) -> np.ndarray:
    """The cell's value under each bootstrap draw (B,)."""
    if draws.seeds.shape[1] != cell.m.shape[0] or draws.subjects.shape[1] != cell.m.shape[1]:
        raise DataError(f"bootstrap draws for {draws.seeds.shape[1]} seeds x "
                        f"{draws.subjects.shape[1]} subjects do not fit a cell of "
                        f"{cell.m.shape[0]} x {cell.m.shape[1]}")
    w = draws.subjects * cell.n  # (B, J)
    num = np.einsum("bs,sj,bj->b", draws.seeds, cell.m, w)
    return num / (draws.seeds.sum(1) * w.sum(1))


def interval(values: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def cell_summary(cell: Cell, draws: Draws) -> dict:
    """Value and 95% interval of one cell."""
    return {"value": cell.value, "ci": interval(replicates(cell, draws))}


def paired(a: Cell, b: Cell, draws: Draws) -> dict:
    """b - a (degrees) and the relative reduction 100 (a - b) / a, with 95% intervals."""
    if a.m.shape != b.m.shape or a.subjects != b.subjects:
        raise DataError("paired cells need the same seeds and subjects")
    ra, rb = replicates(a, draws), replicates(b, draws)
    return {
        "diff": b.value - a.value,
        "diff_ci": interval(rb - ra),
        "rel_pct": 100.0 * (a.value - b.value) / a.value,
        "rel_ci": interval(100.0 * (ra - rb) / ra),
        "replicates_rel": 100.0 * (ra - rb) / ra,
    }


def fmt_ci(value: float | None, ci: tuple[float, float] | None, digits: int = 2,
           sign: bool = False) -> str:
    """"v [lo, hi]" (signed with ``sign``); "-" when there is no value."""
    if value is None:
        return "-"
    f = f"{{:+.{digits}f}}" if sign else f"{{:.{digits}f}}"
    if ci is None:
        return f.format(value)
    return f"{f.format(value)} [{f.format(ci[0])}, {f.format(ci[1])}]"
