"""ber-pt (round four's candidate): the budget-relative turn, the entropy hinge, the
perturbation leaders against a hand-made supernet, and a search that resumes equal."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError
from genlab.nas.regularizers import make_regularizer
from genlab.nas.regularizers.decay import PLATEAU_WINDOW, SMOOTHING, WARMUP, PlateauTurn
from genlab.nas.regularizers.perturb_commit import entropy_hinge, perturbation_leaders
from genlab.nas.search import SearchConfig, run_search


def test_turn_for_the_budget_keeps_nb201_and_scales_the_rest():
    nb201 = PlateauTurn.for_budget(1800)
    assert (nb201.smoothing, nb201.warmup, nb201.window) == (SMOOTHING, WARMUP,
                                                            PLATEAU_WINDOW)
    s_space = PlateauTurn.for_budget(300)
    assert (s_space.warmup, s_space.window) == (17, 17)
    assert s_space.smoothing == pytest.approx(0.12)


def test_entropy_hinge_by_hand():
    assert float(entropy_hinge(torch.zeros(3, 2), 0.95)) == 0.0  # uniform: no force
    p = 1 / (1 + math.exp(-2))  # softmax of (2, 0)
    h = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    alpha = torch.tensor([[2.0, 0.0], [0.0, 0.0]], requires_grad=True)
    value = entropy_hinge(alpha, 0.95)
    assert float(value.detach()) == pytest.approx((0.95 * math.log(2) - h) / 2)  # 1 of 2 rows
    value.backward()
    assert alpha.grad[0, 0] > 0 > alpha.grad[0, 1]  # descent moves the row to uniform
    assert torch.all(alpha.grad[1] == 0)


class ToyNet(nn.Module):
    """A supernet whose logits are sum over rows and ops of w[row, op] x V[row, op]: masking
    an op removes exactly its term, so the losses can be computed by hand."""

    def __init__(self, values: torch.Tensor):
        super().__init__()
        self.values = values  # rows x ops x classes
        self.alpha = nn.Parameter(torch.zeros(values.shape[:2]))
        self.mixing_override = None

    def alphas(self):
        return {"cell": self.alpha}

    def mixing_weights(self):
        if self.mixing_override is not None:
            return self.mixing_override
        return {"cell": torch.softmax(self.alpha, -1)}

    def forward(self, x):
        w = self.mixing_weights()["cell"]
        return x[:, :1] * 0 + torch.einsum("ro,roc->c", w, self.values)


def test_perturbation_leaders_against_hand_losses():
    torch.manual_seed(0)
    values = torch.randn(3, 4, 5)
    net = ToyNet(values)
    x, y = torch.zeros(6, 1), torch.tensor([0, 1, 2, 3, 4, 0])
    leaders = perturbation_leaders(net, [(x, y)])["cell"]
    w = torch.full((3, 4), 0.25)
    for row in range(3):
        losses = []
        for op in range(4):
            masked = w.clone()
            masked[row, op] = 0.0
            logits = torch.einsum("ro,roc->c", masked, values).expand(6, 5)
            losses.append(float(F.cross_entropy(logits, y)))
        assert int(leaders[row]) == max(range(4), key=lambda k: (losses[k], -k))
    assert net.mixing_override is None  # restored


def test_settings_checked():
    with pytest.raises(ConfigError, match="rho"):
        make_regularizer("ber-pt", params={"rho": 1.5})
    with pytest.raises(ConfigError, match="batches"):
        make_regularizer("ber-pt", params={"batches": 2.5})
    assert make_regularizer("ber-pt").penalty_object.val_batches_needed == 2
    assert make_regularizer("ber-pt", params={"batches": 5}).penalty_object.val_batches_needed == 5
    pen = make_regularizer("ber-pt").penalty_object
    with pytest.raises(ConfigError, match="supernet and validation"):
        pen.lam(1.75, "constant", 0, 40, 1)
        for step in range(40):  # a flat entropy turns at the window's end: no batches given
            pen.lam(1.75, "constant", step, 40, 1)
            pen.penalty({"cell": torch.zeros(2, 3)}, _flat_probe())


def _flat_probe():
    from types import SimpleNamespace

    node = torch.tensor([[0.5], [-0.5]], dtype=torch.float64)
    return SimpleNamespace(traces=[SimpleNamespace(nodes=[node])])


@pytest.mark.parametrize("space", ["nb201", "s3"])
def test_search_turns_commits_and_resumes_equal(tmp_path, space):
    tiny = dict(space=space, channels=2, cells=1 if space == "nb201" else 2, batch_size=32,
                hessian_points=0, diag_batch=16, steps=40, reg="ber-pt", seed=0)
    cfg = SearchConfig(**tiny)
    full = run_search(cfg, tmp_path / "full")
    assert full["reg_resolved"]["name"] == "ber-pt"
    import json
    lams = [json.loads(line)["lambda"] for line in
            (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert lams[-1] == 1.75  # committed within the budget (the hold is 100)
    run_search(cfg, tmp_path / "part", stop_at=29)
    resumed = run_search(cfg, tmp_path / "part", resume=True)
    assert resumed["alpha"] == full["alpha"]
