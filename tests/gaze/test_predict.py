from dataclasses import asdict

import cv2
import numpy as np
import pytest
import torch

from genlab.core.errors import CheckpointError, DataError
from genlab.core.runs import RunDir, write_json
from genlab.core.storage.checkpoints import MODEL_RECORD
from genlab.gaze.models import build_gaze_model as build_model
from genlab.gaze.predict import load_run, predict_file, read_image_rgb
from genlab.gaze.train import GazeTrainConfig

H, W = 16, 24


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder holding an (untrained) MoEGaze in the format train_gaze writes."""
    folder = tmp_path_factory.mktemp("predict") / "run"
    cfg = GazeTrainConfig(width=4, appearance_dim=8, gaze_feat_dim=8, size=[H, W], experts=3)
    torch.manual_seed(0)
    model = build_model(cfg.model, **cfg.model_hparams())
    run = RunDir(folder, asdict(cfg))
    run.save({"epoch": 0, "model": model.state_dict(), MODEL_RECORD: cfg.model_record()})
    return folder, model.eval()


def _expected(model, rgb):
    x = torch.from_numpy(rgb.copy()).permute(2, 0, 1)[None].float() / 255
    with torch.no_grad():
        return np.degrees(model(x)[0].numpy())


def test_predict_reads_bgr_png_as_rgb(run_dir, tmp_path):
    folder, model = run_dir
    rgb = np.zeros((H, W, 3), np.uint8)
    rgb[..., 0] = 250  # red only: swapping channels would change the prediction
    rgb[4:10, 8:14, 2] = 120
    cv2.imwrite(str(tmp_path / "eye.png"), rgb[..., ::-1])
    result = predict_file(folder, tmp_path / "eye.png", tmp_path / "out.png")
    exp = _expected(model, rgb)
    assert np.allclose([result["pitch_deg"], result["yaw_deg"]], exp, atol=1e-4)
    assert not np.allclose(exp, _expected(model, rgb[..., ::-1].copy()), atol=1e-3)
    drawn = cv2.imread(str(tmp_path / "out.png"))
    assert drawn.shape == (H, W, 3) and not np.array_equal(drawn, rgb[..., ::-1])


def test_grey_and_larger_images_are_adapted(run_dir, tmp_path):
    folder, model = run_dir
    grey = np.random.default_rng(0).integers(0, 256, (H, W), dtype=np.uint8)
    cv2.imwrite(str(tmp_path / "grey.png"), grey)
    r = predict_file(folder, tmp_path / "grey.png")
    assert np.allclose(
        [r["pitch_deg"], r["yaw_deg"]],
        _expected(model, np.repeat(grey[..., None], 3, 2)),
        atol=1e-4,
    )
    big = np.repeat(np.repeat(grey, 2, 0), 2, 1)  # 2x block upsampling: area resize undoes it
    cv2.imwrite(str(tmp_path / "big.png"), big)
    r2 = predict_file(folder, tmp_path / "big.png")
    assert np.allclose([r2["pitch_deg"], r2["yaw_deg"]], [r["pitch_deg"], r["yaw_deg"]], atol=1e-4)
    rgba = np.dstack([np.zeros((H, W, 3), np.uint8), np.full((H, W), 255, np.uint8)])
    cv2.imwrite(str(tmp_path / "rgba.png"), rgba)
    assert read_image_rgb(tmp_path / "rgba.png").shape == (H, W, 3)


def test_bad_files_raise_data_error_naming_the_file(run_dir, tmp_path):
    folder, _ = run_dir
    (tmp_path / "fake.png").write_text("not an image")
    with pytest.raises(DataError, match="fake.png"):
        predict_file(folder, tmp_path / "fake.png")
    with pytest.raises(DataError, match="missing.png"):
        predict_file(folder, tmp_path / "missing.png")
    with pytest.raises(CheckpointError, match="config.json"):
        load_run(tmp_path)


def test_checkpoint_not_matching_config_is_rejected(run_dir, tmp_path):
    folder, _ = run_dir
    other = tmp_path / "other"
    other.mkdir()
    cfg = GazeTrainConfig(width=8, appearance_dim=8, gaze_feat_dim=8, size=[H, W], experts=3)
    write_json(other / "config.json", asdict(cfg))
    (other / "checkpoint.pt").write_bytes((folder / "checkpoint.pt").read_bytes())
    with pytest.raises(CheckpointError, match="do not match"):
        load_run(other)


def test_a_run_older_than_the_router_options_still_opens(tmp_path):
    """A checkpoint written before router_input / group_train existed: record and config
    lack them, and they count as their defaults."""
    cfg = GazeTrainConfig(width=4, appearance_dim=8, gaze_feat_dim=8, size=[H, W], experts=3)
    model = build_model(cfg.model, **cfg.model_hparams())
    record = cfg.model_record()
    for key in ("router_input", "group_train"):
        del record["args"][key]
    old = {k: v for k, v in asdict(cfg).items() if k not in ("grouping", "router_input")}
    run = RunDir(tmp_path / "old", old)
    run.save({"epoch": 0, "model": model.state_dict(), MODEL_RECORD: record})
    run.close()
    loaded, _ = load_run(tmp_path / "old")
    x = torch.rand(2, 3, H, W)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(x), model.eval()(x))
