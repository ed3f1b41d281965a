"""A command resumed on a run it already finished rewrites nothing and returns its summary."""

import gc
import os

from ddp_cases import ARCH

from genlab.nas.retrain import RetrainConfig, retrain
from genlab.nas.search import SearchConfig, run_search
from genlab.optim.training.train import TrainConfig, train_digits


def _unchanged_on_resume(run, out):
    first = run(resume=False)
    gc.collect()  # the first run's folder object lets go of its lock (and its .lock file)
    stamps = {p.name: os.stat(p).st_mtime_ns for p in out.iterdir()}
    again = run(resume=True)
    assert again == first
    assert {p.name: os.stat(p).st_mtime_ns for p in out.iterdir()} == stamps


def test_nas_train_resumed_when_finished_is_a_no_op(tmp_path):
    cfg = RetrainConfig(arch=ARCH, channels=4, cells=1, epochs=1, seed=0)
    out = tmp_path / "t"
    _unchanged_on_resume(lambda resume: retrain(cfg, out, resume=resume, progress_bar=False),
                         out)


def test_nas_search_resumed_when_finished_is_a_no_op(tmp_path):
    cfg = SearchConfig(channels=4, cells=1, size=8, steps=2, batch_size=32, hessian_points=1,
                       diag_batch=8, reg="none", seed=0)
    out = tmp_path / "s"
    _unchanged_on_resume(lambda resume: run_search(cfg, out, resume=resume,
                                                   progress_bar=False), out)


def test_optim_train_resumed_when_finished_is_a_no_op(tmp_path):
    cfg = TrainConfig(arch="mlp", width=8, depth=1, epochs=1, measure=False)
    out = tmp_path / "o"
    _unchanged_on_resume(lambda resume: train_digits(cfg, out, resume=resume,
                                                     progress_bar=False), out)
