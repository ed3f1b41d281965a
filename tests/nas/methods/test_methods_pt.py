"""DARTS-PT selection (genlab.nas.methods.pt) against closed forms.

The stand-in supernet's accuracy is analytic: every sample is class 0, whose logit is the
signal S = sum over rows r and ops k of w[r, k] * v[r, k] (w the mixing weights, v a value
table), against a class-1 logit d_i (the sample's difficulty, spread finely over [0, S_max]).
Sample i is right iff S > d_i, so the accuracy rises strictly with S; masking op k of row r
lowers S by w[r, k] v[r, k] whatever the other rows hold. Hence PT's op on row r is
argmax_k w[r, k] v[r, k] (the first on a tie), and in the edge pass (rows one-hot on their
ops) the two inputs of a node with the largest v[r, op_r] are kept."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import genlab.nas.search as search_mod
from genlab.core.errors import ConfigError
from genlab.nas.methods import SELECTIONS, build_parts, get_method
from genlab.nas.methods import pt as pt_mod
from genlab.nas.spaces import get_space
from genlab.nas.spaces.base import AlphaSupernet
from genlab.nas.spaces.darts.genotype import edge_row


class AnalyticNet(AlphaSupernet):
    """The stand-in supernet of the module docstring (alphas named as the space's)."""

    def __init__(self, space, values: dict[str, torch.Tensor], alphas: dict[str, torch.Tensor]):
        super().__init__()
        self.names = list(space.alpha_specs())
        self.values = values
        for name in self.names:
            self.register_parameter(f"alpha_{name}", nn.Parameter(alphas[name].clone()))

    def alphas(self):
        return {n: getattr(self, f"alpha_{n}") for n in self.names}

    def forward(self, x):
        w = self.mixing_weights()
        signal = sum((w[n] * self.values[n]).sum() for n in self.names)
        logits = torch.zeros(len(x), 10)
        logits[:, 0] = signal
        logits[:, 1] = x[:, 0]
        return logits


def batches(values: dict[str, torch.Tensor], n: int = 20000):
    s_max = sum(float(v.sum()) for v in values.values()) + 1.0  # above every reachable S
    d = torch.linspace(0.0, s_max, n).unsqueeze(1)
    return [(d, torch.zeros(n, dtype=torch.long))]


def score_of(net, data):
    return lambda weights: pt_mod.evaluate(net, weights, data)


def nb201_case():
    """Each edge's signal op is `sig[e]`, while alpha favours another op (argmax differs)."""
    space = get_space("nb201")
    sig = [3, 1, 2, 4, 3, 2]
    values = torch.zeros(6, 5)
    alpha = torch.zeros(6, 5)
    for e, k in enumerate(sig):
        values[e, k] = 1.0 + 0.1 * e
        alpha[e, (k + 1) % 5] = 2.0  # the favoured op carries no signal
    return space, sig, {"cell": values}, {"cell": alpha}


def test_pt_picks_the_op_that_carries_the_signal_where_argmax_does_not():
    space, sig, values, alpha = nb201_case()
    net = AnalyticNet(space, values, alpha)
    records = []
    proj = pt_mod.run_projection(space, net, score_of(net, batches(values)),
                                 np.random.RandomState(3), log=records.append)
    genotype = pt_mod.projected_genotype(space, proj)
    ops = space.alpha_specs()["cell"].ops[0]
    expected = space.derive({"cell": torch.nn.functional.one_hot(torch.tensor(sig), 5) * 9.0})
    assert [ops[k] for k in sig] == [ops[proj.fixed["cell"][e]] for e in range(6)]
    assert genotype == expected != space.derive(net.alphas())
    assert space.parse(space.format(genotype)) == genotype
    # the rows in the order of numpy's draws over the undecided rows (upstream's choice)
    rng, left, order = np.random.RandomState(3), list(range(6)), []
    for _ in range(6):
        order.append(int(rng.choice(left, size=1)[0]))
        left.remove(order[-1])
    assert [r["row"] for r in records] == order
    # each record says why: removing the signal op gives the lowest accuracy of the row
    for r in records:
        accs = {op: s["val_acc"] for op, s in r["removed"].items()}
        assert r["op"] == min(accs, key=accs.get) == ops[sig[r["row"]]]
        assert r["select"] == "pt" and r["pass"] == "op" and r["edge"] == space.edges[r["row"]]


def test_op_ties_take_the_first_op_and_loss_crit_agrees():
    space, sig, values, alpha = nb201_case()
    values["cell"][2] = 0.0  # edge 2 carries nothing: every removal scores the same
    net = AnalyticNet(space, values, alpha)
    data = batches(values)
    for crit in ("acc", "loss"):
        proj = pt_mod.run_projection(space, net, score_of(net, data),
                                     np.random.RandomState(0), crit)
        got = [proj.fixed["cell"][e] for e in range(6)]
        assert got == [0 if e == 2 else k for e, k in enumerate(sig)], crit


def darts_case(space):
    """Values: on every row one op (not the alpha's favourite) carries v; inputs' strengths
    differ per row so that each node's best two inputs are known; node 5's inputs tie."""
    specs = space.alpha_specs()
    values, alpha, expect = {}, {}, {}
    gen = torch.Generator().manual_seed(0)
    for c, name in enumerate(specs):
        k = specs[name].shape[1]
        v, a = torch.zeros(14, k), torch.zeros(14, k)
        ops = {}
        for r in range(14):
            ops[r] = 1 + int(torch.randint(k - 1, (1,), generator=gen))  # never column 0
            a[r, (ops[r] % (k - 1)) + 1] = 3.0  # alpha's favourite carries no signal
            v[r, ops[r]] = 1.0 + ((r * 7 + 3 * c) % 11) / 4
        for j in range(5):  # node 5 (index 3): equal inputs; ties keep the first two
            v[edge_row(3, j), ops[edge_row(3, j)]] = 2.0
        values[name], alpha[name], expect[name] = v, a, ops
    return values, alpha, expect


@pytest.mark.parametrize("space_name", ["darts", "s3"])
def test_darts_edge_pass_keeps_the_two_inputs_whose_removal_hurts_most(space_name):
    space = get_space(space_name)
    values, alpha, ops = darts_case(space)
    net = AnalyticNet(space, values, alpha)
    records = []
    proj = pt_mod.run_projection(space, net, score_of(net, batches(values)),
                                 np.random.RandomState(1), log=records.append)
    genotype = pt_mod.projected_genotype(space, proj)
    assert space.parse(space.format(genotype)) == genotype
    assert genotype != space.derive(net.alphas())
    assert sum(r["pass"] == "op" for r in records) == 28
    assert sorted((r["alpha"], r["node"]) for r in records if r["pass"] == "edge") == \
        sorted((c, n) for c in ("normal", "reduce") for n in (3, 4, 5))
    for cell, name in zip(("normal", "reduce"), space.alpha_specs(), strict=True):
        v = values[name]
        genes = genotype.genes(cell)
        for node in range(4):
            strength = {j: float(v[edge_row(node, j), ops[name][edge_row(node, j)]])
                        for j in range(node + 2)}
            # stable sort by strength: a tie keeps the lower input (upstream drops the last)
            keep = sorted(sorted(strength, key=lambda j: -strength[j])[:2])
            assert sorted(j for _, j in genes[2 * node:2 * node + 2]) == keep, (cell, node)
            for op, j in genes[2 * node:2 * node + 2]:
                assert op == space.edge_ops[cell][edge_row(node, j)][ops[name][edge_row(node,
                                                                                        j)]]
        assert len(proj.dropped[name]) == 14 - 8  # two inputs per node remain
    tie = [r for r in records if r["pass"] == "edge" and r["node"] == 5]
    assert all(r["kept"] == ["5<-0", "5<-1"] for r in tie)


def test_selection_params_and_registry():
    sel = SELECTIONS.get("pt")(tune_epochs=0, val_batches=2, crit="loss")
    assert (sel.tune_epochs, sel.val_batches, sel.crit) == (0, 2, "loss")
    default = build_parts(get_method("darts"), select="pt").selection
    assert (default.tune_epochs, default.val_batches, default.crit) == (5, 4, "acc")
    for bad in ({"tune_epochs": -1}, {"val_batches": 0}, {"crit": "f1"}, {"epochs": 3}):
        with pytest.raises(ConfigError):
            SELECTIONS.get("pt")(**bad)
    given = build_parts(get_method("darts"), select="pt", select_params={"val_batches": 3})
    assert given.selection.val_batches == 3
    with pytest.raises(ConfigError, match="argmax takes no parameters"):
        build_parts(get_method("darts"), select="argmax", select_params={"val_batches": 3})


def test_fine_tuning_moves_only_the_weights_at_a_tenth_of_the_lr(monkeypatch):
    """Between rounds a fresh SGD at w_lr / 10 steps the weights on the projected weights."""
    space = get_space("nb201")
    net = space.build_supernet(num_classes=10, in_channels=1, channels=4, cells=1)
    alphas = {n: a.detach().clone() for n, a in net.alphas().items()}
    before = [p.detach().clone() for p in net.weight_parameters()]
    gen = torch.Generator().manual_seed(0)
    data = [(torch.randn(8, 1, 8, 8, generator=gen), torch.randint(10, (8,), generator=gen))
            for _ in range(3)]
    seen = []

    def train_batch(step):
        seen.append(step)
        return data[step % 3]

    # train: the split's batches (its len is a pass); w_opt: the search's optimiser
    ctx = SimpleNamespace(net=net, train=data, train_batch=train_batch,
                          w_opt=torch.optim.SGD(net.weight_parameters(), lr=0.5, momentum=0.9,
                                                weight_decay=3e-4),
                          cfg=SimpleNamespace(steps=10, w_lr=0.025, grad_clip=5.0, seed=0))
    real_sgd = torch.optim.SGD
    made = []
    monkeypatch.setattr(pt_mod.torch.optim, "SGD",
                        lambda *a, **k: made.append(k) or real_sgd(*a, **k))
    tune = pt_mod.PTSelection(tune_epochs=2)._tuner(ctx)
    proj = pt_mod.Projection(net)
    proj.fixed["cell"][0] = 3
    tune(proj)
    assert made == [{"lr": 0.0025, "momentum": 0.9, "weight_decay": 3e-4}]
    assert seen == list(range(10, 16))  # 2 passes of 3 batches, after the search's steps
    assert any(not torch.equal(a, b) for a, b in zip(before, net.weight_parameters(),
                                                     strict=True))
    assert all(torch.equal(alphas[n], a) for n, a in net.alphas().items())
    assert net.mixing_override is None


@pytest.fixture
def quick_pt(monkeypatch):
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)
    monkeypatch.setattr(search_mod, "_plots", lambda run, history, space: None)
    monkeypatch.setattr(pt_mod.PTSelection, "val_batches", 1)


def _search(tmp_path, space, batch, *extra):
    from genlab.cli import main

    out = tmp_path / f"{space}{'-'.join(extra)}"
    argv = ["nas", "search", "--space", space, "--select", "pt", "--steps", "4", "-C", "4",
            "--size", "8", "--batch-size", str(batch), "--hessian-points", "0", "--out",
            str(out), *extra]
    try:
        main(argv)
    except SystemExit as exc:
        assert not exc.code
    summary = json.loads((out / "summary.json").read_text())
    metrics = [json.loads(ln) for ln in (out / "selection.jsonl").read_text().splitlines()]
    return summary, [m for m in metrics if m.get("select") == "pt"]


@pytest.mark.parametrize("space, extra, rounds", [
    ("nb201", ("-N", "1"), 6),
    ("s3", ("-N", "2"), 14 + 3),
    ("darts", ("-N", "1", "--method", "beta"), 14 + 3),
])
def test_cli_search_with_pt_in_nb201_darts_s3(tmp_path, quick_pt, monkeypatch, space, extra,
                                              rounds):
    # fine-tuning (1 pass of 11 batches of 64) in nb201; off in the costlier DARTS spaces
    tune = 1 if space == "nb201" else 0
    s, records = _search(tmp_path, space, 64 if space == "nb201" else 8, *extra,
                         "--select-param", f"tune_epochs={tune}")
    config = json.loads(next(tmp_path.glob(f"{space}*/config.json")).read_text())
    assert config["select_params"] == {"tune_epochs": tune}
    sp = get_space(space)
    assert s["select"] == "pt" and sp.format(sp.parse(s["genotype"])) == s["genotype"]
    assert max(r["round"] for r in records) == rounds - 1
    if "--method" in extra:
        assert s["method"] == "beta" and s["reg"] == "beta"
    # the genotype is the decisions': each op record's edge carries the op it fixed (the
    # edges the edge pass kept, in the DARTS spaces)
    if space == "nb201":
        text = s["genotype"]
        assert all(f"{r['op']}~{r['edge'].split('<-')[1]}" in text for r in records)


def test_mobilenet_blocks_are_the_rows_of_the_op_pass():
    """Ours: every block (both alpha tensors, of different lengths) gets one op decision."""
    space = get_space("mobilenet")
    specs = space.alpha_specs()
    gen = torch.Generator().manual_seed(1)
    values = {n: torch.rand(s.shape, generator=gen) for n, s in specs.items()}
    alpha = {n: 2.0 * torch.randn(s.shape, generator=gen) for n, s in specs.items()}
    net = AnalyticNet(space, values, alpha)
    records = []
    proj = pt_mod.run_projection(space, net, score_of(net, batches(values)),
                                 np.random.RandomState(0), log=records.append)
    genotype = pt_mod.projected_genotype(space, proj)
    assert space.parse(space.format(genotype)) == genotype
    assert len(records) == sum(s.shape[0] for s in specs.values())
    assert {r["pass"] for r in records} == {"op"}
    for name, s in specs.items():
        w = torch.softmax(alpha[name], dim=-1)
        assert [proj.fixed[name][r] for r in range(s.shape[0])] == \
            (w * values[name]).argmax(dim=1).tolist(), name
    onehot = {n: torch.nn.functional.one_hot(torch.tensor([proj.fixed[n][r] for r in
                                                           range(s.shape[0])]),
                                             s.shape[1]) * 9.0 for n, s in specs.items()}
    assert genotype == space.derive(onehot)
