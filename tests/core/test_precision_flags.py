"""--amp and --channels-last of the search, the retraining and the gaze training."""

import json

import pytest
import torch

from genlab.core.errors import ConfigError
from genlab.core.runs import load_checkpoint
from genlab.nas.search import SearchConfig, run_search

SEARCH = dict(channels=4, cells=1, size=8, steps=2, batch_size=32, hessian_points=0,
              diag_batch=8, reg="ber-kl", seed=1)


def test_search_channels_last_and_bf16(tmp_path):
    base = run_search(SearchConfig(**SEARCH), tmp_path / "f32", progress_bar=False)
    nhwc = run_search(SearchConfig(**SEARCH, channels_last=True), tmp_path / "nhwc",
                      progress_bar=False)
    bf16 = run_search(SearchConfig(**SEARCH, amp="bf16"), tmp_path / "bf16",
                      progress_bar=False)
    a = torch.tensor(base["alpha"]["cell"])
    # NHWC changes the order of float sums only (Adam's first steps are ~lr * sign(g))
    assert torch.allclose(torch.tensor(nhwc["alpha"]["cell"]), a, atol=2e-3)
    b = torch.tensor(bf16["alpha"]["cell"])
    assert torch.isfinite(b).all() and not torch.equal(b, a)  # bf16 did run: other rounding
    assert (b - a).abs().max() <= 2 * 2 * 3e-2  # at most two Adam steps of lr 3e-2 apart
    config = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert config["amp"] == "bf16" and config["channels_last"] is False


def test_search_refuses_fp16_and_unknown_precisions(tmp_path):
    with pytest.raises(ConfigError, match="fp16 is not available for the search.*bf16"):
        run_search(SearchConfig(**SEARCH, amp="fp16"), tmp_path / "r")
    with pytest.raises(ConfigError, match="amp"):
        run_search(SearchConfig(**SEARCH, amp="int8"), tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_gaze_train_fp16_keeps_its_scaler(tmp_path):
    from genlab.gaze.protocol import SyntheticCache, load_task_data
    from genlab.gaze.train import GazeTrainConfig, train_gaze

    cfg = GazeTrainConfig(width=4, appearance_dim=8, gaze_feat_dim=8, steps=2, eval_every=2,
                          warmup_steps=1, batch_size=16, train_count=64, test_count=16,
                          size=[16, 24], source="app-e", targets=["app-m"],
                          curve_val_images=16, amp="fp16", channels_last=True)
    _, summary = train_gaze(cfg, load_task_data(cfg, SyntheticCache()), tmp_path / "g",
                            progress_bar=False, plots=False)
    assert summary["val_mean_deg"] < 90
    scaler = load_checkpoint(tmp_path / "g" / "checkpoint.pt")["amp"]
    assert scaler["scale"] > 0 and "_growth_tracker" in scaler
    with pytest.raises(ConfigError, match="amp"):
        GazeTrainConfig(amp="fp8").validate()


def test_retrain_config_checks_amp():
    from genlab.nas.retrain import RetrainConfig

    arch = "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|avg_pool_3x3~0|none~1|nor_conv_3x3~2|"
    RetrainConfig(arch=arch, amp="bf16", channels_last=True).validate()
    with pytest.raises(ConfigError, match="amp"):
        RetrainConfig(arch=arch, amp="half").validate()
