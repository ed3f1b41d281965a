"""genlab.load rebuilds an `optim train` model from its checkpoint's model record alone."""


import torch

import genlab
from genlab.optim.studies.train import TrainConfig, load_task, split_scores, train_digits


def test_load_of_a_tiny_training_predicts_like_the_trained_model(tmp_path):
    cfg = TrainConfig(arch="cnn", width=4, depth=1, epochs=1, measure=False)
    summary = train_digits(cfg, tmp_path / "run", progress_bar=False)
    run = genlab.load(tmp_path / "run")
    assert run.kind == "optim train" and run.config["arch"] == "cnn"
    assert run.summary["test_acc"] == summary["test_acc"]
    data = load_task(cfg)
    scores = split_scores(run.model, data.test, torch.device("cpu"))
    assert scores["acc"] == summary["test_acc"]
    assert scores["loss"] == summary["test_loss"]
    assert genlab.load(tmp_path / "run" / "checkpoint.pt", kind="optim train").kind == run.kind
