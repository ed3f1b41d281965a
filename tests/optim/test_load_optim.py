"""genlab.load rebuilds an `optim train` model from its checkpoint's model record alone."""


import torch

import genlab
from genlab.optim.training.train import TrainConfig, load_task, split_scores, train_digits


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


def test_a_checkpoint_whose_record_names_the_builder_before_it_moved_still_loads(tmp_path):
    """Checkpoints written before the model zoo left genlab.optim.studies name
    "genlab.optim.studies.models:build_model"; that package's MOVED table leads there."""
    from genlab.core.storage.checkpoints import MODEL_RECORD, load_checkpoint, save_checkpoint
    from genlab.optim.training.train import load_trained

    cfg = TrainConfig(arch="cnn", width=4, depth=1, epochs=1, measure=False)
    summary = train_digits(cfg, tmp_path / "run", progress_bar=False)
    file = tmp_path / "run" / "checkpoint.pt"
    state = load_checkpoint(file)
    assert state[MODEL_RECORD]["builder"] == "genlab.optim.training.models:build_model"
    state[MODEL_RECORD]["builder"] = "genlab.optim.studies.models:build_model"  # as recorded
    save_checkpoint(file, state)
    assert load_checkpoint(file)[MODEL_RECORD]["builder"].startswith("genlab.optim.studies.")
    data = load_task(cfg)
    for model in (genlab.load(tmp_path / "run").model, load_trained(file)[0]):
        scores = split_scores(model, data.test, torch.device("cpu"))
        assert scores["acc"] == summary["test_acc"]
        assert scores["loss"] == summary["test_loss"]
