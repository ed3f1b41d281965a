"""Parts register themselves: a penalty or an optimiser defined outside genlab's modules is
one class plus one registration, and the command line and the studies see it."""

from __future__ import annotations

import pytest
import torch

from genlab.core.errors import ConfigError
from genlab.nas.regularizers import PENALTIES, make_regularizer
from genlab.nas.regularizers.base import Penalty, per_alpha_sum, register_penalty
from genlab.optim.optimizers.registry import (
    OPTIMIZER_REGISTRY,
    OptimizerEntry,
    register_optimizer,
)


@pytest.fixture()
def toy_penalty():
    @register_penalty
    class SquaredLogits(Penalty):
        """Toy: scale x sum of squared logits."""

        name = "toy-squares"
        params = {"scale": 1.0}

        def penalty(self, alphas, probe=None, val_loss=None, labels=None):
            return self.scale * per_alpha_sum(lambda a: (a ** 2).sum(), alphas)

    yield SquaredLogits
    PENALTIES.unregister("toy-squares")


def test_a_registered_penalty_runs_with_its_parameters(toy_penalty):
    alpha = torch.tensor([[1.0, -2.0], [0.5, 0.0]])
    reg = make_regularizer("toy-squares", strength=1.0, schedule="constant",
                           params={"scale": 3.0})
    assert float(reg.penalty(alpha)) == pytest.approx(3.0 * (1 + 4 + 0.25))  # by hand
    with pytest.raises(ConfigError, match="toy-squares has no such setting; its settings: "
                                          "scale"):
        make_regularizer("toy-squares", params={"sacle": 3.0})


def test_the_search_command_lists_and_takes_it(toy_penalty, capsys):
    from genlab.cli import main
    from genlab.nas.search import SearchConfig

    with pytest.raises(SystemExit):
        main(["nas", "search", "--help"])
    assert "toy-squares" in "".join(capsys.readouterr().out.split())
    cfg = SearchConfig(reg="toy-squares", reg_params={"scale": 2.0}, steps=1)
    cfg.validate()


def test_an_optimiser_with_a_radius_must_give_its_search_radii():
    with pytest.raises(ConfigError, match="no search_radii"):
        register_optimizer("toy-sam", OptimizerEntry(torch.optim.SGD, radius="rho"))
    assert "toy-sam" not in OPTIMIZER_REGISTRY


def test_a_registered_optimiser_gets_its_grid_row():
    from genlab.optim.studies.search import SearchGrid

    register_optimizer("toy-sgd", OptimizerEntry(torch.optim.SGD, radius="momentum",
                                                  search_radii=(0.0, 0.9)))
    try:
        radii = {o: e.search_radii for o, e in OPTIMIZER_REGISTRY.items() if e.radius}
        grid = SearchGrid(sgd_lrs=(0.1,), lrs=(0.01, 0.1), radii=radii)
        assert grid.trials("toy-sgd") == [{"lr": lr, "momentum": r} for lr in (0.01, 0.1)
                                          for r in (0.0, 0.9)]
    finally:
        OPTIMIZER_REGISTRY.unregister("toy-sgd")


class _KnobSGD(torch.optim.SGD):
    """An optimiser defined outside genlab with a setting of its own (``damp``)."""

    seen: list[float] = []

    def __init__(self, params, lr=0.1, momentum=0.0, weight_decay=0.0, damp=0.5, **kw):
        _KnobSGD.seen.append(damp)
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay)


def test_a_registered_optimiser_with_its_own_setting_is_reached_from_the_cli(tmp_path, capsys):
    from genlab.cli import main

    register_optimizer("toy-knob", OptimizerEntry(_KnobSGD))
    try:
        args = ["optim", "train", "--optimizer", "toy-knob", "--epochs", "1", "--width", "8",
                "--no-measure"]
        with pytest.raises(SystemExit) as done:
            main([*args, "--optimizer-param", "damp=0.25", "--out", str(tmp_path / "a")])
        assert done.value.code == 0, capsys.readouterr().err
        assert _KnobSGD.seen[-1] == 0.25  # its own setting reached its constructor
        with pytest.raises(SystemExit) as done:
            main([*args, "--optimizer-param", "dmap=0.25", "--out", str(tmp_path / "b")])
        err = capsys.readouterr().err
        assert done.value.code == 2 and "dmap" in err and "damp" in err
        assert not (tmp_path / "b").exists()
    finally:
        OPTIMIZER_REGISTRY.unregister("toy-knob")
