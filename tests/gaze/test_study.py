"""Run specs: finished runs are read back, interrupted ones resumed, others started."""

import json
from dataclasses import asdict

import pytest

from genlab.core.errors import ConfigError
from genlab.core.runs import RunDir
from genlab.gaze.study import RunSpec, run_specs


def fake_execute(spec: RunSpec, resume: bool) -> dict:
    """Writes a run folder like a training would; records how it was called."""
    run = RunDir(spec.folder, {"value": spec.config}, resume=resume)
    summary = {"value": spec.config * 2, "resumed": resume}
    run.write_summary(summary)
    return summary


def test_run_specs_skips_finished_and_resumes_started(tmp_path):
    specs = [RunSpec(f"r{i}", i, tmp_path / f"r{i}") for i in range(3)]
    fake_execute(specs[0], False)  # finished before
    RunDir(specs[1].folder, {"value": 1})  # started, then killed (config.json only)
    calls = []

    def execute(spec, resume):
        calls.append((spec.name, resume))
        return fake_execute(spec, resume)

    out = run_specs(specs, execute, progress_bar=False)
    assert calls == [("r1", True), ("r2", False)]
    assert [out[f"r{i}"]["value"] for i in range(3)] == [0, 2, 4]
    assert list(out) == ["r0", "r1", "r2"]
    assert run_specs(specs, execute, progress_bar=False) == out and len(calls) == 2
    with pytest.raises(ConfigError, match="unique"):
        run_specs([specs[0], specs[0]], execute, progress_bar=False)


def test_run_specs_in_worker_processes(tmp_path):
    specs = [RunSpec(f"w{i}", i, tmp_path / f"w{i}") for i in range(4)]
    out = run_specs(specs, fake_execute, workers=2, progress_bar=False)
    assert [out[f"w{i}"]["value"] for i in range(4)] == [0, 2, 4, 6]
    for i in range(4):
        assert json.loads((tmp_path / f"w{i}" / "summary.json").read_text())["value"] == 2 * i


def test_run_specs_refuses_a_folder_made_with_other_options(tmp_path):
    from genlab.gaze.train import GazeTrainConfig

    spec = RunSpec("a", GazeTrainConfig(steps=5), tmp_path / "a")
    RunDir(spec.folder, asdict(GazeTrainConfig(steps=7)))
    with pytest.raises(ConfigError, match="steps: 7 -> 5"):
        run_specs([spec], fake_execute, progress_bar=False)


def failing_execute(spec: RunSpec, resume: bool) -> dict:
    if spec.config == 1:
        raise ValueError("bad run")
    return fake_execute(spec, resume)


def test_a_failed_run_is_reported_after_the_others_ran(tmp_path):
    from genlab.core.errors import DataError

    specs = [RunSpec(f"f{i}", i, tmp_path / f"f{i}") for i in range(3)]
    with pytest.raises(DataError, match=r"1 of 3 runs failed.*f1: ValueError: bad run"):
        run_specs(specs, failing_execute, executor="inline", progress_bar=False)
    assert (tmp_path / "f2" / "summary.json").exists()  # the run after it went on
    assert not (tmp_path / "f1" / "summary.json").exists()
    with pytest.raises(ConfigError, match="executor"):
        run_specs(specs, fake_execute, executor="slurm", progress_bar=False)
