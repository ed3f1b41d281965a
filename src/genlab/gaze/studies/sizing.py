"""Sizing a gaze study before its runs: how many seeds and test subjects give each judged
comparison a minimum detectable effect (MDE), from a pilot's variances.

A comparison is a paired difference d[s, j] = b - a of two cells (genlab.gaze.studies.stats)
on seed s and test subject j. Its pilot splits the variance of the per-seed difference
D_s (the image-weighted mean of d over the subjects) into a seed part and a seed x subject
part, as the two-way layout without replication does (Montgomery 2013, "Design and
Analysis of Experiments", 8th ed., the randomised complete block design):

    sd_subject^2 = sum_{s,j} (d_sj - mean_s - mean_j + mean)^2 / ((S - 1)(J - 1))
    sd_seed^2    = max(0, var_s(D_s) - sd_subject^2 / J_eff)

with J_eff = (sum_j n_j)^2 / sum_j n_j^2 (n_j: subject j's images), so that at J subjects
the per-seed difference has sd(J) = sqrt(sd_seed^2 + sd_subject^2 / J). The seeds a
comparison needs at J subjects are ``core.stats.seeds_needed(sd(J), mde)`` (the paired t
test over seeds, two-sided), its MDE at the seeds that will run
``core.stats.minimum_detectable_effect``: no power formula is restated here.

Test subjects come from two places: the held-out source subjects (fixed by the source
domain: more of them would change the training set) and the targets' subjects, which
``target_scale`` k multiplies (k times each target domain's subjects and images; rendering
is cheap). The plan takes the smallest k (at most MAX_SCALE) at which the seeds needed by
the worst comparison stop falling, and that many seeds.

A pilot is read from a run that judged the same comparisons (its bench.json or audit.json,
``pilot``) or from a results file the command wrote (its figure ``pilot``). A pilot known
only by a recorded interval (the seeds gone) gives its sd through
``core.stats.sd_from_interval``, with no split between seeds and subjects.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from genlab.core.errors import ConfigError, DataError
from genlab.core.stats import minimum_detectable_effect, sd_from_interval, seeds_needed
from genlab.gaze.studies.stats import Cell

#: the largest target_scale a plan asks for
MAX_SCALE = 8


@dataclass(frozen=True)
class Pilot:
    """One comparison's pilot: its name, the pilot's seeds, its test subjects (``fixed``
    held-out source subjects, ``scaled`` target subjects at ``scale``), the seed and the
    seed x subject standard deviations."""

    name: str
    seeds: int
    fixed: int
    scaled: int
    scale: int
    sd_seed: float
    sd_subject: float

    def subjects(self, scale: int) -> int:
        """Test subjects at ``target_scale`` ``scale``."""
        return self.fixed + round(self.scaled * scale / self.scale)

    def sd(self, scale: int) -> float:
        """The sd of the per-seed difference at ``target_scale`` ``scale``."""
        return math.sqrt(self.sd_seed ** 2 + self.sd_subject ** 2 / self.subjects(scale))


def variance_parts(d: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """(sd_seed, sd_subject) of differences ``d`` (S seeds x J subjects) with subject
    image counts ``n`` (see the module docstring)."""
    d, n = np.asarray(d, dtype=np.float64), np.asarray(n, dtype=np.float64)
    seeds, subjects = d.shape
    if seeds < 2 or subjects < 2:
        raise DataError(f"a pilot needs at least 2 seeds and 2 test subjects, got {seeds} x "
                        f"{subjects}")
    per_seed = d @ n / n.sum()
    resid = d - d.mean(1, keepdims=True) - d.mean(0, keepdims=True) + d.mean()
    var_subject = float((resid ** 2).sum()) / ((seeds - 1) * (subjects - 1))
    j_eff = n.sum() ** 2 / (n ** 2).sum()
    var_seed = max(0.0, float(per_seed.var(ddof=1)) - var_subject / j_eff)
    return math.sqrt(var_seed), math.sqrt(var_subject)


def pilot_of(name: str, a: Cell | None, b: Cell | None, *, fixed_subjects: Sequence[str] = (),
             scale: int = 1) -> Pilot | None:
    """The pilot of b - a (None when a cell is missing or has fewer than 2 seeds or
    subjects); the subjects in ``fixed_subjects`` are held-out source subjects, the others
    targets' (scaled by ``target_scale``)."""
    if a is None or b is None or a.m.shape != b.m.shape or min(a.m.shape) < 2:
        return None
    sd_seed, sd_subject = variance_parts(b.m - a.m, a.n)
    fixed = sum(s in set(fixed_subjects) for s in a.subjects)
    return Pilot(name, a.m.shape[0], fixed, len(a.subjects) - fixed, scale, sd_seed,
                 sd_subject)


def interval_pilot(name: str, low: float, high: float, n: int, subjects: int) -> Pilot:
    """A pilot known only by its recorded 95 % interval over ``n`` seeds: the sd of a t
    interval that wide, all of it counted as seed variance (subjects then do not help)."""
    return Pilot(name, n, subjects, 0, 1, sd_from_interval(low, high, n), 0.0)


def plan(pilots: Sequence[Pilot], *, mde: float, power: float, alpha: float = 0.05,
         seeds_run: int, scale_run: int, max_scale: int = MAX_SCALE) -> dict:
    """The sizing of every comparison (rows) and the plan: the target_scale and seeds that
    give each an MDE of at most ``mde`` at ``power``; the MDE at the ``seeds_run`` seeds
    and ``scale_run`` of this run."""
    if not pilots:
        raise ConfigError("the pilot holds no comparison to size")
    scales = range(1, max(max_scale, scale_run) + 1)

    def need(p: Pilot, k: int) -> int:
        return seeds_needed(p.sd(k), mde, alpha=alpha, power=power)

    worst = {k: max(need(p, k) for p in pilots) for k in scales}
    best = min(worst.values())
    scale = min(k for k in scales if worst[k] == best)
    rows = []
    for p in pilots:
        rows.append({
            "comparison": p.name, "pilot_seeds": p.seeds, "pilot_subjects": p.subjects(p.scale),
            "sd_pilot": p.sd(p.scale), "sd_seed": p.sd_seed, "sd_subject": p.sd_subject,
            "subjects_run": p.subjects(scale_run), "seeds_needed_run": need(p, scale_run),
            "mde_run": (minimum_detectable_effect(p.sd(scale_run), seeds_run, alpha=alpha,
                                                  power=power) if seeds_run >= 2 else None),
            "subjects_planned": p.subjects(scale), "seeds_needed_planned": need(p, scale)})
    return {"mde": mde, "power": power, "alpha": alpha, "seeds_run": seeds_run,
            "target_scale_run": scale_run, "target_scale_needed": scale,
            "seeds_needed": worst[scale], "rows": rows}


def plan_lines(sized: dict, source: str) -> list[str]:
    """The plan in words: one line per comparison, then the plan itself."""
    lines = [f"Sizing from {source}: MDE {sized['mde']:g} deg at {100 * sized['power']:g} % "
             f"power (paired t over seeds, two-sided alpha {sized['alpha']:g}); this run: "
             f"{sized['seeds_run']} seeds, target scale {sized['target_scale_run']}."]
    for r in sized["rows"]:
        mde_run = "-" if r["mde_run"] is None else f"{r['mde_run']:.2f}"
        lines.append(
            f"  {r['comparison']}: pilot sd {r['sd_pilot']:.2f} deg ({r['pilot_seeds']} seeds, "
            f"{r['pilot_subjects']} subjects; seed {r['sd_seed']:.2f}, seed x subject "
            f"{r['sd_subject']:.2f}); at {r['subjects_run']} subjects {r['seeds_needed_run']} "
            f"seeds needed, MDE at this run's seeds {mde_run} deg; planned: "
            f"{r['subjects_planned']} subjects, {r['seeds_needed_planned']} seeds")
    lines.append(f"Plan: --target-scale {sized['target_scale_needed']} and "
                 f"{sized['seeds_needed']} seeds give every comparison an MDE of at most "
                 f"{sized['mde']:g} deg.")
    return lines


def pilot_dicts(pilots: Sequence[Pilot]) -> dict[str, dict]:
    """{name: fields} of pilots, as bench.json, audit.json and the results file hold them."""
    return {p.name: {k: v for k, v in asdict(p).items() if k != "name"} for p in pilots}


def load_pilots(path: str | Path) -> list[Pilot]:
    """The pilots of a run's bench.json / audit.json (``pilot``) or of a results file (its
    figure ``pilot``)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"--size-from {path}: cannot be read as JSON ({err})") from None
    found = data.get("pilot") if isinstance(data, dict) else None
    if found is None and isinstance(data, dict):
        found = data.get("figures", {}).get("pilot")
    if not isinstance(found, dict) or not found:
        raise ConfigError(f"--size-from {path}: holds no pilot; expected the bench.json or "
                          "audit.json of a finished run, or a results file with a 'pilot' "
                          "figure (a recovered file records intervals only)")
    try:
        return [Pilot(name, **fields) for name, fields in found.items()]
    except TypeError as err:
        raise ConfigError(f"--size-from {path}: a pilot entry does not read as seeds, fixed, "
                          f"scaled, scale, sd_seed, sd_subject ({err})") from None


__all__ = ["MAX_SCALE", "Pilot", "interval_pilot", "load_pilots", "pilot_dicts", "pilot_of",
           "plan", "plan_lines", "variance_parts"]
