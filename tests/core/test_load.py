"""genlab.load's mechanism: a checkpoint's model record rebuilds the model; bad files say why.

Each kind of run (nas train, nas search, optim train, gaze train) has its own test beside
its package's tests; this one checks the record itself with a torch module as the builder.
"""

import pytest
import torch

import genlab
from genlab.core.errors import CheckpointError
from genlab.core.storage.checkpoints import (
    MODEL_RECORD,
    build_from_record,
    model_record,
    save_checkpoint,
)
from genlab.core.storage.files import write_json

RECORD = model_record("toy", "torch.nn:Linear", {"in_features": 3, "out_features": 2})


def test_load_rebuilds_the_model_with_its_weights_and_config(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    save_checkpoint(tmp_path / "checkpoint.pt", {MODEL_RECORD: RECORD,
                                                 "model": model.state_dict()})
    write_json(tmp_path / "config.json", {"seed": 4})
    write_json(tmp_path / "summary.json", {"test_acc": 50.0})
    for where in (tmp_path, tmp_path / "checkpoint.pt"):
        run = genlab.load(where)
        x = torch.randn(5, 3)
        assert torch.equal(run.model(x), model(x))
        assert not run.model.training
        assert run.kind == "toy" and run.config == {"seed": 4}
        assert run.summary == {"test_acc": 50.0} and run.folder == tmp_path
    with pytest.raises(CheckpointError, match="is a toy run; a gaze train run is needed"):
        genlab.load(tmp_path, kind="gaze train")


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        genlab.load(tmp_path)
    save_checkpoint(tmp_path / "checkpoint.pt", {"model": {}})
    with pytest.raises(CheckpointError, match="holds no model record"):
        genlab.load(tmp_path)
    wrong = torch.nn.Linear(4, 2).state_dict()
    save_checkpoint(tmp_path / "checkpoint.pt", {MODEL_RECORD: RECORD, "model": wrong})
    with pytest.raises(CheckpointError, match="do not fit the rebuilt model"):
        genlab.load(tmp_path)
    bad = model_record("toy", "torch.nn:Linear", {"in_features": 3})
    with pytest.raises(CheckpointError, match="cannot rebuild"):
        build_from_record(bad)
