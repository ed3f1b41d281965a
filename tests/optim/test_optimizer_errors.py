"""The library's edges (issue 48): make_optimizer and the optimiser classes refuse a missing
or unknown setting with a ConfigError naming it and its default; the loss step(closure)
returns is detached, as a plain training loop (davda54/sam style) uses it."""

import warnings

import pytest
import torch
from torch import nn

from genlab.core.errors import ConfigError
from genlab.optim.optimizers.cov import COV
from genlab.optim.optimizers.csam import CSAM_Identity
from genlab.optim.optimizers.registry import OPTIMIZERS, make_optimizer
from genlab.optim.optimizers.sam import SAM
from genlab.optim.training.train import TrainConfig


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def test_cov_without_lam_names_it_and_the_command_lines_default():
    with pytest.raises(ConfigError) as err:
        make_optimizer("cov", _model().parameters(), lr=0.1)
    assert str(err.value) == (f"COV: missing setting 'lam', the weight of the covariance "
                              f"penalty (genlab optim train's default: {TrainConfig().lam!r}); "
                              f"pass lam={TrainConfig().lam!r}")
    with pytest.raises(ConfigError, match="missing setting 'lr'"):
        COV(_model().parameters(), lam=0.1)


@pytest.mark.parametrize(("name", "typo", "meant", "default"), [
    ("sgd", "lrr", "lr", torch.optim.SGD([torch.zeros(1)]).defaults["lr"]),
    ("sam", "rh0", "rho", 0.05),
    ("cov", "lamda", "lam", "required"),
    ("samgcm", "xii", "xi", 1e-6),
])
def test_a_misspelt_setting_is_named_with_the_one_meant(name, typo, meant, default):
    model = _model()
    kw = {"lr": 0.1, typo: 1.0, "model": model}
    if name == "cov":
        kw["lam"] = 0.1
    with pytest.raises(ConfigError) as err:
        make_optimizer(name, model.parameters(), **kw)
    line = str(err.value)
    assert "\n" not in line
    shown = default if default == "required" else repr(default)
    assert f"unknown setting '{typo}' (did you mean {meant}, default {shown}?)" in line


def test_every_optimizer_refuses_an_unknown_setting():
    for name in OPTIMIZERS:
        model = _model()
        with pytest.raises(ConfigError, match="unknown setting 'no_such_setting'"):
            make_optimizer(name, model.parameters(), lr=0.1, lam=0.1, no_such_setting=1,
                           model=model) if name == "cov" else \
                make_optimizer(name, model.parameters(), lr=0.1, no_such_setting=1,
                               model=model)


def test_the_classes_refuse_a_misspelt_base_setting():
    with pytest.raises(ConfigError, match="unknown setting 'momentun' \\(did you mean "
                                          "momentum"):
        SAM(_model().parameters(), lr=0.1, momentun=0.9)
    with pytest.raises(ConfigError, match="unknown setting 'wd'"):
        CSAM_Identity(_model().parameters(), lr=0.1, wd=0.1)


@pytest.mark.parametrize("cls", [SAM, CSAM_Identity])
def test_a_plain_loop_gets_a_detached_loss_equal_to_the_first_pass(cls):
    model = _model()
    x, y = torch.randn(16, 4, generator=torch.Generator().manual_seed(1)), torch.arange(16) % 3
    with torch.no_grad():
        before = nn.functional.cross_entropy(model(x), y).item()  # the loss at w
    opt = cls(model.parameters(), lr=0.1, momentum=0.9)

    def closure():
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float() of a tensor that requires grad warns
        loss = opt.step(closure)
        value = float(loss)
    assert not loss.requires_grad and loss.grad_fn is None
    assert value == pytest.approx(before, rel=1e-6)
