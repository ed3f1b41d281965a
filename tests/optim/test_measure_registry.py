"""A measure added from outside the package is one registered function: all_measures
computes it after the others (reading their values), `optim train` records and prints it."""

import json

import pytest
import torch
from torch import nn

import genlab.optim.measures as M
from genlab.cli import main


@pytest.fixture
def weight_norm_measure():
    @M.register_measure("toy_weight_norm", timing="toy_weight_norm")
    def weight_norm(m: M.MeasureInputs) -> dict:
        """The squared norm of the weights, and tr Sigma over it (reusing the noise pass)."""
        sq = sum(float((p.detach() ** 2).sum()) for p in m.model.parameters())
        return {"toy_weight_norm": sq, "toy_ratio": m.values["trace_sigma"] / sq}

    yield weight_norm
    M.MEASURES.unregister("toy_weight_norm")


def test_a_registered_measure_is_computed_and_reported(weight_norm_measure):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
    x, y = torch.randn(12, 1, 2, 2), torch.randint(0, 3, (12,))
    cfg = M.MeasureConfig(n_samples=12, curvature_samples=4, power_iterations=2,
                          trace_probes=2, m=4, sharpness_samples=12, ascent_steps=1, draws=1)
    out = M.all_measures(model, nn.CrossEntropyLoss(), x, y, cfg)
    by_hand = sum(float((p.detach() ** 2).sum()) for p in model.parameters())
    assert out["toy_weight_norm"] == pytest.approx(by_hand)
    assert out["toy_ratio"] == pytest.approx(out["trace_sigma"] / by_hand)
    assert "toy_weight_norm" in M.measure_names() and "toy_weight_norm" in out["seconds"]
    assert not any(k.startswith("_") for k in out)  # what one measure leaves for the next


def test_optim_train_records_and_prints_it(weight_norm_measure, tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(["optim", "train", "--epochs", "1", "--width", "8", "--measure-samples", "16",
              "--curvature-samples", "8", "--measure-iterations", "2", "--measure-probes", "2",
              "--out", str(out)])
    assert done.value.code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "toy_weight_norm" in printed
    measures = json.loads((out / "summary.json").read_text())["measures"]
    assert measures["toy_weight_norm"] > 0
