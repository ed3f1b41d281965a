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
