"""The sweep runner: process pool, inline and Ray executors; skip, resume, failures, deaths."""

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest

from genlab.core import sweep as sweep_module
from genlab.core.errors import ConfigError
from genlab.core.runs import RunDir
from genlab.core.sweep import RunSpec, run_sweep

ARCH = "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|avg_pool_3x3~0|none~1|nor_conv_3x3~2|"


def toy_run(config: dict, out, *, resume: bool, progress_bar=None) -> dict:
    """A run function of the standard shape; config asks it to fail or to die."""
    run = RunDir(out, config, resume=resume)
    run.log({"step": 0, "x": config["x"]})
    if config.get("fail"):
        raise ValueError(f"bad x {config['x']}\nsecond line")
    if config.get("die"):
        os.kill(os.getpid(), signal.SIGKILL)
    summary = {"x2": config["x"] ** 2, "resumed": resume, "pid": os.getpid()}
    run.write_summary(summary)
    return summary


def _toy_specs(root: Path, xs, flags=None) -> list[RunSpec]:
    flags = flags or {}
    return [RunSpec(f"x{x}", toy_run, {"x": x, **flags.get(x, {})}, root / f"x{x}") for x in xs]


def test_process_pool_finishes_reports_failures_and_deaths(tmp_path):
    root = tmp_path / "sweep"
    specs = _toy_specs(root, [1, 2, 3, 4, 5], {2: {"fail": True}, 4: {"die": True}})
    RunDir(root / "x3", specs[2].config).close()  # started before: must be resumed
    outcomes = run_sweep(specs, workers=2, threads=1, status=root / "sweep.json",
                         progress_bar=False)
    by = {o.name: o for o in outcomes}
    assert [o.name for o in outcomes] == ["x1", "x2", "x3", "x4", "x5"]
    assert by["x1"].status == by["x3"].status == by["x5"].status == "finished"
    assert [by[n].summary["x2"] for n in ("x1", "x3", "x5")] == [1, 9, 25]
    assert by["x3"].summary["resumed"] and not by["x1"].summary["resumed"]
    assert by["x2"].status == "failed" and by["x2"].error == "ValueError: bad x 2"
    assert "Traceback" in (root / "x2" / "error.txt").read_text()
    assert by["x4"].status == "failed"
    assert by["x4"].error == "worker process died (killed by signal 9)"
    assert by["x1"].summary["pid"] != os.getpid()  # ran in a worker process
    status = json.loads((root / "sweep.json").read_text())
    assert status["counts"] == {"finished": 3, "skipped": 0, "failed": 2}

    again = run_sweep([s for s in specs if s.name != "x4"], executor="inline")
    by = {o.name: o for o in again}
    assert [by[n].status for n in ("x1", "x3", "x5")] == ["skipped"] * 3
    assert by["x1"].summary["x2"] == 1  # read back from summary.json
    assert by["x2"].status == "failed"  # not finished: tried again


def test_inline_executor_and_one_progress_bar(tmp_path, monkeypatch):
    bars = []

    @contextlib.contextmanager
    def fake_progress(total, description, enabled=None, completed=0):
        bar = {"total": total, "completed": completed, "ticks": 0}
        bars.append(bar)

        def tick(n=1, **fields):
            bar["ticks"] += n

        yield tick

    monkeypatch.setattr(sweep_module, "progress", fake_progress)
    specs = _toy_specs(tmp_path, [1, 2, 3])
    run_sweep(specs[:1], executor="inline")
    outcomes = run_sweep(specs, executor="inline")
    assert [o.status for o in outcomes] == ["skipped", "finished", "finished"]
    assert outcomes[1].summary["pid"] == os.getpid()
    assert bars[-1] == {"total": 3, "completed": 1, "ticks": 2}


def test_bad_sweeps_are_refused(tmp_path):
    spec = RunSpec("a", toy_run, {"x": 1}, tmp_path / "a")
    with pytest.raises(ConfigError, match="two runs are named 'a'"):
        run_sweep([spec, RunSpec("a", toy_run, {"x": 2}, tmp_path / "b")])
    with pytest.raises(ConfigError, match="same folder"):
        run_sweep([spec, RunSpec("b", toy_run, {"x": 2}, tmp_path / "a")])
    with pytest.raises(ConfigError, match="'package.module:function'"):
        run_sweep([RunSpec("a", "no_colon", {}, tmp_path / "a")])
    with pytest.raises(ConfigError, match="cannot be imported"):
        run_sweep([RunSpec("a", "genlab.nas.retrain:nothing", {}, tmp_path / "a")])
    with pytest.raises(ConfigError, match="unknown executor 'dask'"):
        run_sweep([spec], executor="dask")


def _retrain_specs(root: Path) -> list[RunSpec]:
    from genlab.nas.retrain import RetrainConfig

    specs = [RunSpec(f"seed{s}", "genlab.nas.retrain:retrain",
                     RetrainConfig(arch=ARCH, channels=4, epochs=1, seed=s), root / f"seed{s}")
             for s in (0, 1)]
    bad = RetrainConfig(arch="|bogus~0|", channels=4, epochs=1)
    return specs + [RunSpec("bad", "genlab.nas.retrain:retrain", bad, root / "bad")]


def _check_retrain_outcomes(outcomes, reference: dict) -> None:
    by = {o.name: o for o in outcomes}
    for name in ("seed0", "seed1"):
        assert by[name].status == "finished", by[name].error
        assert by[name].summary["test_acc"] == reference[name]
    assert by["bad"].status == "failed"
    assert by["bad"].error.startswith("bad specification:") and "bogus" in by["bad"].error


@pytest.fixture(scope="module")
def retrain_reference(tmp_path_factory):
    """The same retrainings run inline (one thread, as in the workers)."""
    outcomes = run_sweep(_retrain_specs(tmp_path_factory.mktemp("inline")), executor="inline",
                         threads=1)
    return {o.name: o.summary["test_acc"] for o in outcomes if o.status == "finished"}


@pytest.mark.slow
def test_process_pool_retrainings_equal_inline(tmp_path, retrain_reference):
    outcomes = run_sweep(_retrain_specs(tmp_path), workers=2, threads=1, progress_bar=False)
    _check_retrain_outcomes(outcomes, retrain_reference)


def test_ray_sweep_on_a_local_instance(tmp_path, retrain_reference):
    pytest.importorskip("ray")
    outcomes = run_sweep(_retrain_specs(tmp_path), executor="ray", workers=2, threads=1,
                         progress_bar=False)
    _check_retrain_outcomes(outcomes, retrain_reference)


def test_dependencies_run_first_and_a_failed_dependency_fails_its_dependents(tmp_path):
    root = tmp_path / "deps"
    specs = [RunSpec("b", toy_run, {"x": 2}, root / "b", after=("a",)),
             RunSpec("a", toy_run, {"x": 1}, root / "a"),
             RunSpec("c", toy_run, {"x": 3, "fail": True}, root / "c"),
             RunSpec("d", toy_run, {"x": 4}, root / "d", after=("c", "b"))]
    assert [[s.name for s in w] for w in sweep_module.waves(specs)] == [["a", "c"], ["b"], ["d"]]
    seen = []
    by = {o.name: o for o in run_sweep(specs, executor="inline", progress_bar=False,
                                       on_outcome=lambda o: seen.append(o.name))}
    assert seen == ["a", "c", "b", "d"]
    assert by["a"].status == by["b"].status == "finished"
    assert by["c"].status == "failed"
    assert by["d"].status == "failed" and by["d"].error == "needs c, which failed"
    assert not (root / "d").exists()
    with pytest.raises(ConfigError, match="needs 'zz'"):
        run_sweep([RunSpec("e", toy_run, {"x": 1}, root / "e", after=("zz",))])
    # listed after what they need: list order is kept, a wave ends before a dependent
    listed = [RunSpec("a", toy_run, {"x": 1}, root / "la"),
              RunSpec("b", toy_run, {"x": 1}, root / "lb", after=("a",)),
              RunSpec("c", toy_run, {"x": 1}, root / "lc"),
              RunSpec("d", toy_run, {"x": 1}, root / "ld", after=("c",))]
    assert [[s.name for s in w] for w in sweep_module.waves(listed)] == [["a"], ["b", "c"],
                                                                         ["d"]]
    loop = [RunSpec("p", toy_run, {"x": 1}, root / "p", after=("q",)),
            RunSpec("q", toy_run, {"x": 1}, root / "q", after=("p",))]
    with pytest.raises(ConfigError, match="circle"):
        run_sweep(loop, executor="inline")


def test_a_folder_with_other_options_is_refused_before_anything_runs(tmp_path):
    root = tmp_path / "expect"
    first = RunSpec("a", toy_run, {"x": 1}, root / "a", expect={"x": 1})
    run_sweep([first], executor="inline", progress_bar=False)
    same = run_sweep([first], executor="inline", progress_bar=False)
    assert same[0].status == "skipped"
    other = RunSpec("a", toy_run, {"x": 2}, root / "a", expect={"x": 2})
    fresh = RunSpec("b", toy_run, {"x": 5}, root / "b", expect={"x": 5})
    with pytest.raises(ConfigError, match=r"holds a finished run of a with other options "
                                          r"\(x: 1 -> 2\)"):
        run_sweep([fresh, other], executor="inline")
    assert not (root / "b").exists()  # refused before anything ran
    # a key the stored config lacks is taken from the defaults
    newer = RunSpec("a", toy_run, {"x": 1}, root / "a", expect={"x": 1, "y": 0},
                    defaults={"y": 0})
    assert run_sweep([newer], executor="inline")[0].status == "skipped"


class Soft(Exception):
    kind = "soft"


def soft_run(config: dict, out, *, resume: bool, progress_bar=None) -> dict:
    RunDir(out, config, resume=resume).close()
    raise Soft("went soft")


def test_result_errors_end_a_run_with_a_summary(tmp_path):
    spec = RunSpec("s", soft_run, {"x": 1}, tmp_path / "s", result_errors=(Soft,))
    outcome = run_sweep([spec], executor="inline", progress_bar=False)[0]
    assert outcome.status == "finished"
    assert outcome.summary == {"failed": "soft", "error": "went soft"}
    assert json.loads((tmp_path / "s" / "summary.json").read_text()) == outcome.summary
    assert run_sweep([spec], executor="inline")[0].status == "skipped"
