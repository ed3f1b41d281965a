"""Rank correlation of measures with the generalization gap (Jiang et al. 2020).

- Kendall tau-b (Kendall 1945, ties in both variables):
      tau_b = (P - Q) / sqrt((P + Q + T_x)(P + Q + T_y)),
  P / Q the concordant / discordant pairs, T_x (T_y) the pairs tied only in x (only in y).
- Interval of tau (ours): the 2.5 and 97.5 percentiles of tau over bootstrap resamples of
  the trainings (1,000 by default, seeded); resamples with a constant variable are skipped
  (genlab.core.stats.ranks computes it, as it computes the paired bootstrap below).
- Granulated tau (Jiang et al. 2020, "Fantastic generalization measures and where to find
  them", eq. 4): for hyper-parameter i, psi_i is the mean over the groups of trainings that
  share every other hyper-parameter value of the tau within the group (only i varies), and
  Psi = mean_i psi_i. Groups with fewer than two trainings or a constant measure/gap give
  no tau and are skipped; psi_i is None when no group of i qualifies.
- Paired comparison (ours): tau(a) - tau(b) over the same trainings, for the plain and the
  granulated tau, with a paired percentile bootstrap interval: each resample draws the
  trainings with replacement and computes both taus from it (granulated: the resampled
  trainings are regrouped). Each difference is judged through genlab.core.stats: its
  replicates give the interval and p-value (``bootstrap_estimate``), Holm's correction runs
  over the claim's pairs of one table, and an undecided pair gets the number of models a
  decision needs from the variance of the difference at the current n (``decision_size``).
- Conditional mutual information (Jiang et al. 2020, section 5): see :func:`conditional_mi`.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from genlab.core.errors import ConfigError, DataError
from genlab.core.stats import (
    Estimate,
    Verdict,
    bootstrap_estimate,
    decision_size,
    holm,
    judge,
    ranks,
)
from genlab.core.stats.family import BETTER, UNDECIDED, WORSE
from genlab.core.stats.ranks import (
    bootstrap_counts,
    percentile_interval,
    sign_matrix,
    weighted_tau_b,
)
from genlab.core.stats.ranks import tau_b as _tau_b  # noqa: F401 - the name tests import


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall tau-b of two equal-length sequences (nan when either is constant)."""
    if len(x) != len(y):
        raise DataError(f"kendall_tau needs equal lengths, got {len(x)} and {len(y)}")
    n = len(x)
    if n < 2:
        return math.nan
    concordant = discordant = tie_x = tie_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tie_x += 1
            elif dy == 0:
                tie_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    denom = math.sqrt((concordant + discordant + tie_x) * (concordant + discordant + tie_y))
    return (concordant - discordant) / denom if denom > 0 else math.nan


def kendall_tau_interval(x: Sequence[float], y: Sequence[float], *, resamples: int = 1000,
                         level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of Kendall tau-b over resampled pairs (nan if undefined;
    :func:`genlab.core.stats.ranks.kendall_tau_interval`). Pairs where either value is not
    a finite number are left out; fewer than two pairs give (nan, nan)."""
    if len(x) != len(y):
        raise DataError(f"kendall_tau_interval needs equal lengths, got {len(x)} and {len(y)}")
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(xs) & np.isfinite(ys)
    if keep.sum() < 2:
        return math.nan, math.nan
    return ranks.kendall_tau_interval(xs[keep], ys[keep], resamples=resamples, level=level,
                                      seed=seed)


def granulated_tau(records: Sequence[dict], measure: str, gap: str,
                   hyperparameters: Sequence[str]) -> dict:
    """{"per_hyperparameter": {h: psi_h}, "granulated": Psi, "plain": tau} for one measure."""
    if not records:
        raise DataError("granulated_tau: no records")
    for key in (measure, gap, *hyperparameters):
        if any(key not in r for r in records):
            raise ConfigError(f"granulated_tau: some records lack {key!r}")
    per: dict[str, float | None] = {}
    for h in hyperparameters:
        others = [o for o in hyperparameters if o != h]
        groups: dict[tuple, list[dict]] = defaultdict(list)
        for r in records:
            groups[tuple(r[o] for o in others)].append(r)
        taus = []
        for members in groups.values():
            if len({m[h] for m in members}) < 2:
                continue
            t = kendall_tau([m[measure] for m in members], [m[gap] for m in members])
            if not math.isnan(t):
                taus.append(t)
        per[h] = sum(taus) / len(taus) if taus else None
    valid = [v for v in per.values() if v is not None]
    return {
        "plain": kendall_tau([r[measure] for r in records], [r[gap] for r in records]),
        "per_hyperparameter": per,
        "granulated": sum(valid) / len(valid) if valid else None,
    }


def tau_table(records: Sequence[dict], measures: Sequence[str], gap: str,
              hyperparameters: Sequence[str], *, cmi_k: int = 2) -> list[dict]:
    """One row per measure: granulated tau, Jiang et al.'s K (:func:`conditional_mi` with
    k = ``cmi_k``; None with fewer hyper-parameters than that), plain tau with its bootstrap
    interval, and each psi_h against ``gap``."""
    rows = []
    for m in measures:
        res = granulated_tau(records, m, gap, hyperparameters)
        lo, hi = kendall_tau_interval([r[m] for r in records], [r[gap] for r in records])
        try:
            k = (conditional_mi(records, m, gap, hyperparameters, k=cmi_k)["K"]
                 if len(hyperparameters) >= cmi_k else None)
        except DataError:  # fewer than two models with the measure defined
            k = None
        row = {"measure": m, "granulated": res["granulated"], "K": k, "tau": res["plain"],
               "tau_lo": lo, "tau_hi": hi}
        row.update({f"psi_{h}": v for h, v in res["per_hyperparameter"].items()})
        rows.append(row)
    return rows


#: the sanity row of every tau table: a "measure" drawn at random per training, whose tau
#: with any gap must be about 0 with an interval containing 0
RANDOM_MEASURE = "random_sanity"


def with_random_measure(records: Sequence[dict], seed: int = 0) -> list[dict]:
    """Copies of ``records`` with RANDOM_MEASURE: one uniform draw per record, in order."""
    draws = np.random.default_rng(seed).random(len(records))
    return [{**r, RANDOM_MEASURE: float(d)} for r, d in zip(records, draws, strict=True)]


# --- paired comparisons of two measures on the same trainings ---------------------------

#: the nonuniformity measures of the claim under test (tr Sigma and the curvature
#: nonuniformity s) and the sharpness measures they are compared with, as records name them
NONUNIFORMITY_MEASURES = ("trace_sigma", "curvature_nonuniformity")
SHARPNESS_MEASURES = ("hessian_top_eigenvalue", "hessian_trace", "m_sharpness",
                      "average_sharpness")
#: a paired interval inside [-VERDICT_MARGIN, VERDICT_MARGIN] reads "no difference larger"
VERDICT_MARGIN = 0.1


def _finite(value) -> bool:
    """Whether ``value`` is a finite number (None, nan and non-numbers are not)."""
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _usable(records: Sequence[dict], values: Sequence[str], keys: Sequence[str],
            caller: str) -> list[dict]:
    """The records whose ``values`` are all finite numbers (at least two of them).

    ConfigError when some record lacks one of ``values`` or ``keys`` (a misspelt name);
    DataError when fewer than two records remain.
    """
    for key in (*values, *keys):
        if any(key not in r for r in records):
            raise ConfigError(f"{caller}: some records lack {key!r}")
    usable = [r for r in records if all(_finite(r[v]) for v in values)]
    if len(usable) < 2:
        raise DataError(f"{caller}: {len(usable)} record(s) hold finite "
                        f"{', '.join(values)}; at least two are needed")
    return usable


def _column(records: Sequence[dict], key: str) -> np.ndarray:
    return np.array([float(r[key]) for r in records])


def _number(value: float) -> float | None:
    """A float, or None where it is undefined (nan)."""
    return None if value is None or math.isnan(value) else float(value)


def paired_tau_difference(records: Sequence[dict], measure_a: str, measure_b: str, gap: str,
                          *, resamples: int = 1000, seed: int = 0,
                          level: float = 0.95) -> dict:
    """tau(a, gap) - tau(b, gap) (Kendall tau-b) over the same trainings, paired bootstrap.

    Trainings where ``measure_a``, ``measure_b`` or ``gap`` is None or not finite are left
    out of both taus. Each resample draws trainings with replacement
    (:func:`bootstrap_counts`) and computes both taus from that one sample; resamples where
    either tau is undefined are skipped. ``low``/``high`` are the (1 - level)/2 and
    (1 + level)/2 percentiles of the resampled differences. Returns {"difference", "low",
    "high", "tau_a", "tau_b", "n", "resamples"} (resamples: those that gave a difference;
    an undefined value is None).
    """
    ranks.check_bootstrap(resamples, level)
    recs = _usable(records, (measure_a, measure_b, gap), (), "paired_tau_difference")
    return ranks.paired_tau_difference(_column(recs, measure_a), _column(recs, measure_b),
                                       _column(recs, gap), resamples=resamples, seed=seed,
                                       level=level)


def jackknife_tau_difference(records: Sequence[dict], measure_a: str, measure_b: str,
                             gap: str) -> dict:
    """tau(a, gap) - tau(b, gap) with its jackknife standard error (Quenouille-Tukey).

    D_(i) is the difference over the trainings but i (the trainings of
    :func:`paired_tau_difference`), and se^2 = (n - 1)/n * sum_i (D_(i) - mean D_(.))^2, the
    jackknife variance of a U-statistic such as tau; leaves whose taus are undefined are
    skipped. A normal interval is difference +- z * se; since the variance of tau falls as
    1/n, the half-width at n' trainings is about z * se * sqrt(n / n'). Returns
    {"difference", "se", "n"} (se None when fewer than two leaves are defined).
    """
    recs = _usable(records, (measure_a, measure_b, gap), (), "jackknife_tau_difference")
    n = len(recs)
    if n < 3:
        raise DataError(f"jackknife_tau_difference: needs at least three trainings, got {n}")
    s_g = sign_matrix(_column(recs, gap))
    s_a, s_b = (sign_matrix(_column(recs, m)) for m in (measure_a, measure_b))
    full = np.ones((1, n))
    difference = (weighted_tau_b(full, s_a, s_g) - weighted_tau_b(full, s_b, s_g))[0]
    leave_one_out = 1.0 - np.eye(n)
    leaves = weighted_tau_b(leave_one_out, s_a, s_g) - weighted_tau_b(leave_one_out, s_b, s_g)
    leaves = leaves[np.isfinite(leaves)]
    m = len(leaves)
    se = math.sqrt((m - 1) / m * float(((leaves - leaves.mean()) ** 2).sum())) if m > 1 else None
    return {"difference": _number(difference), "se": se, "n": n}


def _axis_codes(records: Sequence[dict], axes: Sequence[str]) -> tuple[np.ndarray, list[int]]:
    """(n, len(axes)) integer codes of the records' axis values and each axis's level count."""
    columns, levels = [], []
    for h in axes:
        index: dict = {}
        columns.append([index.setdefault(r[h], len(index)) for r in records])
        levels.append(len(index))
    return np.array(columns, dtype=int).T.reshape(len(records), len(axes)), levels


def _axis_groups(codes: np.ndarray, axes: Sequence[str]) -> dict[str, tuple | None]:
    """Per axis h, the groups of trainings that share all other axes' values and hold at
    least two values of h, as padded arrays (members, mask, onehot): members[g, k] the k-th
    training of group g (mask False: padding), onehot[g, k, l] whether it has h's level l.
    None for an axis without such a group."""
    groups: dict[str, tuple | None] = {}
    for col, h in enumerate(axes):
        others = np.delete(codes, col, axis=1)
        if others.shape[1]:
            group_of = np.unique(others, axis=0, return_inverse=True)[1].ravel()
        else:
            group_of = np.zeros(len(codes), dtype=int)
        member_lists = [m for g in np.unique(group_of)
                        for m in [np.nonzero(group_of == g)[0]]
                        if len(np.unique(codes[m, col])) >= 2]
        if not member_lists:
            groups[h] = None
            continue
        size = max(len(m) for m in member_lists)
        members = np.zeros((len(member_lists), size), dtype=int)
        mask = np.zeros((len(member_lists), size), dtype=bool)
        for g, m in enumerate(member_lists):
            members[g, :len(m)], mask[g, :len(m)] = m, True
        levels = codes[:, col].max() + 1
        onehot = (codes[members, col][..., None] == np.arange(levels)) & mask[..., None]
        groups[h] = (members, mask, onehot.astype(float))
    return groups


def _nanmean_rows(a: np.ndarray) -> np.ndarray:
    """Row means over the finite entries (nan for a row with none)."""
    ok = np.isfinite(a)
    count = ok.sum(axis=1)
    total = np.where(ok, a, 0.0).sum(axis=1)
    out = np.full(len(a), np.nan)
    out[count > 0] = total[count > 0] / count[count > 0]
    return out


def _weighted_granulated(w: np.ndarray, s_m: np.ndarray, s_g: np.ndarray,
                         groups: dict[str, tuple | None]
                         ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """psi_h (per axis) and Psi for every row of w, as granulated_tau computes them on the
    sample holding training i w[r, i] times: a group counts in a row when at least two of
    its values of h are drawn and its tau is defined (the forms of
    :func:`genlab.core.stats.ranks.weighted_tau_b`, all groups at once)."""
    per: dict[str, np.ndarray] = {}
    for h, grouped in groups.items():
        if grouped is None:
            per[h] = np.full(len(w), np.nan)
            continue
        members, mask, onehot = grouped
        wg = (w[:, members] * mask).transpose(1, 0, 2)  # (groups, resamples, size)
        sub_m = s_m[members[:, :, None], members[:, None, :]]  # (groups, size, size)
        sub_g = s_g[members[:, :, None], members[:, None, :]]

        def quad(mat, wg=wg):
            return ((wg @ mat) * wg).sum(axis=2)  # (groups, resamples)

        num, den = quad(sub_m * sub_g), quad(np.abs(sub_m)) * quad(np.abs(sub_g))
        drawn_levels = (((wg > 0).astype(float) @ onehot) > 0).sum(axis=2)
        ok = (den > 0) & (drawn_levels >= 2)
        tau = np.full(den.shape, np.nan)
        tau[ok] = num[ok] / np.sqrt(den[ok])
        per[h] = _nanmean_rows(tau.T)
    psi = np.stack(list(per.values()), axis=1) if per else np.full((len(w), 0), np.nan)
    return per, _nanmean_rows(psi)


def paired_granulated_difference(records: Sequence[dict], measure_a: str, measure_b: str,
                                 gap: str, axes: Sequence[str], *, resamples: int = 1000,
                                 seed: int = 0, level: float = 0.95) -> dict:
    """Psi(a) - Psi(b) (granulated tau, Jiang et al. 2020) and each psi_h(a) - psi_h(b) over
    the same trainings, with paired bootstrap intervals.

    The trainings used and the resamples are those of :func:`paired_tau_difference` with the
    same arguments; each resample is regrouped (groups: trainings sharing every axis value
    but h) and both measures' psi_h and Psi are computed from it as :func:`granulated_tau`
    does; a resample where a difference is undefined is skipped for that difference.
    Returns {"difference", "low", "high", "granulated_a", "granulated_b", "n", "resamples",
    "replicates" (the resampled differences of Psi, nan where undefined),
    "per_axis": {h: {"difference", "low", "high", "psi_a", "psi_b"}}} (None: undefined).
    """
    ranks.check_bootstrap(resamples, level)
    recs = _usable(records, (measure_a, measure_b, gap), axes, "paired_granulated_difference")
    n = len(recs)
    groups = _axis_groups(_axis_codes(recs, axes)[0], axes)
    s_g = sign_matrix(_column(recs, gap))
    s_a, s_b = (sign_matrix(_column(recs, m)) for m in (measure_a, measure_b))
    ones, counts = np.ones((1, n)), bootstrap_counts(n, resamples, seed)
    per_a, gran_a = _weighted_granulated(ones, s_a, s_g, groups)
    per_b, gran_b = _weighted_granulated(ones, s_b, s_g, groups)
    boot_per_a, boot_a = _weighted_granulated(counts, s_a, s_g, groups)
    boot_per_b, boot_b = _weighted_granulated(counts, s_b, s_g, groups)
    per_axis = {}
    for h in axes:
        low, high = percentile_interval(boot_per_a[h] - boot_per_b[h], level)
        per_axis[h] = {"difference": _number(per_a[h][0] - per_b[h][0]), "low": low,
                       "high": high, "psi_a": _number(per_a[h][0]),
                       "psi_b": _number(per_b[h][0])}
    diffs = boot_a - boot_b
    low, high = percentile_interval(diffs, level)
    return {"difference": _number(gran_a[0] - gran_b[0]), "low": low, "high": high,
            "granulated_a": _number(gran_a[0]), "granulated_b": _number(gran_b[0]), "n": n,
            "resamples": int(np.isfinite(diffs).sum()), "replicates": diffs,
            "per_axis": per_axis}


def verdict_text(verdict: Verdict, measure_a: str, measure_b: str) -> str:
    """A verdict on tau(a) - tau(b) in the measures' names: "<a> beats <b>" (better), "<b>
    beats <a>" (worse), "no difference larger than <margin>", "undecided"."""
    if verdict.kind == BETTER:
        return f"{measure_a} beats {measure_b}"
    if verdict.kind == WORSE:
        return f"{measure_b} beats {measure_a}"
    return verdict.label


#: the test named in every verdict of a paired table
PAIRED_TEST = "paired bootstrap over models"


def models_needed(estimate: Estimate, *, alpha: float, margin: float,
                  power: float = 0.8) -> int | None:
    """How many models a decision on ``estimate`` needs, from the variance of the paired
    difference at its n (:func:`genlab.core.stats.decision_size`: D = tau(a) - tau(b) is a
    difference of U-statistics, whose variance falls as 1/n). ``alpha``: the family's first
    Holm step, (1 - level) / members."""
    return decision_size(estimate, alpha=alpha, margin=margin, power=power)


def _judged(rows: list[dict], estimates: list[Estimate | None], prefix: str,
            family: list[int], level: float, margin: float) -> None:
    """Fill each row's ``<prefix>_lo/_hi/_p/_p_holm``, ``<prefix>_verdict`` and, where
    undecided, ``<prefix>_models_needed``: Holm over the rows in ``family`` (the claim's
    pairs), every other row (the sanity rows) judged on its own."""
    members = [i for i in family if estimates[i] is not None]
    verdicts: dict[int, Verdict] = {}
    if members:
        verdicts.update(zip(members, holm([estimates[i] for i in members], level=level,
                                          margin=margin), strict=True))
    for i, est in enumerate(estimates):
        if est is not None and i not in verdicts:
            verdicts[i] = judge(est, level=level, margin=margin)
    alpha = (1 - level) / max(len(members), 1)
    for i, row in enumerate(rows):
        v = verdicts.get(i)
        if v is None:  # no resample defined the difference
            row.update({f"{prefix}_lo": None, f"{prefix}_hi": None, f"{prefix}_p": None,
                        f"{prefix}_p_holm": None, f"{prefix}_verdict": "undecided",
                        f"{prefix}_models_needed": None})
            continue
        row.update({f"{prefix}_lo": v.low, f"{prefix}_hi": v.high, f"{prefix}_p": v.p,
                    f"{prefix}_p_holm": v.p_corrected, f"{prefix}_level": v.level,
                    f"{prefix}_verdict": verdict_text(v, row["a"], row["b"]),
                    f"{prefix}_models_needed": (models_needed(estimates[i], alpha=alpha,
                                                              margin=margin)
                                                if v.kind == UNDECIDED else None)})


def paired_table(records: Sequence[dict], gap: str, axes: Sequence[str], *,
                 nonuniform: Sequence[str] = NONUNIFORMITY_MEASURES,
                 sharp: Sequence[str] = SHARPNESS_MEASURES, resamples: int = 1000,
                 seed: int = 0, level: float = 0.95, margin: float = VERDICT_MARGIN,
                 cmi_k: int = 2) -> list[dict]:
    """One row per (nonuniformity measure a, sharpness measure b), then RANDOM_MEASURE
    against each sharpness measure (the sanity rows; added with :func:`with_random_measure`
    when the records lack it).

    Columns: a, b, n, tau_a, tau_b, tau_diff (:func:`paired_tau_difference`),
    granulated_diff (:func:`paired_granulated_difference`), and for each of the two
    (prefix ``tau`` and ``granulated``) its verdict through genlab.core.stats: the paired
    bootstrap over the models (:func:`genlab.core.stats.bootstrap_estimate` of the
    resampled differences), Holm's correction over the family of the (a, b) rows of the
    claim (the sanity rows are judged alone, uncorrected); ``_lo``/``_hi`` the interval at
    the level Holm's step tests at (``_level``), ``_p`` and ``_p_holm``, ``_verdict`` (in
    the measures' names, :func:`verdict_text`, with ``margin`` for "no difference larger"),
    ``_models_needed`` for an undecided one (:func:`models_needed`), ``_lo_plain`` and
    ``_hi_plain`` its interval at ``level``, uncorrected; psi_<h>_diff/_lo/_hi per axis (95%
    percentile intervals, not judged); cmi_a, cmi_b: K of each measure (:func:`conditional_mi`,
    k = ``cmi_k``; None when there are fewer axes than ``cmi_k`` or no conditioning set leaves
    the gap's order uncertain).
    """
    if any(RANDOM_MEASURE not in r for r in records):
        records = with_random_measure(records)
    options = {"resamples": resamples, "seed": seed, "level": level}
    cmi: dict[str, float | None] = {}

    def k_of(measure: str) -> float | None:
        if measure not in cmi:
            cmi[measure] = (conditional_mi(records, measure, gap, axes, k=cmi_k)["K"]
                            if len(axes) >= cmi_k else None)
        return cmi[measure]

    def estimate(result: dict) -> Estimate | None:
        if result["difference"] is None or not np.isfinite(result["replicates"]).any():
            return None
        return bootstrap_estimate(result["difference"], result["replicates"], result["n"],
                                  PAIRED_TEST)

    claim = list(itertools.product(nonuniform, sharp))
    rows, plain_est, gran_est = [], [], []
    for a, b in [*claim, *((RANDOM_MEASURE, s) for s in sharp)]:
        plain = paired_tau_difference(records, a, b, gap, **options)
        gran = paired_granulated_difference(records, a, b, gap, axes, **options)
        plain_est.append(estimate(plain))
        gran_est.append(estimate(gran))
        row = {"a": a, "b": b, "n": plain["n"], "tau_a": plain["tau_a"],
               "tau_b": plain["tau_b"], "tau_diff": plain["difference"],
               "granulated_diff": gran["difference"]}
        for h, res in gran["per_axis"].items():
            row.update({f"psi_{h}_diff": res["difference"], f"psi_{h}_lo": res["low"],
                        f"psi_{h}_hi": res["high"]})
        row.update({"cmi_a": k_of(a), "cmi_b": k_of(b)})
        rows.append(row)
    family = list(range(len(claim)))
    for prefix, estimates in (("tau", plain_est), ("granulated", gran_est)):
        _judged(rows, estimates, prefix, family, level, margin)
        _plain_intervals(rows, estimates, prefix, level)
    return rows


def _plain_intervals(rows: list[dict], estimates: list, prefix: str, level: float) -> None:
    """Each row's ``prefix`` difference's interval at ``level`` itself, uncorrected
    (``<prefix>_lo_plain``, ``<prefix>_hi_plain``: what a results file records beside the
    corrected verdict)."""
    for row, est in zip(rows, estimates, strict=True):
        if est is not None:
            row[f"{prefix}_lo_plain"], row[f"{prefix}_hi_plain"] = est.interval(level)


# --- Jiang et al.'s conditional-independence view ----------------------------------------

def _cmi_bits(counts: np.ndarray) -> tuple[float, float]:
    """I(V; W | U) and H(W | U) in bits from counts[u, v, w] (plug-in probabilities)."""
    p = counts / counts.sum()
    p_u = p.sum(axis=(1, 2))[:, None, None]
    p_uv = p.sum(axis=2)[:, :, None]
    p_uw = p.sum(axis=1)[:, None, :]
    nz = p > 0
    mi = float(np.sum(p[nz] * np.log2((p * p_u)[nz] / (p_uv * p_uw)[nz])))
    p_w = p.sum(axis=1)  # p(u, w)
    p_u_w = np.broadcast_to(p.sum(axis=(1, 2))[:, None], p_w.shape)
    nzw = p_w > 0
    entropy = float(-np.sum(p_w[nzw] * np.log2(p_w[nzw] / p_u_w[nzw])))
    return max(mi, 0.0), max(entropy, 0.0)


def conditional_mi(records: Sequence[dict], measure: str, gap: str, axes: Sequence[str],
                   k: int = 2) -> dict:
    """Jiang et al.'s conditional-independence score K of a measure against the gap.

    Definition (Jiang, Neyshabur, Mobahi, Krishnan and Bengio 2020, "Fantastic
    generalization measures and where to find them", ICLR, section 5): for a pair of
    trainings (i, j), V_mu = sgn(mu_i - mu_j), V_g = sgn(g_i - g_j), and U_S is the pair's
    values of the hyper-parameters in S (both trainings' values). Over pairs drawn
    uniformly,

        I(V_mu; V_g | U_S) = sum_u p(u) sum_{v,w} p(v,w|u) log[p(v,w|u) / (p(v|u) p(w|u))]
        H(V_g | U_S)       = -sum_u p(u) sum_w p(w|u) log p(w|u)
        I^(S)              = I(V_mu; V_g | U_S) / H(V_g | U_S)      (in [0, 1])
        K(mu)              = min over S with |S| = k of I^(S)       (the paper's k: 2)

    K near 0: some k hyper-parameters make the measure's order uninformative about the
    gap's (conditional independence, so no direct link); K = 1: under every such
    conditioning the measure's order fixes the gap's. It is symmetric in the measure's sign.

    Estimation here: plug-in frequencies over all n(n - 1) ordered pairs of distinct
    trainings (trainings where the measure or the gap is not finite are left out);
    sgn(0) = 0 is a third value (ties do not occur for continuous values). A set S whose
    H(V_g | U_S) is 0 (its values fix the gap's order) has no ratio and is left out of the
    minimum; K is None when every S is. Returns {"K", "axes" (the minimising S), "mi",
    "entropy" (bits, at that S), "subsets": [{"axes", "mi", "entropy", "ratio"}, ...]}.
    """
    if not isinstance(k, int) or not 0 <= k <= len(axes):
        raise ConfigError(f"conditional_mi: k must be an integer in [0, {len(axes)}] "
                          f"(the number of axes), got {k!r}")
    recs = _usable(records, (measure, gap), axes, "conditional_mi")
    n = len(recs)
    codes, levels = _axis_codes(recs, axes)
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    v_m = np.sign(_column(recs, measure)[i] - _column(recs, measure)[j]).astype(int) + 1
    v_g = np.sign(_column(recs, gap)[i] - _column(recs, gap)[j]).astype(int) + 1
    subsets = []
    for s in itertools.combinations(range(len(axes)), k):
        cell, size = np.zeros(n, dtype=int), 1
        for col in s:
            cell, size = cell * levels[col] + codes[:, col], size * levels[col]
        u = cell[i] * size + cell[j]
        counts = np.bincount((u * 3 + v_m) * 3 + v_g, minlength=size * size * 9)
        mi, entropy = _cmi_bits(counts.reshape(size * size, 3, 3).astype(float))
        subsets.append({"axes": [axes[c] for c in s], "mi": mi, "entropy": entropy,
                        "ratio": mi / entropy if entropy > 0 else None})
    defined = [s for s in subsets if s["ratio"] is not None]
    best = min(defined, key=lambda s: s["ratio"]) if defined else None
    return {"K": best["ratio"] if best else None, "axes": best["axes"] if best else None,
            "mi": best["mi"] if best else None, "entropy": best["entropy"] if best else None,
            "subsets": subsets}
