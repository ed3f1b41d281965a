"""Validation once: a search (and a retraining) checks its data set where its config is
validated, not again when the data are read; the loader still refuses a bad data set when
called directly."""

import pytest

import genlab.nas.data.registry as registry
import genlab.nas.retrain as retrain_mod
import genlab.nas.search as search_mod
from genlab.core.errors import ConfigError
from genlab.nas.data import load_image_data
from genlab.nas.search import SearchConfig, run_search


def _count(monkeypatch, calls: list):
    real = registry.check_dataset

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    for module in (search_mod, retrain_mod, registry):  # the configs' check and the loader's
        monkeypatch.setattr(module, "check_dataset", counting)


def test_a_search_checks_its_data_set_once(tmp_path, monkeypatch):
    calls: list = []
    _count(monkeypatch, calls)
    monkeypatch.setattr(search_mod, "_plots", lambda run, history, space: None)
    cfg = SearchConfig(channels=2, cells=1, steps=2, batch_size=16, hessian_points=0,
                       diag_batch=8)
    summary = run_search(cfg, tmp_path / "r")
    assert summary["steps"] == 2
    assert calls == [("digits", None)]


def test_a_retraining_checks_its_data_set_once(tmp_path, monkeypatch):
    calls: list = []
    _count(monkeypatch, calls)
    cfg = retrain_mod.RetrainConfig(arch="|nor_conv_1x1~0|+|skip_connect~0|none~1|+|none~0|"
                                    "none~1|avg_pool_3x3~2|", channels=2, cells=1, epochs=1)
    summary = retrain_mod.retrain(cfg, tmp_path / "t", progress_bar=False)
    assert 0 <= summary["test_acc"] <= 100
    assert calls == [("digits", None)]


def test_the_loader_called_directly_still_checks(monkeypatch):
    calls: list = []
    _count(monkeypatch, calls)
    data = load_image_data("digits", size=8, seed=0)
    assert len(data.train) + len(data.val) + len(data.test) == 1797  # scikit-learn's digits
    with pytest.raises(ConfigError, match=r"--dataset cifar10 reads files: pass --data-root"):
        load_image_data("cifar10")
    with pytest.raises(ConfigError, match=r"unknown --dataset 'nope'"):
        load_image_data("nope")
    assert [c[0] for c in calls] == ["digits", "cifar10", "nope"]
