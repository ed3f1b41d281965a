"""`genlab nas bench`: aggregation by hand values, and a tiny end-to-end bench that resumes."""

import json

import pytest

from genlab.core.errors import DataError
from genlab.nas.bench import DEFAULT_REGS, BenchConfig, run_bench
from genlab.nas.bench.report import aggregate, cell_agreement
from genlab.nas.search import SearchConfig
from genlab.nas.spaces import get_space
from genlab.nas.spaces.nb201.table import NB201Table

A = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|none~2|"
B = "|nor_conv_3x3~0|+|nor_conv_1x1~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|none~2|"
C = "|none~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|none~0|none~1|none~2|"


def test_cell_agreement_hand_values():
    assert cell_agreement([A, A]) == 1.0
    assert cell_agreement([A, B]) == pytest.approx(5 / 6)
    # pairs (A,B) 5/6, (A,C) 1/6 (edge 3<-2), (B,C) 2/6 (edges 2<-0 and 3<-2)
    assert cell_agreement([A, B, C]) == pytest.approx((5 / 6 + 1 / 6 + 2 / 6) / 3)
    assert cell_agreement([A]) is None


def test_aggregate_mean_and_sample_std():
    recs = [{"reg": "ber", "genotype": A, "cifar10": 93.0, "param_free_ops": 1},
            {"reg": "ber", "genotype": A, "cifar10": 95.0, "param_free_ops": 3}]
    agg = aggregate(recs, ["ber"])["ber"]
    assert agg["cifar10_mean"] == 94.0 and agg["cifar10_std"] == pytest.approx(2 ** 0.5)
    assert agg["param_free_ops_mean"] == 2 and agg["agreement"] == 1.0 and agg["runs"] == 2


def test_tiny_bench_end_to_end_and_resume(tmp_path, nb201_table):
    cfg = BenchConfig(regs=["none", "ber"], seeds=[0, 1],
                      search=SearchConfig(channels=4, cells=1, steps=11, hessian_points=1,
                                          diag_batch=32, nb201_table=str(nb201_table)),
                      retrain_epochs=1, retrain_channels=4, random_archs=False,
                      versus="ber")
    result = run_bench(cfg, tmp_path / "b")
    bench = json.loads((tmp_path / "b" / "bench.json").read_text())
    assert len(bench["records"]) == 4 and set(bench["per_reg"]) == {"none", "ber"}
    for r in bench["records"]:
        assert {"genotype", "param_free_ops", "mean_entropy", "hessian_eig", "search_seconds",
                "cifar10", "cifar100", "imagenet16", "test_acc", "params"} <= set(r)
    assert "| reg |" in (tmp_path / "b" / "bench.md").read_text()
    assert (tmp_path / "b" / "bench.png").stat().st_size > 1000
    again = run_bench(cfg, tmp_path / "b", resume=True)  # every sub-run is reused
    assert again["records"] == result["records"]
    # random cells: the table's exact distribution, against a direct count over its cells
    accs = [row["cifar10"] for row in NB201Table.load(nb201_table).rows.values()]
    chance = bench["random_cells"]
    assert chance["cells"] == len(accs) and abs(chance["mean"] - sum(accs) / len(accs)) < 1e-9
    for row, share in chance["at_least_row"].items():
        mean = bench["per_reg"][row]["cifar10_mean"]
        assert share == pytest.approx(sum(a >= mean for a in accs) / len(accs), abs=1e-12)
    assert "A random cell of the space (the table's exact distribution" in \
        (tmp_path / "b" / "bench.md").read_text()
    assert [r["row"] for r in bench["versus"]["rows"]] == ["ber - none", "ber - none"]
    assert "### ber minus every other row, paired by seed" in \
        (tmp_path / "b" / "bench.md").read_text()
    assert bench["versus"]["primary"]["row"] == "ber - none (best rival)"
    # the results file carries the primary comparison for the claims: the rival's name and
    # the interval, whose effect is the mean per-seed difference of the records
    figures = json.loads((tmp_path / "b" / "results.json").read_text())["figures"]
    c10 = {(r["reg"], r["seed"]): r["cifar10"] for r in bench["records"]}
    assert figures["versus_best_rival"] == "none"
    assert figures["versus_primary"]["effect"] == pytest.approx(
        sum(c10["ber", s] - c10["none", s] for s in (0, 1)) / 2)
    assert figures["versus_primary"]["n"] == 2
    met = figures["versus_primary"]["low"] > -0.3
    assert figures["versus_goal"] == f"low > -0.3: {'met' if met else 'missed'}"
    assert "### The primary comparison: ber minus its best rival" in \
        (tmp_path / "b" / "bench.md").read_text()


def test_space_bench_with_sanity_rows(tmp_path):
    cfg = BenchConfig(regs=["none"], seeds=[0, 1],
                      search=SearchConfig(space="s3", channels=2, cells=3, steps=2,
                                          batch_size=16, hessian_points=0, diag_batch=8),
                      retrain_epochs=1, retrain_channels=2, retrain_cells=3, random_archs=True)
    result = run_bench(cfg, tmp_path / "b")
    assert result["space"] == "s3" and set(result["per_reg"]) == {"none", "random"}
    runs = {r["run"]: r for r in result["records"]}
    assert set(runs) == {"none-s0", "none-s1", "random-s0", "random-s1"}
    space = get_space("s3")
    for r in runs.values():
        g = space.parse(r["genotype"])
        assert space.op_counts(g) == {"param_free_ops": r["param_free_ops"],
                                      "skip_ops": r["skip_ops"]}
        assert "cifar10" not in r and "test_acc" in r
    assert runs["random-s0"]["genotype"] != runs["random-s1"]["genotype"]
    assert 5 < result["constant_test_acc"] < 15  # digits: 10 balanced classes
    md = (tmp_path / "b" / "bench.md").read_text()
    assert "constant (majority class)" in md and "| C10 |" not in md and "skip ops" in md
    for r in runs.values():  # S3's reference network: DARTS' CIFAR-10 network of the cell
        assert r == {**r, **space.reference_size(r["genotype"])}
    assert "| params M | MACs M |" in md
    if (tmp_path / "b" / "results.json").exists():  # a git checkout: the results file
        from genlab.core.results.files import load_result
        written = load_result(tmp_path / "b" / "results.json")
        assert written.command.startswith("genlab nas bench --out ")
        assert "--space s3" in written.command and "--seeds 0-1" in written.command
        assert written.seeds("skip", "random") == {
            str(r["seed"]): r["skip_ops"] for r in runs.values() if r["reg"] == "random"}
        assert set(written.values) == {"p-free", "skip", "entropy", "params", "macs", "test"}


def test_an_alias_reuses_the_search_it_names_and_forces_are_tabled(tmp_path, monkeypatch):
    import genlab.nas.regularizers as regs

    # `ber` names exactly ber-kl's defaults here: one search serves both rows
    monkeypatch.setattr(regs, "BER_DEFAULT", {"name": "ber-kl", **regs.PRESETS["ber-kl"]})
    cfg = BenchConfig(regs=["ber-kl", "ber", "beta"], seeds=[0],
                      search=SearchConfig(channels=2, cells=1, steps=11, hessian_points=0,
                                          diag_batch=16),
                      retrain_epochs=0, random_archs=False)
    result = run_bench(cfg, tmp_path / "b")
    assert sorted(p.name for p in (tmp_path / "b" / "search").iterdir()) == ["ber-kl-s0",
                                                                              "beta-s0"]
    rec = {r["reg"]: r for r in result["records"]}
    assert rec["ber"]["search_folder"] == "ber-kl-s0"
    assert rec["ber"]["genotype"] == rec["ber-kl"]["genotype"]
    metrics = [json.loads(ln) for ln in
               (tmp_path / "b" / "search" / "beta-s0" / "metrics.jsonl").read_text().splitlines()]
    assert rec["beta"]["force_ratio"] == pytest.approx(metrics[-1]["force_ratio"])  # one step
    assert "force ratio" in (tmp_path / "b" / "bench.md").read_text()


def test_a_failed_bench_job_is_reported_after_the_others(tmp_path, monkeypatch):
    import genlab.nas.bench.jobs as bench_mod  # where a job calls run_search
    from genlab.core.errors import DataError

    real = bench_mod.run_search

    def failing(cfg, out, **kw):
        if cfg.seed == 0:
            raise RuntimeError("search crashed")
        return real(cfg, out, **kw)

    monkeypatch.setattr(bench_mod, "run_search", failing)
    cfg = BenchConfig(regs=["none"], seeds=[0, 1],
                      search=SearchConfig(channels=2, cells=1, steps=2, batch_size=16,
                                          hessian_points=0, diag_batch=8),
                      retrain_epochs=0, random_archs=False)
    with pytest.raises(DataError, match=r"1 of 2 bench jobs failed.*none-s0: RuntimeError"):
        run_bench(cfg, tmp_path / "b", executor="inline")
    assert (tmp_path / "b" / "jobs" / "none-s1" / "summary.json").exists()
    assert (tmp_path / "b" / "jobs" / "none-s0" / "error.txt").exists()
    monkeypatch.setattr(bench_mod, "run_search", real)
    result = run_bench(cfg, tmp_path / "b", resume=True)  # the failed job runs again
    assert [r["run"] for r in result["records"]] == ["none-s0", "none-s1"]


def test_random_rows_are_judged_by_the_table(tmp_path, nb201_table):
    from genlab.nas.bench import RANDOM, BenchJob, run_job
    from genlab.nas.spaces.nb201.table import NB201Table

    cfg = BenchConfig(regs=["none"], seeds=[3], retrain_epochs=0,
                      search=SearchConfig(nb201_table=str(nb201_table)))
    rec = run_job(BenchJob(RANDOM, 3, cfg, str(tmp_path)), tmp_path / "job")
    truth = NB201Table.load(nb201_table).lookup(rec["genotype"])
    assert {k: rec[k] for k in truth} == truth


def test_the_cli_and_the_config_default_to_the_same_rows(capsys):
    from nas_reference import run_cli

    code, out, err = run_cli(["nas", "bench", "--print-config"], capsys)
    assert code == 0, err
    printed = json.loads(out)
    assert tuple(printed["regs"]) == DEFAULT_REGS == tuple(BenchConfig().regs)
    assert printed["random_archs"] and BenchConfig().random_archs  # sanity rows on by default


def test_a_finished_run_with_other_options_is_not_reused(tmp_path, monkeypatch):
    import shutil

    import genlab.nas.regularizers as regs

    cfg = BenchConfig(regs=["ber"], seeds=[0], random_archs=False, retrain_epochs=0,
                      search=SearchConfig(channels=2, cells=1, steps=2, batch_size=16,
                                          hessian_points=0, diag_batch=8))
    run_bench(cfg, tmp_path / "b")
    stored = json.loads((tmp_path / "b" / "search" / "ber-s0" / "config.json").read_text())
    assert stored["reg_resolved"]["name"] == regs.BER_DEFAULT["name"]
    # a new bench folder holding the finished sub-runs reuses them as they are ...
    shutil.copytree(tmp_path / "b" / "search", tmp_path / "b2" / "search")
    assert run_bench(cfg, tmp_path / "b2")["records"][0]["genotype"] == \
        json.loads((tmp_path / "b" / "bench.json").read_text())["records"][0]["genotype"]
    # ... but once `ber` names another setting, the finished `ber` search is not reported
    monkeypatch.setattr(regs, "BER_DEFAULT", {"name": "ber-kl", "strength": 9.0,
                                              "schedule": "up"})
    shutil.copytree(tmp_path / "b" / "search", tmp_path / "b3" / "search")
    with pytest.raises(DataError, match=r"ber-s0.*other options \(reg_resolved"):
        run_bench(cfg, tmp_path / "b3")


def test_searches_made_without_the_table_are_reused_and_judged_by_it(tmp_path, nb201_table):
    import shutil

    from genlab.nas.spaces.nb201.table import NB201Table

    search = dict(channels=2, cells=1, steps=2, batch_size=16, hessian_points=0, diag_batch=8)
    bare = BenchConfig(regs=["none"], seeds=[0], random_archs=False, retrain_epochs=0,
                       search=SearchConfig(**search))
    run_bench(bare, tmp_path / "b")
    shutil.copytree(tmp_path / "b" / "search", tmp_path / "b2" / "search")
    before = (tmp_path / "b2" / "search" / "none-s0" / "summary.json").read_text()
    judged = BenchConfig(regs=["none"], seeds=[0], random_archs=False, retrain_epochs=0,
                         search=SearchConfig(**search, nb201_table=str(nb201_table)))
    rec = run_bench(judged, tmp_path / "b2")["records"][0]
    # the finished search is read back, not run again, and its cell is judged by the table
    assert (tmp_path / "b2" / "search" / "none-s0" / "summary.json").read_text() == before
    truth = NB201Table.load(nb201_table).lookup(rec["genotype"])
    assert {k: rec[k] for k in truth} == truth


def test_a_bench_started_before_an_option_existed_resumes(tmp_path):
    # a bench and its jobs whose config.json lack an option added since (checkpoint_cells):
    # resumed, every job is read back as it finished
    cfg = BenchConfig(regs=["none"], seeds=[0], random_archs=False, retrain_epochs=0,
                      search=SearchConfig(channels=2, cells=1, steps=2, batch_size=16,
                                          hessian_points=0, diag_batch=8))
    first = run_bench(cfg, tmp_path / "b")
    configs = [tmp_path / "b" / "config.json", tmp_path / "b" / "jobs" / "none-s0" / "config.json"]
    for path in configs:
        data = json.loads(path.read_text())
        search = data["search"] if "search" in data else data["bench"]["search"]
        del search["checkpoint_cells"]
        path.write_text(json.dumps(data))
    assert run_bench(cfg, tmp_path / "b", resume=True)["records"] == first["records"]
    changed = BenchConfig(regs=["none"], seeds=[0], random_archs=False, retrain_epochs=0,
                          search=SearchConfig(channels=2, cells=1, steps=3, batch_size=16,
                                              hessian_points=0, diag_batch=8))
    with pytest.raises(Exception, match=r"search\.steps: 2 -> 3"):
        run_bench(changed, tmp_path / "b", resume=True)


def test_a_moved_bench_folder_resumes_without_rerunning(tmp_path, monkeypatch):
    # a bench folder copied elsewhere (to continue it with more rows) reads its finished jobs
    # back: where the bench lives is not part of a job's identity
    import shutil

    import genlab.nas.bench.jobs as jobs

    cfg = BenchConfig(regs=["none"], seeds=[0], random_archs=False, retrain_epochs=0,
                      search=SearchConfig(channels=2, cells=1, steps=2, batch_size=16,
                                          hessian_points=0, diag_batch=8))
    first = run_bench(cfg, tmp_path / "b")
    shutil.copytree(tmp_path / "b", tmp_path / "moved")
    monkeypatch.setattr(jobs, "run_search", lambda *a, **k: pytest.fail("the search reran"))
    assert run_bench(cfg, tmp_path / "moved", resume=True)["records"] == first["records"]
