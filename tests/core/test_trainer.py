import pytest
import torch
from torch import nn

from genlab.core.data import Batches, load_digits_data
from genlab.core.errors import DivergedError
from genlab.core.runs import RunDir
from genlab.core.trainer import Trainer


def _trainer(seed=0, lr=0.1):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return Trainer(model, opt, nn.CrossEntropyLoss(), seed=seed, progress_bar=False)


def test_resume_equals_uninterrupted(tmp_path):
    data = load_digits_data()
    batches = Batches(data.train, 32, seed=0)
    full = _trainer()
    full.fit(batches.epoch, 4, run=RunDir(tmp_path / "a", {"x": 1}))
    part = _trainer()
    part.fit(batches.epoch, 2, run=RunDir(tmp_path / "b", {"x": 1}))
    resumed = _trainer(seed=99)  # different init: everything must come from the checkpoint
    run = RunDir(tmp_path / "b", {"x": 1}, resume=True)
    resumed.fit(batches.epoch, 4, run=run)
    for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(p, q)
    assert [m["epoch"] for m in run.metrics()] == [0, 1, 2, 3]


def test_nan_loss_raises_and_keeps_checkpoint(tmp_path):
    data = load_digits_data()
    batches = Batches(data.train, 32)
    t = _trainer()
    calls = {"n": 0}
    ce = nn.CrossEntropyLoss()

    def poisoned(out, y):  # finite for the first epoch, NaN afterwards
        calls["n"] += 1
        return ce(out, y) * (float("nan") if calls["n"] > len(batches) else 1.0)

    t.loss_fn = poisoned
    run = RunDir(tmp_path / "r", {})
    with pytest.raises(DivergedError, match="non-finite"):
        t.fit(batches.epoch, 5, run=run)
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert state["epoch"] == 0
    assert all(torch.isfinite(v).all() for v in state["model"].values())


def test_until_stops_at_the_first_epoch_it_holds_and_a_resumed_run_trains_no_further(tmp_path):
    """fit(until=...) against a hand loop over the same records: the training stops after
    the first epoch whose record makes ``until`` true, and the run resumed from its folder
    (as after a kill before summary.json) trains no further epoch."""
    data = load_digits_data()
    batches = Batches(data.train, 64, seed=0)
    full = _trainer().fit(batches.epoch, 5)  # no rule: every epoch, its losses recorded
    losses = [r["train_loss"] for r in full.history]
    threshold = (losses[1] + losses[2]) / 2  # the loss falls epoch by epoch here
    first = next(i for i, loss in enumerate(losses) if loss < threshold)  # the hand loop
    run = RunDir(tmp_path / "r", {})
    stopped = _trainer().fit(batches.epoch, 5, run=run,
                             until=lambda r: r["train_loss"] < threshold)
    assert stopped.stopped and stopped.epochs == first + 1 == len(stopped.history)
    assert [r["train_loss"] for r in stopped.history] == losses[:first + 1]
    resumed = _trainer(seed=9).fit(batches.epoch, 5, run=RunDir(tmp_path / "r", {},
                                                                resume=True),
                                   until=lambda r: r["train_loss"] < threshold)
    assert resumed.stopped and resumed.epochs == first + 1 and resumed.history == []
    never = _trainer().fit(batches.epoch, 3, until=lambda r: False)  # the cap
    assert not never.stopped and never.epochs == 3
