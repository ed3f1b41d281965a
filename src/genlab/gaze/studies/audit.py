"""`genlab gaze audit`: does a world have the property MoEGaze rests on?

The paper's premise: a gaze model does better on test subjects whose appearance resembles
that of its training subjects, so experts trained on sub-datasets of small appearance
variation should help. For one world (genlab.gaze.protocol.WORLDS) and each of its sources
the audit trains, for every seed (runs of one seed share initialisation and batch order,
so every difference is paired by seed):

* **the motivating experiment** (sources with appearance clusters): for each cluster c with
  at least ``min_subjects`` training subjects, the baseline trained on the training
  subjects of c ("similar") and on a seeded random set of as many training subjects
  ("random"; drawn per seed and cluster from all training subjects, so never a held-out
  one); both are scored on the held-out subjects of cluster c (the source's held-out
  subjects and the targets' subjects: nobody either run trained on). "Own cluster only"
  is "similar" here, since similarity is the true cluster, so it is not trained twice.
  Premise verdict: *holds* when similar - random, pooled over the clusters, has its 95%
  interval below zero;
* **the baseline per cluster**: the full-data baseline's mean error on each cluster's
  held-out subjects and its residual bias there (mean signed pitch and yaw error: what a
  per-cluster expert could remove at best), with the error left after removing that bias
  (an upper bound on an offset's gain: the bias is measured on the same subjects);
* **capacity**: the baseline at 1x and ``wide``x width and MoEGaze with oracle routing
  (one expert per true cluster), and the baseline at the width whose parameter count is
  nearest the oracle's ("matched", between 1x and ``wide``x; trained only when it is
  neither), on the held-out source subjects and on every target;
* sanity rows: the constant predictor (the source training mean) and the baseline trained
  on the target itself (``reference_seeds``), as the bench has them.

Runs go through the bench's runner (genlab.gaze.studies.runs): a rerun of the same command
reads finished runs back and resumes interrupted ones. Intervals bootstrap seeds and test
subjects together (genlab.gaze.studies.stats), as the bench's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from genlab.core.errors import ConfigError
from genlab.core.options import (
    Options,
    check_options,
    option,
    option_like,
    seed_text,
    takes_options,
)
from genlab.core.report import markdown_table
from genlab.core.runs import write_json
from genlab.core.stats import Verdict
from genlab.core.stats.family import BETTER, UNDECIDED, WORSE
from genlab.core.studies import Study, register_study
from genlab.core.sweep import RunSpec
from genlab.core.trainer import resolve_device
from genlab.gaze.config import DESIGN
from genlab.gaze.data.splits import hold_out_subjects
from genlab.gaze.metrics import angular_errors, predict
from genlab.gaze.models.registry import build_gaze_model
from genlab.gaze.protocol import WORLDS, SyntheticCache, target_seed
from genlab.gaze.studies.bench import (
    BenchCommandConfig,
    BenchConfig,
    clusters_of,
    own_sizing,
    size_before,
    sources_of,
)
from genlab.gaze.studies.runs import run_study, timed_report, train_spec
from genlab.gaze.studies.sizing import pilot_dicts, pilot_of, plan_lines
from genlab.gaze.studies.stats import Cell, cell_summary, fmt_ci
from genlab.gaze.studies.tables import Bootstrap, estimate, family, verdict_record
from genlab.gaze.train import GazeTrainConfig, trained_model

__all__ = ["AuditConfig", "audit_plan", "run_audit", "signed_means", "subject_subsets"]


def _bench(name: str, **changes):
    """The option ``name`` as gaze bench declares it (the audit runs at the bench's sizes)."""
    return option_like(BenchConfig, name, **changes)


#: the options of gaze bench that the audit does not take: it audits one world (``world``),
#: trains no small-share rows, no MoEGaze design (its MoEGaze is the oracle, at gaze train's
#: defaults, as the bench's) and sets the training subjects of its subset runs itself
SET_PER_RUN = ("worlds", "small_fraction", "small_subjects", *DESIGN, "train_subjects")


@dataclass
@takes_options(BenchConfig, sets=SET_PER_RUN)
class AuditConfig(Options):
    """Every option of `genlab gaze audit`: the world, its sources and the audit's rows, and
    every option of gaze bench (hence of gaze train) but :data:`SET_PER_RUN`, at the bench's
    defaults."""

    world: str = option("appearance", choices=WORLDS, help="The world audited.")
    sources: list[str] = option(factory=list, parse="list", help="Its sources audited "
                                "(empty: every source of the world).")
    reference_seeds: list[int] = _bench("reference_seeds", empty=True,
                                        help="Seeds of the trained-on-target references "
                                             "(\"\": none).")
    wide: int = option(2, ge=2, help="The wide baseline's width as a multiple of --width "
                       "(the capacity row).")
    min_subjects: int = option(2, gt=0, help="Clusters with fewer training subjects are left "
                               "out of the similar-vs-random experiment.")
    executor: str = option_like(BenchCommandConfig, "executor")
    address: str | None = option_like(BenchCommandConfig, "address")
    size_from: str = _bench("size_from", help="Pilot of the sizing: a finished audit's "
                            "audit.json; the plan is printed before the runs.")

    def validate(self) -> None:
        check_options(self)  # types, choices (world), limits; seeds
        self.base().validate()  # gaze train's checks of the options it takes
        known = sources_of(self.world)
        for source in self.sources:
            if source not in known:
                raise ConfigError(f"--sources: {source!r} is not a source of the {self.world} "
                                  f"world; expected some of: {', '.join(known)}")

    def audited_sources(self) -> dict[str, list[str]]:
        """Each audited source with its targets (in task order)."""
        return {s: t for s, t in sources_of(self.world).items()
                if not self.sources or s in self.sources}

    def base(self) -> GazeTrainConfig:
        """Every run's options before its own: the baseline, with the options of gaze train
        that the bench takes and the audit too, the targets at the plan's scale."""
        values = self.wrapping.values(self, names=BenchConfig.wrapping.names)
        values["target_scale"] = max(1, self.target_scale)
        return GazeTrainConfig(model="baseline", **values)


def subject_subsets(cluster_of: Mapping[int, int], held_out: Sequence[int], cluster: int,
                    seed: int) -> dict[str, list[int]]:
    """The training subjects of the similar-vs-random experiment for one cluster.

    ``cluster_of``: every source subject's cluster; ``held_out``: the subjects held out
    (never trained on). "similar": the training subjects of ``cluster``; "random": a seeded
    random set of as many training subjects of any cluster (seeded by ``seed`` and
    ``cluster``). Both sorted.
    """
    out = set(int(s) for s in held_out)
    train = sorted(int(s) for s in cluster_of if int(s) not in out)
    similar = [s for s in train if cluster_of[s] == cluster]
    if not similar:
        raise ConfigError(f"cluster {cluster} has no training subjects")
    rng = np.random.default_rng([seed, 43, cluster])
    random = sorted(int(s) for s in rng.choice(train, size=len(similar), replace=False))
    return {"similar": similar, "random": random}


def signed_means(pred: torch.Tensor, true: torch.Tensor,
                 groups: torch.Tensor) -> dict[str, list[float]]:
    """{group: [mean signed pitch error, mean signed yaw error (degrees), images]}.

    The signed error is prediction - truth in (pitch, yaw); its mean over a cluster is the
    bias that a per-cluster offset would remove.
    """
    diff = torch.rad2deg(pred.double() - true.double())
    out = {}
    for g in torch.unique(groups).tolist():
        sel = diff[groups == g]
        out[str(int(g))] = [float(sel[:, 0].mean()), float(sel[:, 1].mean()), int(len(sel))]
    return out


@dataclass
class SourcePlan:
    """What the audit trains for one source: its targets and the clusters' subject sets."""

    source: str
    targets: list[str]
    clusters: int
    matched_width: int = 0  # the baseline's width nearest the oracle's parameters (0: none)
    train_subjects: dict[int, int] = field(default_factory=dict)  # cluster -> how many
    audited: list[int] = field(default_factory=list)  # clusters of the similar/random runs


@dataclass
class AuditPlan:
    specs: list[RunSpec]
    sources: list[SourcePlan]


def _name(source: str, kind: str, seed: int) -> str:
    return f"{source}__{kind}__s{seed}"


def audit_plan(cfg: AuditConfig, out: str | Path,
               cache: SyntheticCache | None = None) -> AuditPlan:
    """Every run of the audit (seed-major, so a partial audit covers every row)."""
    cfg.validate()
    runs = Path(out) / "runs"
    cache = cache or SyntheticCache(Path(out) / "data")
    base, specs, plans = cfg.base(), [], []

    def add(name: str, **kw) -> None:
        specs.append(train_spec(name, replace(base, **kw), runs / name, cache=cache,
                                plots=False))

    subsets = {}
    for source, targets in cfg.audited_sources().items():
        plan = SourcePlan(source, targets, clusters_of(source))
        if plan.clusters:
            subsets |= _plan_clusters(cfg, plan, base, cache)
        plans.append(plan)
    for seed in sorted({*cfg.seeds, *cfg.reference_seeds}):
        for plan in plans if seed in cfg.seeds else ():
            _add_source_runs(cfg, plan, seed, subsets, add)
        if seed in cfg.reference_seeds:
            for target in dict.fromkeys(t for p in plans for t in p.targets):
                add(_name(target, "reference", seed), source=target, targets=[target],
                    seed=seed)
    return AuditPlan(specs, plans)


def _plan_clusters(cfg: AuditConfig, plan: SourcePlan, base: GazeTrainConfig,
                   cache: SyntheticCache) -> dict:
    """Fill a clustered source's plan (the matched width, each cluster's training subjects,
    the clusters audited); the subject sets of the similar-vs-random runs, by (source,
    cluster, seed)."""
    plan.matched_width = matched_width(cfg, plan)
    data = cache.get(plan.source, cfg.train_count, cfg.data_seed, cfg.size)
    train, val = hold_out_subjects(data, base.val_fraction, cfg.data_seed)
    cluster_of = {int(s): int(c) for s, c in zip(data.labels.subject.tolist(),
                                                  data.labels.cluster.tolist(), strict=True)}
    held = sorted(set(val.labels.subject.tolist()))
    subsets = {}
    for c in range(plan.clusters):
        plan.train_subjects[c] = len(set(train.labels.subject[
            train.labels.cluster == c].tolist()))
        if plan.train_subjects[c] >= cfg.min_subjects:
            plan.audited.append(c)
            for seed in cfg.seeds:
                subsets[(plan.source, c, seed)] = subject_subsets(cluster_of, held, c, seed)
    return subsets


def _add_source_runs(cfg: AuditConfig, plan: SourcePlan, seed: int, subsets: dict,
                     add) -> None:
    """One seed's runs of a source: the baseline, wide, matched, oracle and the similar and
    random runs of each audited cluster (``add(name, **changes)`` plans one)."""
    common = dict(source=plan.source, targets=plan.targets, seed=seed)
    add(_name(plan.source, "baseline", seed), **common)
    add(_name(plan.source, "wide", seed), width=cfg.width * cfg.wide, **common)
    if plan.matched_width not in (0, cfg.width, cfg.width * cfg.wide):
        add(_name(plan.source, "matched", seed), width=plan.matched_width, **common)
    if plan.clusters:
        add(_name(plan.source, "oracle", seed), model="moegaze", routing="oracle",
            experts=plan.clusters, **common)
    for c in plan.audited:
        for kind, subjects in subsets[(plan.source, c, seed)].items():
            add(_name(plan.source, f"{kind}-c{c}", seed), train_subjects=subjects, **common)


def parameter_count(cfg: GazeTrainConfig) -> int:
    """Trainable parameters of the model a run config builds."""
    model = build_gaze_model(**cfg.model_record()["args"])
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def oracle_config(cfg: AuditConfig, plan: SourcePlan) -> GazeTrainConfig:
    return replace(cfg.base(), model="moegaze", routing="oracle", experts=plan.clusters,
                   source=plan.source, targets=plan.targets)


def matched_width(cfg: AuditConfig, plan: SourcePlan) -> int:
    """The baseline width in [width, wide x width] whose parameters are nearest the oracle's."""
    want = parameter_count(oracle_config(cfg, plan))
    widths = range(cfg.width, cfg.width * cfg.wide + 1)
    return min(widths, key=lambda w: (abs(parameter_count(replace(cfg.base(), width=w)) - want),
                                      w))


def run_audit(cfg: AuditConfig, out: str | Path, *, progress_bar: bool | None = None,
              say=print) -> dict:
    """Run (or resume) every run of the audit; write audit.json and audit.md; the tables.
    With ``size_from`` the plan is printed (``say``) before any run."""
    out = Path(out)
    cfg.validate()
    sized, cfg = size_before(cfg, say)
    cache = SyntheticCache(out / "data")
    plan = audit_plan(cfg, out, cache)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "audit_config.json", asdict(cfg))
    t0 = time.perf_counter()
    results = run_study(plan.specs, workers=cfg.workers, executor=cfg.executor,
                        address=cfg.address, progress_bar=progress_bar,
                        description="gaze audit")
    tables = audit_tables(cfg, plan, results, cache)
    own, lines = own_sizing(cfg, tables)
    if lines:
        tables["markdown"] += "\n#### Sizing\n\n" + "\n".join(
            (plan_lines(sized, cfg.size_from) if sized else []) + lines) + "\n"
    pilots = pilot_dicts(tables.pop("pilot"))
    seconds = time.perf_counter() - t0
    write_json(out / "audit.json", {
        "config": asdict(cfg), "tables": {k: v for k, v in tables.items() if k != "markdown"},
        "plan": sized, "own_sizing": own, "pilot": pilots,
        "runs": {s.name: str(s.out) for s in plan.specs},
        "wall_seconds_this_invocation": seconds,
        "train_cpu_seconds_all_runs": sum(r.get("train_cpu_seconds", 0.0)
                                          for r in results.values()),
    })
    (out / "audit.md").write_text(tables["markdown"])
    tables["seconds"] = seconds
    return tables


# --- tables ---------------------------------------------------------------------------


class _Source:
    """One source's finished runs and its held-out test sets (subject -> cluster)."""

    def __init__(self, cfg: AuditConfig, plan: SourcePlan, results: dict, specs,
                 cache: SyntheticCache):
        self.cfg, self.plan, self.results = cfg, plan, results
        self.specs = {s.name: s for s in specs}
        data = cache.get(plan.source, cfg.train_count, cfg.data_seed, cfg.size)
        _, val = hold_out_subjects(data, cfg.base().val_fraction, cfg.data_seed)
        self.sets = {"val": val} | {t: cache.get(t, cfg.test_count, target_seed(cfg.data_seed),
                                                 cfg.size, max(1, cfg.target_scale))
                                    for t in plan.targets}
        self.cluster = {str(s): int(c) for d in self.sets.values()
                        for s, c in zip(d.labels.subject.tolist(), d.labels.cluster.tolist(),
                                        strict=True)}

    def runs(self, kind: str) -> list[dict]:
        return [self.results[_name(self.plan.source, kind, s)] for s in self.cfg.seeds]

    def per_subject(self, summary: dict, where: Sequence[str], what: str = "model",
                    subjects=None) -> dict:
        """The run's {subject: [error, images]} over test sets ``where`` (optionally only
        ``subjects``); ``what`` "constant" reads the constant predictor's."""
        merged = {}
        for w in where:
            res = summary["val"] if w == "val" else summary["targets"][w]
            merged.update((res["constant"] if what == "constant" else res)["per_subject"])
        return {s: v for s, v in merged.items() if subjects is None or s in subjects}

    def cell(self, kind: str, where: Sequence[str], subjects=None, what: str = "model"):
        runs = self.runs(kind)
        return Cell.from_runs([self.per_subject(r, where, what, subjects) for r in runs],
                              f"{self.plan.source}/{kind}")

    def of_cluster(self, c: int, where: Sequence[str]) -> set[str]:
        held = {s for w in where for s in self._ids(w)}
        return {s for s in held if self.cluster[s] == c}

    def _ids(self, where: str) -> set[str]:
        return {str(s) for s in self.sets[where].labels.subject.tolist()}


#: the premise's words for the verdict of similar - random (lower error is better)
PREMISE_WORDS = {BETTER: "holds", WORSE: "reversed", UNDECIDED: "not shown"}


def _verdict(v: Verdict | None) -> str:
    """The premise's word for a verdict of similar - random, with the verdict's line."""
    if v is None:
        return "-"
    return f"{PREMISE_WORDS.get(v.kind, v.kind)}: {v.line()}"


def premise_word(v: Verdict | None) -> str:
    return "-" if v is None else PREMISE_WORDS.get(v.kind, v.kind)


def _diff(d: dict | None) -> str:
    return fmt_ci(d and d["diff"], d and d["diff_ci"], sign=True)


def premise_rows(src: _Source, boot: Bootstrap) -> tuple[list[dict], list[dict], dict, list]:
    """Per cluster and pooled: similar, random, all-data baseline and their differences;
    the pooled sets' verdicts and the pilot of similar - random."""
    rows = _cluster_premise_rows(src, boot)
    pooled, verdicts, pilots = _pooled_premise_rows(src, boot)
    return rows, pooled, verdicts, pilots


def _cluster_premise_rows(src: _Source, boot: Bootstrap) -> list[dict]:
    """Per audited cluster, on its held-out subjects: similar, random, all-data baseline;
    judged per cluster (paired t over seeds, Holm over the clusters)."""
    plan = src.plan
    every = ["val", *plan.targets]
    rows, estimates = [], {}
    for c in plan.audited:
        subjects = src.of_cluster(c, every)
        if not subjects:
            continue
        key = f"{plan.source}:c{c}"
        sim = src.cell(f"similar-c{c}", every, subjects)
        rnd = src.cell(f"random-c{c}", every, subjects)
        full = src.cell("baseline", every, subjects)
        d, d_full = boot.paired(rnd, sim, key), boot.paired(full, sim, key)
        estimates[c] = estimate(rnd, sim)
        rows.append({"source": plan.source, "cluster": c,
                     "training subjects": plan.train_subjects[c],
                     "held-out subjects": len(subjects),
                     "similar": boot.value(sim, key), "random": boot.value(rnd, key),
                     "all training data": boot.value(full, key),
                     "similar - random": _diff(d), "similar - all data": _diff(d_full)})
    per_cluster = family(estimates)
    for row in rows:
        row["verdict (paired t over seeds, Holm over clusters)"] = _verdict(
            per_cluster[row["cluster"]])
    return rows


def _pooled_cells(src: _Source, pick: dict[int, set[str]], where: Sequence[str]) -> dict:
    """Similar, random and the baseline pooled over the clusters: per seed, each cluster's
    runs on its own subjects of ``pick`` (cluster -> held-out subjects) in sets ``where``."""
    cells = {}
    for kind in ("similar", "random", "baseline"):
        per = []
        for i in range(len(src.cfg.seeds)):
            merged = {}
            for c, subjects in pick.items():
                run = src.runs(kind if kind == "baseline" else f"{kind}-c{c}")[i]
                merged.update(src.per_subject(run, where, subjects=subjects))
            per.append(merged)
        cells[kind] = Cell.from_runs(per, f"{src.plan.source}/{kind}")
    return cells


def _pooled_premise_rows(src: _Source, boot: Bootstrap) -> tuple[list[dict], dict, list]:
    """Pooled over the clusters, per set of held-out subjects (source, targets, all): the
    rows, the verdicts (Holm over the sets) and the pilot of similar - random on all."""
    plan = src.plan
    sets = {"held-out source subjects": ["val"], "target subjects": plan.targets,
            "all held-out subjects": ["val", *plan.targets]}
    pooled, verdicts, pooled_estimates, pilots = [], {}, {}, []
    for label, where in sets.items():
        pick = {c: src.of_cluster(c, where) for c in plan.audited}
        if not any(pick.values()):
            continue
        cells = _pooled_cells(src, pick, where)
        key = f"{plan.source}:pooled:{label}"
        d = boot.paired(cells["random"], cells["similar"], key)
        d_full = boot.paired(cells["baseline"], cells["similar"], key)
        pooled_estimates[label] = estimate(cells["random"], cells["similar"])
        if label == "all held-out subjects":
            p = pilot_of(f"{plan.source} all held-out subjects: similar - random",
                         cells["random"], cells["similar"], fixed_subjects=src._ids("val"),
                         scale=max(1, src.cfg.target_scale))
            pilots += [p] if p else []
        verdicts[label] = {"diff": d["diff"], "diff_ci": d["diff_ci"],
                           "similar": cells["similar"].value, "random": cells["random"].value,
                           "all_training_data": cells["baseline"].value}
        pooled.append({"source": plan.source, "scored on": label,
                       "subjects": len(cells["similar"].subjects),
                       "similar": boot.value(cells["similar"], key),
                       "random": boot.value(cells["random"], key),
                       "all training data": boot.value(cells["baseline"], key),
                       "similar - random": _diff(d), "similar - all data": _diff(d_full)})
    judged = family(pooled_estimates)
    for row in pooled:
        v = judged[row["scored on"]]
        row["verdict (paired t over seeds, Holm over the sets)"] = _verdict(v)
        verdicts[row["scored on"]] |= {"verdict": premise_word(v), "judged": verdict_record(v)}
    return pooled, verdicts, pilots


def cluster_rows(src: _Source, boot: Bootstrap, device) -> list[dict]:
    """The full-data baseline per cluster of the held-out subjects: error and bias."""
    plan = src.plan
    every = ["val", *plan.targets]
    preds = []  # per seed: (gaze, truth, subject, cluster) over every held-out set
    for seed in src.cfg.seeds:
        model = trained_model(src.specs[_name(plan.source, "baseline", seed)].out, device)
        parts = [(predict(model, src.sets[w], device).gaze, src.sets[w].labels) for w in every]
        preds.append(tuple(torch.cat(x) for x in zip(*[
            (g, lab.gaze, lab.subject, lab.cluster) for g, lab in parts], strict=True)))
    rows = []
    for c in range(plan.clusters):
        subjects = src.of_cluster(c, every)
        if not subjects:
            continue
        key = f"{plan.source}:c{c}"
        err = src.cell("baseline", every, subjects)
        bias, corrected = [], []
        for gaze, truth, subject, cluster in preds:
            sel = cluster == c
            bias.append(signed_means(gaze[sel], truth[sel], subject[sel]))
            b = torch.tensor(signed_means(gaze[sel], truth[sel], cluster[sel])[str(c)][:2],
                             dtype=torch.float64)
            fixed = gaze[sel].double() - torch.deg2rad(b)
            corrected.append(float(angular_errors(fixed, truth[sel]).mean()))
        row = {"source": plan.source, "cluster": c,
               "training subjects": plan.train_subjects.get(c, "-"),
               "held-out subjects": len(subjects), "baseline error": boot.value(err, key)}
        values = {"error": err.value}
        for axis, name in ((0, "pitch"), (1, "yaw")):
            cell = Cell.from_runs([{s: [v[axis], v[2]] for s, v in b.items()} for b in bias],
                                  f"{plan.source}/bias")
            ci = cell_summary(cell, boot.draws(cell, key))
            row[f"bias {name}"] = fmt_ci(ci["value"], ci["ci"], sign=True)
            values[f"bias_{name}"] = cell.value
        values["bias_norm"] = float(np.hypot(values["bias_pitch"], values["bias_yaw"]))
        values["error_bias_removed"] = float(np.mean(corrected))
        row["bias size"] = f"{values['bias_norm']:.2f}"
        row["error with the bias removed"] = f"{values['error_bias_removed']:.2f}"
        row["values"] = values
        rows.append(row)
    return rows


def capacity_rows(src: _Source, boot: Bootstrap, references: dict,
                  pilots: list | None = None) -> list[dict]:
    """Baseline 1x, wide, oracle, constant and trained-on-target per test set; the pilot of
    oracle - 1x per test set joins ``pilots``."""
    plan, rows = src.plan, []
    pilots = [] if pilots is None else pilots
    for where in ["val", *plan.targets]:
        key = f"{plan.source}:{where}"
        base, wide = src.cell("baseline", [where]), src.cell("wide", [where])
        oracle = src.cell("oracle", [where]) if plan.clusters else None
        same = {src.cfg.width: base, src.cfg.width * src.cfg.wide: wide}
        matched = (None if not plan.matched_width else same[plan.matched_width]
                   if plan.matched_width in same else src.cell("matched", [where]))
        const = src.cell("baseline", [where], what="constant")
        ref = references.get(where) if where != "val" else None
        d_wide, d_or = boot.paired(base, wide, key), boot.paired(base, oracle, key)
        p = pilot_of(f"{plan.source} on {where}: oracle - 1x", base, oracle,
                     fixed_subjects=src._ids("val"), scale=max(1, src.cfg.target_scale))
        pilots += [p] if p else []
        d_or_wide = boot.paired(wide, oracle, key)
        d_or_matched = boot.paired(matched, oracle, key)
        rows.append({
            "source": plan.source,
            "tested on": "held-out source subjects" if where == "val" else where,
            "constant (source mean)": boot.value(const, key),
            "trained on target": boot.value(ref, key) if ref is not None else "-",
            "baseline 1x": boot.value(base, key),
            f"baseline {src.cfg.wide}x width": boot.value(wide, key),
            "baseline at the oracle's parameters": boot.value(matched, key),
            "oracle MoEGaze": boot.value(oracle, key),
            f"{src.cfg.wide}x - 1x": _diff(d_wide), "oracle - 1x": _diff(d_or),
            "oracle - matched baseline": _diff(d_or_matched),
            f"oracle - {src.cfg.wide}x": _diff(d_or_wide),
        })
    return rows


def audit_tables(cfg: AuditConfig, plan: AuditPlan, results: dict,
                 cache: SyntheticCache) -> dict:
    """The audit's tables as Markdown and the numbers behind them."""
    boot, device = Bootstrap(cfg.n_boot), resolve_device(cfg.device)
    references = {}
    for target in dict.fromkeys(t for p in plan.sources for t in p.targets):
        per = [results[_name(target, "reference", s)]["targets"][target]["per_subject"]
               for s in cfg.reference_seeds]
        if per:
            references[target] = Cell.from_runs(per, f"{target}/reference")
    base = cfg.base()
    params = {"baseline 1x": parameter_count(base),
              f"baseline {cfg.wide}x width": parameter_count(replace(base,
                                                                     width=cfg.width * cfg.wide))}
    clustered = [p for p in plan.sources if p.clusters]
    if clustered:
        p = clustered[0]
        params[f"baseline at width {p.matched_width} (matched)"] = parameter_count(
            replace(base, width=p.matched_width))
        params["oracle MoEGaze"] = parameter_count(oracle_config(cfg, p))
    premise, pooled, clusters, capacity, verdicts, pilots = [], [], [], [], {}, []
    for p in plan.sources:
        src = _Source(cfg, p, results, plan.specs, cache)
        if p.audited:
            rows, prow, verdicts[p.source], more = premise_rows(src, boot)
            premise += rows
            pooled += prow
            pilots += more
        if p.clusters:
            clusters += cluster_rows(src, boot, device)
        capacity += capacity_rows(src, boot, references, pilots)
    world_verdict = _world_verdict(cfg, plan, verdicts)
    md = [_header(cfg, plan), f"\n**Premise verdict, {cfg.world} world: {world_verdict}**\n"]
    if pooled:
        md += ["\n#### Similar vs random training subjects, pooled over the clusters\n",
               markdown_table(pooled)]
    if premise:
        md += ["\n#### Similar vs random, per cluster (scored on all held-out subjects of "
               "the cluster)\n", markdown_table(premise)]
    if clusters:
        md += ["\n#### The full-data baseline per appearance cluster (all held-out subjects; "
               "bias = mean signed error, prediction - truth, degrees)\n",
               markdown_table([{k: v for k, v in r.items() if k != "values"}
                               for r in clusters])]
    shown = [k for k in capacity[0] if any(r[k] != "-" for r in capacity)] if capacity else None
    md += ["\n#### Capacity and sanity rows\n", markdown_table(capacity, shown),
           "\nParameters: " + ", ".join(f"{k} {v:,}" for k, v in params.items()) + ".\n"]
    return {"world": cfg.world, "verdict": world_verdict, "verdicts": verdicts,
            "premise": premise, "premise_pooled": pooled, "clusters": clusters,
            "capacity": capacity, "parameters": params, "pilot": pilots,
            "markdown": "\n".join(md)}


def _world_verdict(cfg: AuditConfig, plan: AuditPlan, verdicts: dict) -> str:
    if not any(p.clusters for p in plan.sources):
        return "not testable: the sources have no appearance clusters"
    if not verdicts:
        return f"not testable: no cluster has {cfg.min_subjects} training subjects"
    parts = [f"{v['all held-out subjects']['verdict']} from {s}"
             for s, v in verdicts.items() if "all held-out subjects" in v]
    return "; ".join(parts)


def _header(cfg: AuditConfig, plan: AuditPlan) -> str:
    refs = seed_text(cfg.reference_seeds) if cfg.reference_seeds else "none"
    return (f"Premise audit of the {cfg.world} world (sources "
            f"{', '.join(p.source for p in plan.sources)}): angular error in degrees, mean "
            f"over {len(cfg.seeds)} seeds ({seed_text(cfg.seeds)}) of the image-weighted mean, "
            "[95% bootstrap interval over seeds and test subjects]; differences paired by "
            f"seed; negative = the first better. {cfg.steps} steps of batch {cfg.batch_size} "
            f"for every run (subset runs included), {cfg.train_count} source images rendered "
            f"per domain, {cfg.test_count} per target, width {cfg.width}; trained-on-target "
            f"seeds {refs}. Premise verdict per source: similar - random pooled over the "
            "clusters on all held-out subjects (the source's held-out subjects and the "
            "targets'): holds (better: the paired t interval over seeds below 0, Holm over the "
            "sets each source is scored on), reversed (worse), not shown (undecided).\n")


def run_command(cfg: AuditConfig, out: str | Path, *, resume: bool = False) -> dict:
    """`genlab gaze audit`. A rerun in the same folder always resumes (``resume`` is
    accepted and changes nothing)."""
    return run_audit(cfg, out)


STUDY = register_study(Study("audit", AuditConfig, run_command, timed_report))
