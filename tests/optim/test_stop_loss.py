"""Jiang et al.'s stopping rule of `optim train` (``stop_loss``) against a hand loop over the
training cross-entropies of the same training run without it."""

import json

import pytest

from genlab.optim.training.train import TrainConfig, train_digits

CAP = 4


def small(**changes) -> TrainConfig:
    return TrainConfig(arch="mlp", width=8, depth=1, lr=0.05, batch_size=64, epochs=CAP,
                       measure=False, **changes)


def epochs_ce(folder) -> list[float]:
    return [json.loads(line)["train_ce"]
            for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_a_model_stops_at_the_first_epoch_below_the_loss_and_one_that_never_does_is_capped(
        tmp_path, monkeypatch):
    from genlab.optim.training import train

    monkeypatch.setattr(train, "_plot_curves", lambda run: None)  # the figure: not tested
    never = train_digits(small(stop_loss=1e-9), tmp_path / "never", progress_bar=False)
    ce = epochs_ce(tmp_path / "never")  # the cross-entropy after every epoch, to the cap
    assert len(ce) == CAP and never["epochs_trained"] == CAP
    assert never["reached_stop_loss"] is False  # capped, and said so
    assert never["train_loss"] == pytest.approx(ce[-1])  # finish() scores the same model
    threshold = (ce[1] + ce[2]) / 2
    first = next(i for i, v in enumerate(ce) if v < threshold)  # the hand loop
    assert first < CAP - 1
    stopped = train_digits(small(stop_loss=threshold), tmp_path / "stop", progress_bar=False)
    assert stopped["reached_stop_loss"] is True
    assert stopped["epochs_trained"] == first + 1
    assert epochs_ce(tmp_path / "stop") == pytest.approx(ce[:first + 1])
    assert stopped["train_loss"] == pytest.approx(ce[first]) and stopped["train_loss"] < threshold
