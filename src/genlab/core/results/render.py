"""What a generated region is made of: the parts of a cell and the kinds of region.

A cell of a generated table is a list of parts: a string is written as it is (words, never
figures), a one-key object is a part of that kind (PARTS), rendered from the results files:

- ``seeds`` {file, metric, row}: the row's per-seed values;
- ``mean`` {file, metric, row}: mean ± std (n) of its seeds (or as recorded);
- ``count`` {file, metric, row, above}: how many seeds lie above a threshold;
- ``compare`` {file, metric, a, b, label, test, higher_is_better, margin, a_file, b_file,
  b_scale}:
  a - b judged through :mod:`genlab.core.stats`: paired by seed (``sign-flip``, the
  default, or ``bootstrap``) on the seeds both rows have, or unpaired (``permutation``)
  over every seed of each; all the ``compare`` parts of one claims row form one family under
  Holm's correction, and each prints effect, interval, n, test and verdict class; with
  ``b_scale`` K the difference is a - K b (a at least K times b where it is above 0);
- ``chance`` {file, of: {file, metric, row}}: an exact chance distribution (a results file's
  ``chance``) and how often a random member is at least the row's mean;
- ``figure`` {file, key}: a single recorded figure;
- ``recorded`` {file, key, unit, margin, higher_is_better, claim, claim_label, words, gates,
  gate_reason}: an interval recorded without its seeds ({effect, low, high, n, test}),
  classed on its own (uncorrected, and said so); ``claim`` says where a claimed value lies
  against the interval (``claim_label`` names it otherwise, e.g. "the goal"), ``words``
  renames a class (a correlation's "better" read as "positive"); ``gates`` (recorded parts
  of the comparison's premise) make it "not testable: <gate_reason>" unless every gate is
  "better";
- ``recorded family`` {file, keys, labels, margin, unit, higher_is_better}: recorded
  intervals judged as one family: each interval's normal approximation, Holm's correction
  over them, and for an undecided member the number of ``unit`` (models, seeds) a decision
  needs at its sd;
- ``tally`` {file, key, chance}: k of n trials ({successes, trials}) against a chance rate:
  the exact binomial test and the Clopper-Pearson interval of the share;
- ``room`` {file, key, claim}: a world's room ({baseline, target}: baseline minus
  trained-on-target in % of the baseline) beside a claimed reduction, "not testable in this
  world" where the room is below the claim;
- ``undecided`` {rerun, missing}: a verdict with no per-seed data (or ``missing``) on record;
- ``not testable`` {reason}.

A region's kind (REGION_KINDS) says how its specification becomes Markdown: ``claims`` (a
table of paper, claim, verdict, figures, or the ``columns`` named; its own ``rows``, or those
of the claims region named by ``from``, kept to one ``paper`` or to the ``claims`` listed),
``values`` (one results
file's per-seed table with its command and commit), ``verdicts`` (every comparison of a
claims region with its p-values), ``chance`` (a chance distribution's summary) and ``output``
(a command and the lines it printed, recorded with ``--record``: a page's example block, or
with ``markdown`` true the tables a command printed, under it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping

from scipy import stats as scipy_stats

from genlab.core.errors import ConfigError, DataError
from genlab.core.registry import Registry
from genlab.core.results.files import ResultFile
from genlab.core.stats import (
    Estimate,
    Verdict,
    classify,
    count_distribution,
    decision_size,
    distribution_of,
    holm,
    judge,
    paired_difference,
    unpaired_difference,
)
from genlab.core.stats.family import BETTER, UNDECIDED, WORSE

LEVEL = 0.95
#: a part kind -> f(spec, files, verdict or None) -> Markdown
PARTS: Registry[Callable[..., str]] = Registry("results part")
#: a region kind -> f(spec, files, all region specs) -> Markdown
REGION_KINDS: Registry[Callable[..., str]] = Registry("results region")

Files = Mapping[str, ResultFile]


def _file(files: Files, name) -> ResultFile:
    if name not in files:
        raise DataError(f"no results file {name!r}; the folder holds "
                        f"{', '.join(sorted(files)) or 'none'}")
    return files[name]


def _need(spec: Mapping, *keys: str, part: str) -> None:
    missing = [k for k in keys if k not in spec]
    if missing:
        raise ConfigError(f"results part {part!r} needs {', '.join(missing)}, got "
                          f"{', '.join(sorted(spec)) or 'nothing'}")


def number(value, digits: int | None = None) -> str:
    """An integer as it is, anything else to ``digits`` decimals (2 by default)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{float(value):.{2 if digits is None else digits}f}"


def mean_text(mean: float, std: float | None, n: int, digits: int = 2) -> str:
    if n == 1 or std is None:
        return f"{mean:.{digits}f} (n={n})"
    return f"{mean:.{digits}f} ± {std:.{digits}f} (n={n})"


def _seed_order(seeds: Mapping[str, float]) -> list[str]:
    return sorted(seeds, key=lambda s: (len(s), s))


def seeds_part(spec: Mapping, files: Files, verdict=None) -> str:
    _need(spec, "file", "metric", "row", part="seeds")
    seeds = _file(files, spec["file"]).seeds(spec["metric"], spec["row"])
    return ", ".join(number(seeds[s], spec.get("digits")) for s in _seed_order(seeds))


def mean_part(spec: Mapping, files: Files, verdict=None) -> str:
    _need(spec, "file", "metric", "row", part="mean")
    return mean_text(*_file(files, spec["file"]).summary(spec["metric"], spec["row"]),
                     digits=spec.get("digits", 2))


def count_part(spec: Mapping, files: Files, verdict=None) -> str:
    _need(spec, "file", "metric", "row", "above", part="count")
    seeds = _file(files, spec["file"]).seeds(spec["metric"], spec["row"])
    above = sum(v > spec["above"] for v in seeds.values())
    return f"{above} of {len(seeds)} seeds above {number(spec['above'])}"


def estimate(spec: Mapping, files: Files):
    """The :class:`~genlab.core.stats.Estimate` of a ``compare`` part."""
    _need(spec, "file", "metric", "a", "b", part="compare")
    a = _file(files, spec.get("a_file", spec["file"])).seeds(spec["metric"], spec["a"])
    b = _file(files, spec.get("b_file", spec["file"])).seeds(spec["metric"], spec["b"])
    scale = float(spec.get("b_scale", 1))  # a - K b: "a is at least K times b" when above 0
    b = {seed: scale * v for seed, v in b.items()}
    test = spec.get("test", "sign-flip")
    if test == "permutation":
        return unpaired_difference(list(a.values()), list(b.values()), test="permutation")
    common = [s for s in _seed_order(a) if s in b]
    if len(common) < 2:
        raise DataError(f"compare {spec['a']} - {spec['b']} ({spec['metric']}): fewer than two "
                        f"seeds in common ({common}); use test 'permutation' for unpaired runs")
    return paired_difference([a[s] for s in common], [b[s] for s in common], test=test)


def family_verdicts(specs: list[Mapping], files: Files, level: float = LEVEL) -> list[Verdict]:
    """The verdicts of a family of ``compare`` parts: Holm's correction over all of them (a
    family of one is judged alone); each keeps its own margin and direction."""
    estimates = [estimate(s, files) for s in specs]
    if len(estimates) == 1:
        base = [judge(estimates[0], level=level)]
    else:
        base = holm(estimates, level=level)
    out = []
    for spec, v in zip(specs, base, strict=True):
        assert v.low is not None and v.high is not None  # a judged estimate has its interval
        margin = spec.get("margin")
        kind = classify(v.low, v.high, margin=margin,
                        higher_is_better=spec.get("higher_is_better", True))
        if kind in (BETTER, WORSE) and v.kind not in (BETTER, WORSE):
            kind = UNDECIDED  # the interval excludes 0 while the test does not reject
        out.append(dataclasses.replace(v, kind=kind, margin=margin))
    return out


def signed(x: float | None, digits: int = 2) -> str:
    """A signed figure; an unbounded interval's end as -∞ / +∞, a missing one as -."""
    if x is None:
        return "-"
    return "-∞" if x == -math.inf else "+∞" if x == math.inf else f"{x:+.{digits}f}"


def verdict_text(v: Verdict, digits: int = 2, unit: str = "") -> str:
    """effect [low, high] unit (n, test, correction) class."""
    def f(x):
        return signed(x, digits)
    about = ", ".join(x for x in (f"n={v.n}", v.test, v.correction) if x)
    return f"{f(v.effect)} [{f(v.low)}, {f(v.high)}]{unit} ({about}) {v.label}"


def compare_part(spec: Mapping, files: Files, verdict: Verdict | None = None) -> str:
    if verdict is None:
        verdict = family_verdicts([spec], files)[0]
    label = spec.get("label", f"{spec['a']} - {spec['b']}")
    text = f"{label}: {verdict_text(verdict, spec.get('digits', 2), spec.get('unit', ''))}"
    unbounded = any(x is not None and math.isinf(x) for x in (verdict.low, verdict.high))
    if "sign-flip" in verdict.test and unbounded:
        text += (f" (unbounded: over {verdict.n} seeds the exact sign-flip test cannot "
                 "reach this level after Holm's correction)")
    return text


def chance_part(spec: Mapping, files: Files, verdict=None) -> str:
    _need(spec, "file", part="chance")
    source = _file(files, spec["file"])
    if not source.chance:
        raise DataError(f"results file {source.name} holds no chance distribution")
    dist = distribution_of(source.chance["values"], source.chance["counts"])
    digits = spec.get("digits", 2)
    low, high = dist.interval(LEVEL)
    text = (f"a random cell (exact over the {source.chance['population']:,} cells of the "
            f"table): mean {dist.mean():.{digits}f}, 95 % of cells in [{low:.{digits}f}, "
            f"{high:.{digits}f}]")
    of = spec.get("of")
    if of:
        _need(of, "file", "metric", "row", part="chance.of")
        mean = _file(files, of["file"]).summary(of["metric"], of["row"])[0]
        share = 100 * dist.at_least(mean)
        text += (f"; one at least as good as {of.get('label', of['row'])}'s mean "
                 f"({mean:.{digits}f}): {share:.1f} % of cells")
    return text


def figure_part(spec: Mapping, files: Files, verdict=None) -> str:
    _need(spec, "file", "key", part="figure")
    value = _file(files, spec["file"]).figure(spec["key"])
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(value, spec.get("digits")) + spec.get("unit", "")
    return str(value)


def recorded_verdict(spec: Mapping, files: Files) -> Verdict:
    """The verdict of a recorded interval (a ``recorded`` part's figure), classed alone."""
    _need(spec, "file", "key", part="recorded")
    fig = _file(files, spec["file"]).figure(spec["key"])
    try:
        effect, low, high = float(fig["effect"]), float(fig["low"]), float(fig["high"])
    except (KeyError, TypeError, ValueError):
        raise DataError(f"results file {spec['file']}: figure {spec['key']!r} must hold "
                        "effect, low and high") from None
    kind = classify(low, high, margin=spec.get("margin"),
                    higher_is_better=spec.get("higher_is_better", True))
    test = fig.get("test", "")
    # an interval its command already corrected (its test names Holm) is not corrected again
    correction = "recorded" if "Holm" in test else "recorded, uncorrected"
    return Verdict(effect, low, high, LEVEL, fig.get("n"), test, kind, correction=correction,
                   margin=spec.get("margin"))


def recorded_part(spec: Mapping, files: Files, verdict=None) -> str:
    """A recorded interval's verdict; with ``gates`` (recorded parts of its premise) and
    ``gate_reason``, "not testable: <reason>" unless every gate is "better"."""
    v = recorded_verdict(spec, files)
    label = spec.get("label")
    failed = [(g, recorded_verdict(g, files)) for g in spec.get("gates", [])]
    failed = [(g, gv) for g, gv in failed if gv.kind != BETTER]
    if failed:
        _need(spec, "gate_reason", part="recorded")
        why = "; ".join(f"{g.get('label', g['key'])}: {verdict_text(gv, g.get('digits', 2))}"
                        for g, gv in failed)
        text = f"not testable: {spec['gate_reason']} ({why})"
        return f"{label}: {text}" if label else text
    text = verdict_text(v, spec.get("digits", 2), spec.get("unit", ""))
    words = spec.get("words", {})
    if v.label in words:  # e.g. a correlation's "better" / "worse" read as its sign
        text = text[: -len(v.label)] + words[v.label]
    if "claim" in spec:
        claim = float(spec["claim"])
        high = math.inf if v.high is None else v.high
        low = -math.inf if v.low is None else v.low
        where = ("above the interval" if claim > high else "below the interval" if claim < low
                 else "inside the interval")
        named = spec.get("claim_label", "the claimed")
        text += f"; {named} {claim:g}{spec.get('unit', '')} lies {where}"
    return f"{label}: {text}" if label else text


def _numbers(spec: Mapping, files: Files, *names: str) -> list[float]:
    """The numbers ``names`` of the figure ``spec`` points at (its file and key); DataError
    naming the file and figure when one is missing or not a number."""
    fig = _file(files, spec["file"]).figure(spec["key"])
    try:
        return [float(fig[name]) for name in names]
    except (KeyError, TypeError, ValueError):
        raise DataError(f"results file {spec['file']}: figure {spec['key']!r} must hold "
                        f"{' and '.join(names)}") from None


def tally_part(spec: Mapping, files: Files, verdict=None) -> str:
    """k of n trials went the claimed way: the exact binomial test against ``chance`` (the
    count's exact distribution, :func:`genlab.core.stats.count_distribution`) and the
    Clopper-Pearson interval of the share (Clopper & Pearson 1934, Biometrika 26)."""
    _need(spec, "file", "key", part="tally")
    k, n = (int(v) for v in _numbers(spec, files, "successes", "trials"))
    if not 0 <= k <= n or n < 1:
        raise DataError(f"results file {spec['file']}: figure {spec['key']!r} needs "
                        f"0 <= successes <= trials, got {k} of {n}")
    chance = float(spec.get("chance", 0.5))
    dist = count_distribution([chance] * n)
    p = min(1.0, 2 * min(dist.at_least(k), dist.at_most(k)))
    alpha = 1 - LEVEL
    low = 0.0 if k == 0 else float(scipy_stats.beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(scipy_stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    kind = classify(low - chance, high - chance)
    if kind != UNDECIDED and p > alpha:
        kind = UNDECIDED
    label = spec.get("label", "")
    return (f"{label}{': ' if label else ''}{k} of {n} ({k / n:.2f} [{low:.2f}, {high:.2f}], "
            f"exact binomial test against {chance:g}, p = {p:.1e}) {kind}")


def room_part(spec: Mapping, files: Files, verdict=None) -> str:
    _need(spec, "file", "key", "claim", part="room")
    baseline, target = _numbers(spec, files, "baseline", "target")
    room = 100 * (baseline - target) / baseline
    claim = float(spec["claim"])
    text = (f"{spec.get('label', spec['key'])}: room {room:.1f} % (baseline {baseline:.2f}, "
            f"trained on the target {target:.2f}) against the claimed {claim:g} %")
    return text + (": not testable in this world" if room < claim else "")


def _recorded_estimate(fig: Mapping, name: str, key: str) -> Estimate:
    """The normal approximation of a recorded interval: se = (high - low) / (2 z_.975), the
    effect's two-sided p from z = effect / se, intervals effect +- z se at any level."""
    try:
        effect, low, high, n = (float(fig["effect"]), float(fig["low"]), float(fig["high"]),
                                int(fig["n"]))
    except (KeyError, TypeError, ValueError):
        raise DataError(f"results file {name}: figure {key!r} must hold effect, low, high "
                        "and n") from None
    se = (high - low) / (2 * float(scipy_stats.norm.ppf((1 + LEVEL) / 2)))
    p = (1.0 if effect == 0 else 0.0) if se <= 0 else float(
        2 * scipy_stats.norm.sf(abs(effect) / se))

    def bounds(level: float) -> tuple[float, float]:
        half = float(scipy_stats.norm.ppf((1 + level) / 2)) * se
        return effect - half, effect + half

    test = f"{fig.get('test', 'recorded')}, normal approx."
    return Estimate(effect, n, test, p, bounds)


def recorded_family_part(spec: Mapping, files: Files, verdict=None) -> str:
    """Recorded intervals (``keys``, each {effect, low, high, n, test}) judged as one family:
    the normal approximation of each (:func:`_recorded_estimate`), Holm's correction over
    them (with ``higher_is_better`` false a negative effect is "better"), and for an
    undecided member the units a decision needs at Holm's first level (alpha / members,
    80 % power: :func:`genlab.core.stats.decision_size`), named by ``unit``."""
    _need(spec, "file", "keys", part="recorded family")
    keys, labels = list(spec["keys"]), list(spec.get("labels", spec["keys"]))
    if not keys or len(labels) != len(keys):
        raise ConfigError("recorded family: give keys and as many labels")
    source = _file(files, spec["file"])
    estimates = [_recorded_estimate(source.figure(k), source.name, k) for k in keys]
    margin = spec.get("margin")
    sense = {"margin": margin, "higher_is_better": spec.get("higher_is_better", True)}
    verdicts = (holm(estimates, level=LEVEL, **sense) if len(keys) > 1
                else [judge(estimates[0], level=LEVEL, **sense)])
    alpha = (1 - LEVEL) / len(keys)
    out = []
    for label, est, v in zip(labels, estimates, verdicts, strict=True):
        text = f"{label}: {verdict_text(v, spec.get('digits', 2))}"
        if v.kind == UNDECIDED:
            size = decision_size(est, alpha=alpha, margin=margin)
            text += (f", a decision needs about {size} {spec.get('unit', 'units')} at its sd"
                     if size else ", no decision within reach at its sd")
        out.append(text)
    return "; ".join(out)


def undecided_part(spec: Mapping, files: Files, verdict=None) -> str:
    _need(spec, "rerun", part="undecided")
    return (f"undecided (no {spec.get('missing', 'per-seed data')} recorded; rerun: "
            f"`{spec['rerun']}`)")


def not_testable_part(spec: Mapping, files: Files, verdict=None) -> str:
    _need(spec, "reason", part="not testable")
    return f"not testable: {spec['reason']}"


for _name, _fn in (("seeds", seeds_part), ("mean", mean_part), ("count", count_part),
                   ("compare", compare_part), ("chance", chance_part),
                   ("figure", figure_part), ("recorded", recorded_part),
                   ("recorded family", recorded_family_part),
                   ("room", room_part), ("tally", tally_part), ("undecided", undecided_part),
                   ("not testable", not_testable_part)):
    PARTS.register(_name, _fn)


def _part(item) -> tuple[str, Mapping]:
    if not isinstance(item, Mapping) or len(item) != 1:
        raise ConfigError(f"a cell part must be a string or a one-key object, got {item!r}")
    (kind, spec), = item.items()
    return kind, spec


def render_cell(parts, files: Files, verdicts: Mapping[int, Verdict] | None = None) -> str:
    """A cell's Markdown: its parts in order (``verdicts`` by the part's id, for compares
    judged as a family)."""
    if isinstance(parts, str):
        return parts
    out = []
    for item in parts:
        if isinstance(item, str):
            out.append(item)
            continue
        kind, spec = _part(item)
        v = (verdicts or {}).get(id(spec))
        out.append(PARTS.get(kind)(spec, files, v))
    return "".join(out).replace("|", "\\|").replace("\n", " ")


def compares(parts) -> list[Mapping]:
    """The ``compare`` parts of a cell, in order."""
    if isinstance(parts, str):
        return []
    return [spec for kind, spec in (_part(p) for p in parts if not isinstance(p, str))
            if kind == "compare"]


def row_verdicts(row: Mapping, files: Files) -> dict[int, Verdict]:
    """A claims row's family: every ``compare`` of its cells under one Holm correction."""
    specs = [s for col in ("verdict",) for s in compares(row.get(col, []))]
    if not specs:
        return {}
    return {id(s): v for s, v in zip(specs, family_verdicts(specs, files), strict=True)}


def claims_rows(spec: Mapping, regions: Mapping) -> list[Mapping]:
    """A claims region's rows: its own, or those of the claims region it names (``from``),
    kept to one paper (``paper``) where it names one."""
    if "from" not in spec:
        return list(spec.get("rows", []))
    source = regions.get(spec["from"])
    if source is None or source.get("kind") != "claims" or "from" in source:
        raise ConfigError(f"a claims region reads the rows of a claims region with its own "
                          f"rows ('from'), got {spec['from']!r}")
    rows = [r for r in source.get("rows", [])
            if "paper" not in spec or r.get("paper") == spec["paper"]]
    if "claims" in spec:  # the rows of these claims only, in the source's order
        missing = set(spec["claims"]) - {r.get("claim") for r in rows}
        if missing:
            raise ConfigError(f"claims region names claims it does not have: "
                              f"{', '.join(sorted(missing))}")
        rows = [r for r in rows if r.get("claim") in spec["claims"]]
    return rows


def claims_region(spec: Mapping, files: Files, regions: Mapping) -> str:
    columns = tuple(spec.get("columns", ("paper", "claim", "verdict", "figures")))
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in claims_rows(spec, regions):
        verdicts = row_verdicts(row, files)
        lines.append("| " + " | ".join(render_cell(row.get(c, ""), files, verdicts)
                                       for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _p(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def verdicts_region(spec: Mapping, files: Files, regions: Mapping) -> str:
    source = regions.get(spec.get("from"))
    if source is None or source.get("kind") != "claims":
        raise ConfigError(f"a verdicts region names the claims region it reads ('from'), got "
                          f"{spec.get('from')!r}")
    lines = ["| claim | comparison | effect | interval | level | n | test | p | p (Holm) | "
             "verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in claims_rows(source, regions):
        specs = compares(row.get("verdict", []))
        if not specs:
            continue
        for s, v in zip(specs, family_verdicts(specs, files), strict=True):
            d = s.get("digits", 2)
            lines.append(
                f"| {row.get('paper', '')}: {row.get('claim', '')} | "
                f"{s.get('label', s['a'] + ' - ' + s['b'])} ({s['metric']}) | "
                f"{signed(v.effect, d)} | [{signed(v.low, d)}, {signed(v.high, d)}] | "
                f"{v.level or 0:.4f} | "
                f"{v.n} | {v.test} | {_p(v.p)} | {_p(v.p_corrected)} | {v.label} |")
    return "\n".join(lines) + "\n"


def values_region(spec: Mapping, files: Files, regions: Mapping) -> str:
    """One results file's table: per metric, each row's seeds (or "not recorded") and its
    mean ± std (n); then its single figures, if any."""
    source = _file(files, spec.get("file"))
    metrics = spec.get("metrics") or list(dict.fromkeys([*source.values, *source.summaries]))
    rows: list[str] = []
    for m in metrics:
        for r in [*source.values.get(m, {}), *source.summaries.get(m, {})]:
            if r not in rows:
                rows.append(r)
    digits = spec.get("digits", {})
    lines = [f"{source.title}. From {source.source}.", ""]
    if metrics:
        lines += ["; ".join(f"{m}: {source.metrics.get(m, m)}" for m in metrics) + ".", ""]
        head = (["row"] + [f"{m}: per seed" for m in metrics]
                + [f"{m}: mean ± std" for m in metrics])
        lines += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        for r in rows:
            per_seed, means = [], []
            for m in metrics:
                if r in source.values.get(m, {}):
                    seeds = source.seeds(m, r)
                    per_seed.append(", ".join(f"{number(seeds[s], digits.get(m))} (seed {s})"
                                              if spec.get("name_seeds") else
                                              number(seeds[s], digits.get(m))
                                              for s in _seed_order(seeds)))
                elif r in source.summaries.get(m, {}):
                    per_seed.append("not recorded")
                else:
                    per_seed.append("-")
                known = r in source.values.get(m, {}) or r in source.summaries.get(m, {})
                means.append(mean_text(*source.summary(m, r),
                                       digits=2 if digits.get(m) is None else digits[m])
                             if known else "-")
            lines.append("| " + " | ".join([r, *per_seed, *means]) + " |")
        lines.append("")
        seeds_of = {m: sorted({s for v in source.values.get(m, {}).values() for s in v},
                              key=lambda s: (len(s), s)) for m in metrics}
        named = [f"{m} {', '.join(v)}" for m, v in seeds_of.items() if v]
        if named:
            lines += ["Seeds, in the order listed: " + "; ".join(named) + ".", ""]
    if source.figures:
        lines += ["| figure | value |", "|---|---|"]
        for key, value in source.figures.items():
            lines.append(f"| {key} | {figure_text(value)} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def figure_text(value) -> str:
    """A recorded figure as a table cell: an interval as effect [low, high] (n, test), any
    other record as its fields."""
    if isinstance(value, Mapping) and {"effect", "low", "high"} <= set(value):
        about = ", ".join(str(x) for x in (f"n={value['n']}" if "n" in value else "",
                                           value.get("test", "")) if x)
        text = (f"{signed(value['effect'])} [{signed(value['low'])}, "
                f"{signed(value['high'])}]")
        return text + (f" ({about})" if about else "")
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def chance_region(spec: Mapping, files: Files, regions: Mapping) -> str:
    source = _file(files, spec.get("file"))
    return (f"{source.title}. From {source.source}.\n\n"
            + chance_part({"file": source.name}, files) + ".\n")


def output_region(spec: Mapping, files: Files, regions: Mapping) -> str:
    """A command and what it printed (a results file's ``output``), as a page's indented
    example block, with the run's wall time, machine and commit; with ``markdown`` true the
    printed lines are Markdown (a command that prints tables) and are written as they are,
    under the indented command."""
    source = _file(files, spec.get("file"))
    if not source.output:
        raise DataError(f"results file {source.name} holds no printed output")
    if spec.get("markdown"):
        lines = [f"    $ {source.command}", "", *(x.rstrip() for x in source.output), ""]
    else:
        lines = [f"    $ {source.command}", *(f"    {x}".rstrip() for x in source.output), ""]
    about = [f"{float(source.figures['wall_seconds']):.2f} s wall"
             if "wall_seconds" in source.figures else "",
             f"on {source.figures['machine']}" if "machine" in source.figures else ""]
    lines.append("(" + " ".join(x for x in about if x) + f"; commit {source.commit}.)")
    return "\n".join(lines) + "\n"


REGION_KINDS.register("claims", claims_region)
REGION_KINDS.register("output", output_region)
REGION_KINDS.register("verdicts", verdicts_region)
REGION_KINDS.register("values", values_region)
REGION_KINDS.register("chance", chance_region)


def render_region(name: str, regions: Mapping, files: Files) -> str:
    """The Markdown of region ``name`` of the specification ``regions``."""
    if name not in regions:
        raise ConfigError(f"no region {name!r} in the specification; it has "
                          f"{', '.join(sorted(regions)) or 'none'}")
    spec = regions[name]
    return REGION_KINDS.get(spec.get("kind", ""))(spec, files, regions)
