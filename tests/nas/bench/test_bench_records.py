"""A bench's runs.csv and `--records-from`: the records round-trip, a bench continued from a
copied file runs only the jobs the file lacks and reports the rest as the first bench did,
and a file of another bench, or a malformed one, is refused in one line."""

import json
import shutil

import pytest

from genlab.core.errors import ConfigError, DataError
from genlab.nas.bench import BenchConfig, run_bench
from genlab.nas.bench.records import FIELDS, read_records, write_records
from genlab.nas.bench.report import collapse_markdown
from genlab.nas.search import SearchConfig

A = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|none~2|"


def _bench(table, seeds, **kwargs) -> BenchConfig:
    return BenchConfig(methods=["darts"], seeds=seeds, retrain_epochs=0, random_archs=False,
                       search=SearchConfig(channels=4, cells=1, steps=4, hessian_points=0,
                                           diag_batch=16, nb201_table=str(table)), **kwargs)


def test_records_round_trip(tmp_path):
    records = [{"reg": "darts", "seed": 3, "genotype": A, "param_free_ops": 2, "skip_ops": 1,
                "mean_entropy": 1.6094379124341003, "cifar10": 93.76, "cifar100": None,
                "search_seconds": 0.1 + 0.2, "run": "darts-s3", "search_folder": "x"}]
    write_records(tmp_path / "runs.csv", records)
    back = read_records(tmp_path / "runs.csv")["darts-s3"]
    assert back["mean_entropy"] == records[0]["mean_entropy"]  # floats exactly (repr)
    assert back["search_seconds"] == 0.1 + 0.2 and back["cifar100"] is None
    assert back["seed"] == 3 and back["param_free_ops"] == 2 and back["genotype"] == A
    assert set(back) == set(FIELDS)


def test_a_bench_continued_from_a_copied_file_runs_only_what_it_lacks(tmp_path, nb201_table):
    first = run_bench(_bench(nb201_table, [0, 1]), tmp_path / "first")
    committed = tmp_path / "docs"  # what is committed beside a page: runs.csv, config.json
    committed.mkdir()
    for name in ("runs.csv", "config.json"):
        shutil.copy(tmp_path / "first" / name, committed / name)
    shutil.rmtree(tmp_path / "first")  # the run folder is gone
    cfg = _bench(nb201_table, [0, 1, 2], records_from=str(committed / "runs.csv"))
    again = run_bench(cfg, tmp_path / "again")
    assert sorted(p.name for p in (tmp_path / "again" / "jobs").iterdir()) == ["darts-s2"]
    fields = [f for f in FIELDS if f != "search_seconds"]
    for old, new in zip(first["records"], again["records"][:2], strict=True):
        assert {f: old.get(f) for f in fields} == {f: new.get(f) for f in fields}
    assert again["records"][2]["seed"] == 2
    assert all(r["cpu_seconds"] > 0 for r in first["records"])  # each job measured whole
    assert again["records"][2]["cpu_seconds"] > 0
    text = (tmp_path / "again" / "bench.md").read_text()
    # the compute line counts the job run here; the two read from the file apart
    assert [bool(r.get("from_records")) for r in again["records"]] == [True, True, False]
    here = again["records"][2]["cpu_seconds"] / 3600
    read = sum(r["cpu_seconds"] for r in first["records"]) / 3600
    assert f"Compute: {here:.2f} CPU-hours over the 1 of 1 jobs run here measured whole" in text
    assert (f"Not counted above: the 2 jobs read from --records-from took {read:.2f} "
            "CPU-hours where they ran (2 measured whole).") in text
    assert len(read_records(tmp_path / "again" / "runs.csv")) == 3
    # reported again from the file alone: nothing runs, the same figures
    report = run_bench(_bench(nb201_table, [0, 1], records_from=str(committed / "runs.csv")),
                       tmp_path / "report")
    assert not any((tmp_path / "report" / "jobs").glob("*"))
    assert report["per_reg"] == first["per_reg"]
    assert ("Compute: none of the jobs ran here; the 2 jobs read from --records-from took "
            f"{read:.2f} CPU-hours") in (tmp_path / "report" / "bench.md").read_text()


def test_finished_jobs_are_kept_as_they_finish_and_a_partial_file_is_reported(
        tmp_path, nb201_table):
    from genlab.core.sweep import RunOutcome
    from genlab.nas.bench.run import keep_record

    # the sweep's callback: one line per finished job, once, none for a failed one
    path = tmp_path / "runs.csv"
    keep = keep_record(path, [("darts", 0), ("darts", 1)])
    summary = {"genotype": A, "param_free_ops": 2, "skip_ops": 1, "cifar10": 93.76}
    keep(RunOutcome("darts-s0", "x", "finished", summary=summary))
    keep(RunOutcome("darts-s0", "x", "skipped", summary=summary))  # read back on a resume
    keep(RunOutcome("darts-s1", "x", "failed", error="boom"))
    assert len(path.read_text().splitlines()) == 2 and list(read_records(path)) == ["darts-s0"]
    keep_record(path, [("darts", 0)])(RunOutcome("darts-s0", "x", "skipped", summary=summary))
    assert len(path.read_text().splitlines()) == 2  # a resumed bench does not write it again
    # a bench still under way, reported from its file: nothing runs, seed 1 is left out
    first = run_bench(_bench(nb201_table, [0]), tmp_path / "first")
    cfg = _bench(nb201_table, [0, 1], records_from=str(tmp_path / "first" / "runs.csv"),
                 records_only=True)
    report = run_bench(cfg, tmp_path / "report")
    assert not any((tmp_path / "report" / "jobs").glob("*"))
    assert report["per_reg"] == first["per_reg"] and len(report["records"]) == 1
    cfg = _bench(nb201_table, [5], records_from=str(tmp_path / "first" / "runs.csv"),
                 records_only=True)
    with pytest.raises(ConfigError, match="holds some of the bench's rows and seeds"):
        run_bench(cfg, tmp_path / "none")


def test_records_of_another_bench_or_malformed_are_refused(tmp_path, nb201_table):
    folder = tmp_path / "docs"
    folder.mkdir()
    write_records(folder / "runs.csv", [{"reg": "darts", "seed": 0, "genotype": A,
                                          "param_free_ops": 1, "skip_ops": 1}])
    with pytest.raises(DataError, match="no config.json beside it"):
        run_bench(_bench(nb201_table, [0], records_from=str(folder / "runs.csv")),
                  tmp_path / "a")
    config = {"search": {**_bench(nb201_table, [0]).search.__dict__, "channels": 8},
              "retrain_epochs": 0}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="search.channels 8 there, 4 here") as caught:
        run_bench(_bench(nb201_table, [0], records_from=str(folder / "runs.csv")),
                  tmp_path / "b")
    assert "\n" not in str(caught.value)
    config["search"]["channels"] = 4
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "runs.csv").write_text(",".join(FIELDS) + "\ndarts,zero," + A + ",1\n")
    with pytest.raises(DataError, match="line 2"):
        run_bench(_bench(nb201_table, [0], records_from=str(folder / "runs.csv")),
                  tmp_path / "c")
    with pytest.raises(ConfigError, match="give one of them"):
        run_bench(_bench(nb201_table, [0], records_from=str(folder / "runs.csv"), tune=True),
                  tmp_path / "e")
    write_records(folder / "runs.csv", [{"reg": "darts", "seed": 0, "genotype": A}])
    config["settings_from"] = "runs/tuned"  # the rows ran at a tuned bench's settings there
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="settings_from 'runs/tuned' there, None here"):
        run_bench(_bench(nb201_table, [0], records_from=str(folder / "runs.csv")),
                  tmp_path / "f")
    with pytest.raises(DataError, match="no such records file"):
        run_bench(_bench(nb201_table, [0], records_from=str(folder / "nothing.csv")),
                  tmp_path / "d")
    assert not any((tmp_path / name).exists() for name in "abcdef")  # refused before a folder


def test_an_earlier_benchs_file_without_the_newer_columns_is_read(tmp_path):
    # written before cpu_seconds was kept: the column is absent, the figure None
    older = [f for f in FIELDS if f != "cpu_seconds"]
    (tmp_path / "runs.csv").write_text(",".join(older) + "\n" + ",".join(
        {"reg": "darts", "seed": "0", "genotype": A, "param_free_ops": "1"}.get(f, "")
        for f in older) + "\n")
    back = read_records(tmp_path / "runs.csv")["darts-s0"]
    assert back["cpu_seconds"] is None and back["param_free_ops"] == 1
    # a resumed bench of that time brings the file to today's layout before appending
    from genlab.core.sweep import RunOutcome
    from genlab.nas.bench.run import keep_record

    keep = keep_record(tmp_path / "runs.csv", [("darts", 0), ("darts", 1)])
    keep(RunOutcome("darts-s1", "x", "finished", summary={"genotype": A, "cpu_seconds": 2.5}))
    assert (tmp_path / "runs.csv").read_text().split("\n")[0] == ",".join(FIELDS)
    both = read_records(tmp_path / "runs.csv")
    assert both["darts-s0"]["param_free_ops"] == 1 and both["darts-s1"]["cpu_seconds"] == 2.5
    (tmp_path / "runs.csv").write_text("reg,seed,genotype,colour\ndarts,0,x,red\n")
    with pytest.raises(DataError, match="not a bench's runs.csv"):
        read_records(tmp_path / "runs.csv")


def test_collapse_line_counts_seeds_by_hand():
    records = [{"reg": "darts", "param_free_ops": p} for p in (6, 4, 3, 5, 2)] + [
        {"reg": "drnas", "param_free_ops": p} for p in (0, 1, 4)]
    line = collapse_markdown(records)
    assert "darts 3 of 5, drnas 1 of 3" in line
