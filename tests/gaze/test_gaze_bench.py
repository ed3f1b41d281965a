"""The synthetic bench: its plan, its tables on hand-made summaries, and a tiny real run."""

import json
from dataclasses import replace

import pytest

from genlab.core.errors import ConfigError
from genlab.gaze.studies.bench import BenchConfig, bench_specs, run_bench
from genlab.gaze.studies.tables import bench_tables


def test_bench_plan(tmp_path):
    specs = bench_specs(BenchConfig(), tmp_path)
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    kinds = {}
    for s in specs:
        world, _, kind, _, _ = s.name.split("__")
        kinds[(world, kind)] = kinds.get((world, kind), 0) + 1
    # 5 seeds x 2 sources x 2 fractions; oracle per source and seed; 3 seeds x 2 targets
    assert kinds[("realistic", "baseline")] == kinds[("appearance", "moegaze")] == 20
    assert kinds[("appearance", "oracle")] == 10 and ("realistic", "oracle") not in kinds
    assert all(kinds[("anatomy", k)] == kinds[("appearance", k)] for k in
               ("baseline", "moegaze", "oracle", "reference"))  # the same plan, other clusters
    assert kinds[("control", "baseline")] == 5  # one source, 100% only
    assert kinds[("realistic", "reference")] == kinds[("control", "reference")] == 6
    assert len(specs) == 118 + 56  # the anatomy world: the appearance world's 56 runs
    e = next(s for s in specs if s.name == "realistic__broad-e__moegaze__f0.1__s3")
    assert e.config.targets == ["narrow-m", "narrow-d"] and e.config.fraction == 0.1
    assert e.config.steps == 300 and e.out == tmp_path / "runs" / e.name
    oracle = next(s for s in specs if "oracle" in s.name)
    assert oracle.config.routing == "oracle" and oracle.config.experts == 4
    ref = next(s for s in specs if "reference" in s.name)
    assert ref.config.targets == [ref.config.source] and ref.config.model == "baseline"


def test_bench_grouping_reaches_moegaze_runs_only(tmp_path):
    specs = bench_specs(BenchConfig(grouping="crossfit", router_input="encoder",
                                    shared_expert=True, worlds=["appearance"], seeds=[0]),
                        tmp_path)
    for s in specs:
        kind = s.name.split("__")[2]
        want = (("crossfit", "encoder", True) if kind == "moegaze"
                else ("none", "style", False))
        assert (s.config.grouping, s.config.router_input, s.config.shared_expert) == want, \
            s.name
    with pytest.raises(ConfigError, match="grouping"):
        bench_specs(BenchConfig(grouping="kmeans"), tmp_path)


def _fake_summary(err: float, subjects=("1", "2"), targets=("app-m", "app-d")) -> dict:
    per = {s: [err + 0.5 * k, 10] for k, s in enumerate(subjects)}
    res = {"per_subject": per, "per_cluster": {"0": [err, 10], "3": [err + 1, 10]},
           "router": {"mean_max_weight": 0.5, "top1_share": [0.5, 0.5]},
           "constant": {"per_subject": {s: [20.0, 10] for s in subjects}}}
    return {"val": res, "targets": {t: res for t in targets}, "train_cpu_seconds": 1.0}


def test_bench_tables_hand_values(tmp_path):
    cfg = BenchConfig(worlds=["appearance"], seeds=2, reference_seeds=1, n_boot=200)
    specs = bench_specs(cfg, tmp_path)
    err = {"baseline": 10.0, "moegaze": 8.0, "oracle": 7.0, "reference": 5.0}
    results = {}
    for s in specs:
        kind = s.name.split("__")[2]
        e = err[kind] + (1.0 if s.config.fraction < 1 else 0.0) + s.config.seed
        targets = s.config.targets
        results[s.name] = _fake_summary(e, targets=targets)
    t = bench_tables(specs, results, cfg)
    main = t["worlds"]["appearance world"]["main"][0]
    # baseline: seeds 0, 1 -> 10, 11 plus subject offsets 0, 0.5 -> mean 10.75
    assert main["baseline"] == pytest.approx(10.75) and main["moegaze"] == pytest.approx(8.75)
    assert main["constant"] == 20.0 and main["reference"] == pytest.approx(5.25)
    assert main["paired"]["diff"] == pytest.approx(-2.0)
    assert main["paired"]["diff_ci"] == (pytest.approx(-2.0), pytest.approx(-2.0))
    assert main["paired_10_vs_100"]["diff"] == pytest.approx(-1.0)  # 9.75 vs 10.75
    src = t["worlds"]["appearance world"]["source"][0]
    assert src["paired_oracle"]["diff"] == pytest.approx(-3.0)
    assert src["baseline_over_constant"] == pytest.approx(10.75 / 20)
    # the constant predictor per seed (20 deg on every subject), for the results file
    assert src["seeds"]["constant"] == {"0": 20.0, "1": 20.0}
    assert src["seeds"]["baseline"] == {"0": pytest.approx(10.25), "1": pytest.approx(11.25)}
    avg = t["worlds"]["appearance world"]["average_reduction"]
    assert avg["rel_pct"] == pytest.approx(100 * 2 / 10.75) and avg["tasks"] == 4
    assert "-2.00 [-2.00, -2.00]" in t["markdown"] and "oracle - baseline (gate)" in t["markdown"]
    json.dumps(t["worlds"])  # the numbers behind the tables are plain JSON


def test_bench_small_subjects_reading_hand_values(tmp_path):
    cfg = BenchConfig(worlds=["appearance", "control"], seeds=2, reference_seeds=1, n_boot=200,
                      small_subjects=True)
    specs = bench_specs(cfg, tmp_path)
    people = [s for s in specs if s.name.split("__")[3] == "p0.1"]
    # both models, both sources, both seeds; not in the control world (100% only there)
    assert len(people) == 8 and all(s.name.startswith("appearance__") for s in people)
    assert all(s.config.subject_fraction == 0.1 and s.config.fraction == 1.0 for s in people)
    assert len(specs) == len(bench_specs(replace(cfg, small_subjects=False), tmp_path)) + 8
    err = {"baseline": 10.0, "moegaze": 8.0, "oracle": 7.0, "reference": 5.0}
    results = {}
    for s in specs:
        kind = s.name.split("__")[2]
        e = (err[kind] + (1.0 if s.config.fraction < 1 else 0.0)
             + (3.0 if s.config.subject_fraction < 1 else 0.0) + s.config.seed)
        results[s.name] = _fake_summary(e, targets=s.config.targets)
    t = bench_tables(specs, results, cfg)
    main = t["worlds"]["appearance world"]["main"][0]
    assert main["baseline"] == pytest.approx(10.75)  # the subject runs are not mixed in
    assert main["paired_10_vs_100"]["diff"] == pytest.approx(-1.0)
    assert main["moegaze10_subjects"] == pytest.approx(11.75)  # 8 + 3, seeds and subjects
    assert main["paired_10_subjects_vs_100"]["diff"] == pytest.approx(1.0)  # 11.75 - 10.75
    assert "MoEGaze 10% subjects - baseline 100%" in t["markdown"]
    assert t["worlds"]["control world"]["main"][0]["paired_10_subjects_vs_100"] is None


def test_tiny_bench_runs_and_resumes(tmp_path):
    cfg = replace(BenchConfig.quick(), worlds=["control"], seeds=1, reference_seeds=1,
                  steps=2, train_count=60, test_count=20, size=[16, 24], width=4, n_boot=50)
    out = run_bench(cfg, tmp_path / "b", progress_bar=False)
    assert (tmp_path / "b" / "bench.md").read_text() == out["markdown"]
    assert (tmp_path / "b" / "bench_main.png").is_file()
    recorded = json.loads((tmp_path / "b" / "bench_config.json").read_text())
    assert recorded["seeds"] == [0] and recorded["reference_seeds"] == [0]  # lists
    assert "| label-shift |" in out["markdown"] and "| capture-shift |" in out["markdown"]
    runs = sorted(p.name for p in (tmp_path / "b" / "runs").iterdir())
    assert runs == ["control__ctrl-capture__reference__f1__s0",
                    "control__ctrl-label__reference__f1__s0",
                    "control__ctrl-s__baseline__f1__s0", "control__ctrl-s__moegaze__f1__s0"]
    again = run_bench(cfg, tmp_path / "b", progress_bar=False)  # everything finished: read back
    assert again["markdown"] == out["markdown"] and again["seconds"] < out["seconds"]


def _gated_results(specs, oracle_shift):
    """Hand-made summaries: baseline 10 + seed, MoEGaze 9 + seed, oracle 10 + seed +
    oracle_shift[seed] on the held-out source subjects, reference 5 (target) or 9.5."""
    results = {}
    for s in specs:
        kind, seed = s.name.split("__")[2], s.config.seed
        e = {"baseline": 10.0, "moegaze": 9.0, "reference": 5.0}.get(kind, 10.0) + seed
        if kind == "oracle":
            e += oracle_shift[seed]
        results[s.name] = _fake_summary(e, targets=s.config.targets)
    return results


def test_learned_router_is_judged_only_where_the_oracle_gate_clears_zero(tmp_path):
    cfg = BenchConfig(worlds=["appearance"], seeds=3, reference_seeds=1, n_boot=100)
    specs = bench_specs(cfg, tmp_path)
    # oracle - baseline per seed: -1, +1, -0.5: a paired t interval that holds 0
    t = bench_tables(specs, _gated_results(specs, [-1.0, 1.0, -0.5]), cfg)
    world = t["worlds"]["appearance world"]
    assert world["source"][0]["gate"]["kind"] == "undecided"
    assert world["source"][0]["gate"]["low"] < 0 < world["source"][0]["gate"]["high"]
    for row in world["main"]:
        assert row["verdict"]["kind"] == "not testable"
        assert row["verdict"]["reason"].startswith("the oracle gate does not clear 0 in this "
                                                   "world")
    assert "not testable: the oracle gate does not clear 0" in t["markdown"]
    # -1.0, -1.2, -0.8: mean -1, sd 0.2; Holm over the two sources' gates: the first at
    # level 1 - 0.05/2, -1 +- t_{0.9875, 2} 0.2 / sqrt(3) = -1 +- 6.205347 * 0.11547, below 0
    t = bench_tables(specs, _gated_results(specs, [-1.0, -1.2, -0.8]), cfg)
    world = t["worlds"]["appearance world"]
    gate = world["source"][0]["gate"]
    assert gate["kind"] == "better" and gate["effect"] == pytest.approx(-1.0)
    assert gate["high"] == pytest.approx(-1.0 + 6.205347 * 0.2 / 3 ** 0.5, abs=1e-5)
    assert all(row["verdict"]["kind"] == "better" for row in world["main"])  # -1 every seed
    assert all("Holm 4" in row["verdict"]["test"] for row in world["main"])


def test_room_beside_the_claim_by_hand(tmp_path):
    cfg = BenchConfig(worlds=["appearance"], seeds=2, reference_seeds=1, n_boot=100)
    specs = bench_specs(cfg, tmp_path)
    results = _gated_results(specs, [-1.0, -1.0])
    t = bench_tables(specs, results, cfg)
    main = t["worlds"]["appearance world"]["main"][0]
    # baseline 10.75 (seeds 10, 11; subjects +0, +0.5), trained on target 5.25 (seed 0)
    assert main["room_pct"] == pytest.approx(100 * (10.75 - 5.25) / 10.75)  # 51.2 %
    for s in specs:  # trained on target 10.5 (subjects 10.25, 10.75): room 2.3 % < 27.6 %
        if "reference" in s.name:
            results[s.name] = _fake_summary(10.25, targets=s.config.targets)
    t = bench_tables(specs, results, cfg)
    world = t["worlds"]["appearance world"]
    assert world["main"][0]["room_pct"] == pytest.approx(100 * 0.25 / 10.75)
    assert world["average_reduction"]["claim"] == ("not testable in this world (room 2.3% at "
                                                   "most, below 27.6%)")
    assert "2.3 (not testable in this world)" in t["markdown"]


def test_tiny_bench_prints_its_plan_before_the_runs(tmp_path):
    pilot = {"control label-shift: MoEGaze - baseline": {
        "seeds": 3, "fixed": 0, "scaled": 6, "scale": 1, "sd_seed": 0.05, "sd_subject": 0.6}}
    (tmp_path / "pilot.json").write_text(json.dumps({"pilot": pilot}))
    cfg = replace(BenchConfig.quick(), worlds=["control"], seeds=[0, 1], reference_seeds=[0],
                  steps=2, train_count=60, test_count=20, size=[16, 24], width=4, n_boot=20,
                  size_from=str(tmp_path / "pilot.json"))
    said = []
    out = run_bench(cfg, tmp_path / "b", progress_bar=False, say=said.append)
    # by hand: sd(k) = sqrt(0.05^2 + 0.36 / (6k)); the seeds stop falling at the k printed
    assert said[0].startswith("Sizing from") and said[-2].startswith("Plan: --target-scale")
    k = int(said[-2].split()[2])
    recorded = json.loads((tmp_path / "b" / "bench.json").read_text())
    assert recorded["config"]["target_scale"] == k > 1 and recorded["plan"]["seeds_run"] == 2
    assert recorded["plan"]["rows"][0]["subjects_planned"] == 6 * k
    assert "Sizing from" in out["markdown"]
    run = json.loads((tmp_path / "b" / "runs" / "control__ctrl-s__baseline__f1__s0"
                      / "config.json").read_text())
    assert run["target_scale"] == k
    if said[-1].startswith("results file"):  # a git checkout: the results file's format
        from genlab.core.results.files import load_result
        result = load_result(tmp_path / "b" / "results.json")
        assert result.command.startswith("genlab gaze bench --out")
        assert "--size-from" in result.command and set(result.values["target_error"])
