"""Gaze studies go through core.sweep: finished runs are read back, interrupted ones
resumed, others started; a folder made with other options is refused; failures are
listed once every run had its turn."""

import json
from dataclasses import asdict

import pytest

from genlab.core.errors import ConfigError
from genlab.core.runs import RunDir
from genlab.core.sweep import RunSpec
from genlab.gaze.studies.runs import run_study, train_spec


def fake_target(config, out, *, resume=False, progress_bar=False, calls=None) -> dict:
    """Writes a run folder like a training would; records how it was called."""
    if calls is not None:
        calls.append((out.name, resume))
    if config == -1:
        raise ValueError("bad run")
    run = RunDir(out, {"value": config}, resume=resume)
    summary = {"value": config * 2, "resumed": resume}
    run.write_summary(summary)
    return summary


def test_run_study_skips_finished_and_resumes_started(tmp_path):
    calls = []
    specs = [RunSpec(f"r{i}", fake_target, i, tmp_path / f"r{i}", {"calls": calls})
             for i in range(3)]
    fake_target(0, tmp_path / "r0")  # finished before
    RunDir(tmp_path / "r1", {"value": 1})  # started, then killed (config.json only)
    out = run_study(specs, progress_bar=False)
    assert calls == [("r1", True), ("r2", False)]
    assert [out[f"r{i}"]["value"] for i in range(3)] == [0, 2, 4]
    assert list(out) == ["r0", "r1", "r2"]
    assert run_study(specs, progress_bar=False) == out and len(calls) == 2
    with pytest.raises(ConfigError, match="two runs are named"):
        run_study([specs[0], specs[0]], progress_bar=False)


def test_run_study_in_worker_processes(tmp_path):
    specs = [RunSpec(f"w{i}", fake_target, i, tmp_path / f"w{i}") for i in range(4)]
    out = run_study(specs, workers=2, progress_bar=False)
    assert [out[f"w{i}"]["value"] for i in range(4)] == [0, 2, 4, 6]
    for i in range(4):
        assert json.loads((tmp_path / f"w{i}" / "summary.json").read_text())["value"] == 2 * i


def test_a_folder_made_with_other_options_is_refused(tmp_path):
    from genlab.gaze.train import GazeTrainConfig

    spec = train_spec("a", GazeTrainConfig(steps=5), tmp_path / "a")
    RunDir(spec.out, asdict(GazeTrainConfig(steps=7)))
    with pytest.raises(ConfigError, match="steps: 7 -> 5"):
        run_study([spec], progress_bar=False)


def test_an_option_missing_from_an_old_config_counts_as_its_default(tmp_path):
    from genlab.core.sweep import check_folder
    from genlab.gaze.train import GazeTrainConfig

    spec = train_spec("a", GazeTrainConfig(steps=5), tmp_path / "a")
    old = {k: v for k, v in asdict(GazeTrainConfig(steps=5)).items() if k != "group_router_at"}
    RunDir(spec.out, old)
    check_folder(spec)  # the default 0.0: the same run
    other = train_spec("a", GazeTrainConfig(steps=5, group_router_at=0.5), tmp_path / "a")
    with pytest.raises(ConfigError, match="group_router_at: 0.0 -> 0.5"):
        check_folder(other)


def test_a_failed_run_is_reported_after_the_others_ran(tmp_path):
    from genlab.core.errors import DataError

    specs = [RunSpec(f"f{i}", fake_target, -1 if i == 1 else i, tmp_path / f"f{i}")
             for i in range(3)]
    with pytest.raises(DataError, match=r"1 of 3 runs failed.*f1: ValueError: bad run"):
        run_study(specs, executor="inline", progress_bar=False)
    assert (tmp_path / "f2" / "summary.json").exists()  # the run after it went on
    assert not (tmp_path / "f1" / "summary.json").exists()
    with pytest.raises(ConfigError, match="executor"):
        run_study(specs, executor="slurm", progress_bar=False)
