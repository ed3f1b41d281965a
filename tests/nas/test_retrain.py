"""Retraining with each space's recipe: DARTS recipe pieces by hand, resume, bad options."""

import json

import pytest
import torch

from genlab.core.errors import GenlabError
from genlab.nas import get_space
from genlab.nas.retrain import ClippedSGD, DropPathRamp, RetrainConfig, cutout, retrain

S2_CELL = ("Genotype(normal=[('sep_conv_3x3', 0), ('skip_connect', 1), ('sep_conv_3x3', 0), "
           "('sep_conv_3x3', 2), ('skip_connect', 0), ('sep_conv_3x3', 3), ('sep_conv_3x3', 1), "
           "('skip_connect', 4)], normal_concat=[2, 3, 4, 5], reduce=[('sep_conv_3x3', 0), "
           "('sep_conv_3x3', 1), ('skip_connect', 2), ('sep_conv_3x3', 1), ('skip_connect', 2), "
           "('skip_connect', 3), ('sep_conv_3x3', 0), ('skip_connect', 4)], "
           "reduce_concat=[2, 3, 4, 5])")


def test_darts_recipe_defaults_and_nb201_unchanged():
    darts = RetrainConfig(arch=S2_CELL, space="s2").resolved()
    assert (darts.lr, darts.momentum, darts.nesterov, darts.weight_decay) == (0.025, 0.9, False,
                                                                               3e-4)
    assert (darts.grad_clip, darts.auxiliary_weight, darts.drop_path, darts.cutout) == (
        5.0, 0.4, 0.2, True)
    nb = RetrainConfig(arch="|none~0|+|none~0|none~1|+|none~0|none~1|none~2|").resolved()
    assert (nb.channels, nb.cells, nb.epochs, nb.lr, nb.weight_decay, nb.nesterov) == (
        16, 1, 30, 0.05, 5e-4, True)
    assert (nb.grad_clip, nb.auxiliary_weight, nb.drop_path, nb.cutout) == (0.0, 0.0, 0.0,
                                                                             False)


def test_cutout_by_hand():
    g = torch.Generator().manual_seed(0)
    x = torch.ones(50, 1, 8, 8)
    out = cutout(x, g, 4)
    g = torch.Generator().manual_seed(0)
    cy, cx = torch.randint(0, 8, (50,), generator=g), torch.randint(0, 8, (50,), generator=g)
    for i in range(50):
        expected = torch.ones(8, 8)
        expected[max(0, cy[i] - 2):min(8, cy[i] + 2), max(0, cx[i] - 2):min(8, cx[i] + 2)] = 0
        assert torch.equal(out[i, 0], expected)


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_drop_path_ramp_and_its_resume():
    net = get_space("s2").build_network(S2_CELL, 3, in_channels=1, channels=4, cells=3,
                                        auxiliary=False, drop_path=0.0)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    ramp = DropPathRamp(opt, net, epochs=10, drop_path=0.2)
    seen = [net.drop_path_prob]
    for _ in range(4):
        ramp.step()
        seen.append(net.drop_path_prob)
    assert seen == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])  # upstream: p * epoch / epochs
    other = DropPathRamp(torch.optim.SGD(net.parameters(), lr=0.1), net, 10, 0.2)
    other.load_state_dict(ramp.state_dict())
    assert net.drop_path_prob == pytest.approx(0.08)


def test_clipped_sgd_clips_the_step():
    w = torch.nn.Parameter(torch.zeros(4))
    opt = ClippedSGD([w], max_norm=1.0, lr=1.0)

    def closure():
        opt.zero_grad()
        loss = (w * torch.tensor([30.0, 40.0, 0.0, 0.0])).sum()
        loss.backward()
        return loss

    opt.step(closure)
    torch.testing.assert_close(w.detach(), torch.tensor([-0.6, -0.8, 0.0, 0.0]))


def test_darts_retrain_end_to_end_and_deterministic(tmp_path):
    cfg = RetrainConfig(arch=S2_CELL, space="s2", channels=4, cells=3, epochs=2)
    s = retrain(cfg, tmp_path / "a")
    net = get_space("s2").build_network(S2_CELL, 10, in_channels=1, channels=4, cells=3,
                                        auxiliary=True)
    without_aux = sum(p.numel() for n, p in net.named_parameters() if "auxiliary" not in n)
    assert s["params"] == without_aux and 0 <= s["test_acc"] <= 100
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["auxiliary_weight"] == 0.4 and config["drop_path"] == 0.2
    first = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()[0]
    (tmp_path / "b").mkdir()
    retrain(RetrainConfig(arch=S2_CELL, space="s2", channels=4, cells=3, epochs=1),
            tmp_path / "b" / "one")
    assert json.loads(first)["train_loss"] == pytest.approx(json.loads(
        (tmp_path / "b" / "one" / "metrics.jsonl").read_text().splitlines()[0])["train_loss"])


@pytest.mark.parametrize("kw, needle", [
    (dict(space="nb201", arch="|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",
          auxiliary_weight=0.4), "auxiliary"),
    (dict(space="s2", arch=S2_CELL, drop_path=1.5), "drop-path"),
    (dict(space="s2", arch=S2_CELL.replace("sep_conv_3x3", "sep_conv_5x5")), "sep_conv_5x5"),
    (dict(space="mobilenet", arch=",".join(["3x3_MBConv3"] * 21), cells=4), "cells"),
])
def test_bad_options_stop_before_anything_is_written(tmp_path, kw, needle):
    with pytest.raises(GenlabError) as info:
        retrain(RetrainConfig(epochs=1, **kw), tmp_path / "r")
    assert needle in str(info.value)
    assert not (tmp_path / "r").exists()


def test_a_retraining_no_better_than_the_majority_class_says_so(tmp_path, capsys):
    from genlab.nas.retrain import RetrainConfig, retrain

    arch = "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|avg_pool_3x3~0|none~1|nor_conv_3x3~2|"
    cfg = RetrainConfig(arch=arch, channels=4, cells=1, epochs=1, lr=1e-12, seed=0)
    s = retrain(cfg, tmp_path / "r", progress_bar=False)
    assert 0 < s["constant_test_acc"] < 20  # digits: ten balanced classes
    assert s["test_acc"] <= s["constant_test_acc"] + 1e-4  # lr ~0: it cannot learn
    assert "not above the constant predictor" in s["warning"]
    assert capsys.readouterr().err.count("genlab: warning: test accuracy") == 1
    learnt = retrain(RetrainConfig(arch=arch, channels=4, cells=1, epochs=2, seed=0),
                     tmp_path / "t", progress_bar=False)
    assert learnt["test_acc"] > learnt["constant_test_acc"] and "warning" not in learnt
