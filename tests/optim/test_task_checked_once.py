"""Validation once: `optim train` checks its task and translation options where its config is
validated, not again when the task data are read; task_data called directly still checks."""

import pytest

import genlab.optim.training.tasks as tasks
import genlab.optim.training.train as train
from genlab.core.errors import ConfigError
from genlab.optim.training.tasks import task_data
from genlab.optim.training.train import TrainConfig, train_digits


def _count(monkeypatch) -> dict[str, int]:
    counts = {"check_task": 0, "check_translation": 0}
    for name in counts:
        real = getattr(tasks, name)

        def counting(*args, _name=name, _real=real, **kwargs):
            counts[_name] += 1
            return _real(*args, **kwargs)

        for module in (train, tasks):  # the config's checks and task_data's
            monkeypatch.setattr(module, name, counting)
    return counts


def test_a_training_checks_its_task_once(tmp_path, monkeypatch):
    counts = _count(monkeypatch)
    cfg = TrainConfig(arch="cnn", width=4, depth=1, epochs=1, measure=False)
    summary = train_digits(cfg, tmp_path / "run", progress_bar=False)
    assert 0 <= summary["test_acc"] <= 100
    # TrainConfig.validate: one check_task, check_translation for translate_copies and
    # val_copies; task_data adds none
    assert counts == {"check_task": 1, "check_translation": 2}


def test_task_data_called_directly_still_checks(monkeypatch):
    counts = _count(monkeypatch)
    data = task_data("digits", "full", data_seed=0)
    assert len(data.fit) + len(data.test) == 1797  # scikit-learn's digits, every class kept
    assert counts == {"check_task": 1, "check_translation": 2}
    with pytest.raises(ConfigError, match=r"translate must be in \[0, "):
        task_data("digits", translate=-1)
    with pytest.raises(ConfigError):
        task_data("letters")
    assert counts == {"check_task": 2, "check_translation": 5}
