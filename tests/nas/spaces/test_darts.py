"""DARTS-family spaces: genotype text, derivation, fused vs per-edge supernet, networks."""

import random

import pytest
import torch
import torch.nn.functional as F
from nas_reference import DARTS_V1, DARTS_V2

import genlab.nas.supernet.ops as ops_mod
from genlab.core.errors import SpecError
from genlab.nas import build_darts_network, get_space
from genlab.nas.spaces.darts.genotype import DartsGenotype, parse_darts_genotype
from genlab.nas.spaces.darts.network import drop_path
from genlab.nas.spaces.nb201.network import count_parameters
from genlab.nas.supernet.probe import CellTraces

# Published DARTS- genotypes (CIFAR-10, RobustDARTS S1-S4), as printed upstream (range concat)
PUBLISHED = {
    "s1": "Genotype(normal=[('skip_connect', 1), ('dil_conv_3x3', 0), ('sep_conv_3x3', 1), "
          "('dil_conv_3x3', 2), ('skip_connect', 0), ('sep_conv_3x3', 1), ('skip_connect', 1), "
          "('dil_conv_3x3', 3)], normal_concat=range(2, 6), reduce=[('max_pool_3x3', 0), "
          "('max_pool_3x3', 1), ('max_pool_3x3', 1), ('max_pool_3x3', 0), ('skip_connect', 2), "
          "('max_pool_3x3', 0), ('max_pool_3x3', 1), ('skip_connect', 3)], "
          "reduce_concat=range(2, 6))",
    "s2": "Genotype(normal=[('sep_conv_3x3', 1), ('sep_conv_3x3', 0), ('sep_conv_3x3', 1), "
          "('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0), ('skip_connect', 1), "
          "('sep_conv_3x3', 0)], normal_concat=range(2, 6), reduce=[('sep_conv_3x3', 1), "
          "('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('skip_connect', 2), ('skip_connect', 2), "
          "('skip_connect', 3), ('skip_connect', 2), ('skip_connect', 3)], "
          "reduce_concat=range(2, 6))",
    "s4": "Genotype(normal=[('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0), "
          "('sep_conv_3x3', 1), ('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0), "
          "('noise', 3)], normal_concat=range(2, 6), reduce=[('sep_conv_3x3', 0), "
          "('sep_conv_3x3', 1), ('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 1), "
          "('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0)], "
          "reduce_concat=range(2, 6))",
}


# -- genotype text ----------------------------------------------------------------------------
@pytest.mark.parametrize("text", [DARTS_V1, DARTS_V2])
def test_upstream_text_round_trips_exactly(text):
    g = get_space("darts").parse(text)
    assert g.normal[7] == (("dil_conv_3x3", 2) if text == DARTS_V2 else ("skip_connect", 2))
    assert g.normal_concat == g.reduce_concat == (2, 3, 4, 5)
    assert get_space("darts").format(g) == text


@pytest.mark.parametrize("space", sorted(PUBLISHED))
def test_published_genotypes_parse_in_their_space_only(space):
    text = PUBLISHED[space]
    g = get_space(space).parse(text)
    assert g.reduce_concat == (2, 3, 4, 5)  # range(2, 6) read without evaluating anything
    assert get_space(space).parse(get_space(space).format(g)) == g
    other = {"s1": "s2", "s2": "s4", "s4": "s2"}[space]
    with pytest.raises(SpecError, match="is not in space"):
        get_space(other).parse(text)


@pytest.mark.parametrize("bad, token", [
    (DARTS_V2.replace("('dil_conv_3x3', 2)", "('conv_9x9', 2)"), "conv_9x9"),
    (DARTS_V2.replace("('dil_conv_3x3', 2)", "('dil_conv_3x3', 6)"), "input index 6"),
    (DARTS_V2.replace("('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0)",
                      "('sep_conv_3x3', 0), ('sep_conv_3x3', 2), ('sep_conv_3x3', 0)", 1),
     "input index 2"),
    (DARTS_V2.replace(", ('dil_conv_3x3', 2)]", "]"), "7 (op, input) genes"),
    (DARTS_V2.replace("('dil_conv_3x3', 2)", "('dil_conv_3x3', 'two')"), "'two'"),
    (DARTS_V2.replace("reduce_concat=[2, 3, 4, 5]", "reduce_concat=[2, 9]"), "index 9"),
    (DARTS_V2.replace("reduce_concat=[2, 3, 4, 5])", "reduce_concat=[2, 3, 4, 5]"),
     "not readable"),
    ("Genotype(normal=[], normal_concat=[2])", "reduce"),
    ("__import__('os').system('true')", "Genotype("),
    ("", "empty"),
])
def test_malformed_genotypes_name_the_token(bad, token):
    with pytest.raises(SpecError) as info:
        get_space("darts").parse(bad)
    assert token in str(info.value)


def test_s3_none_allowed_but_not_in_the_7op_space():
    text = DARTS_V2.replace("('dil_conv_3x3', 2)", "('none', 2)")
    assert get_space("darts").parse(text).normal[7] == ("none", 2)
    with pytest.raises(SpecError, match="'none'"):
        get_space("darts-7op").parse(text)


# -- derivation -------------------------------------------------------------------------------
def brute_force_cell(w, edge_ops):
    """Independent derivation: per node, try every pair of inputs and keep the best two."""
    genes, row = [], 0
    for node in range(4):
        scored = []
        for j in range(node + 2):
            ops = edge_ops[row + j]
            ks = [k for k, o in enumerate(ops) if o != "none"] or list(range(len(ops)))
            best_k = max(ks, key=lambda k: (w[row + j][k], -k))  # first maximum wins
            scored.append((-w[row + j][best_k], j, ops[best_k]))
        scored.sort(key=lambda t: (t[0], t[1]))  # stable: ties keep the lower input first
        genes += [(op, j) for _, j, op in scored[:2]]
        row += node + 2
    return tuple(genes)


@pytest.mark.parametrize("space", ["darts", "darts-7op", "s1", "s2", "s3", "s4"])
def test_derivation_matches_brute_force(space):
    sp = get_space(space)
    gen = torch.Generator().manual_seed(0)
    for trial in range(40):
        alphas = {name: torch.randn(spec.shape, generator=gen) * (trial % 4 + 0.1)
                  for name, spec in sp.alpha_specs().items()}
        g = sp.derive(alphas)
        for cell in ("normal", "reduce"):
            w = torch.softmax(alphas[cell], -1).double().tolist()
            assert g.genes(cell) == brute_force_cell(w, sp.edge_ops[cell]), (space, trial)


def test_none_never_chosen_but_ranks_s3_edges_by_the_rest():
    sp = get_space("s3")  # ops: none, skip_connect, sep_conv_3x3
    alphas = {c: torch.zeros(14, 3) for c in ("normal", "reduce")}
    alphas["normal"][:, 0] = 10.0  # none dominates every edge
    alphas["normal"][1, 2] = 1.0  # edge 2<-1: sep_conv_3x3 best among the rest
    g = sp.derive(alphas)
    assert all(op != "none" for op, _ in g.normal)
    assert g.normal[0] == ("sep_conv_3x3", 1)
    s2 = get_space("s2")  # no none: skip_connect can rank and win
    al = {c: torch.zeros(14, 2) for c in ("normal", "reduce")}
    al["normal"][:, 0] = 3.0
    assert s2.op_counts(s2.derive(al)) == {"param_free_ops": 8, "skip_ops": 8}


# -- supernets --------------------------------------------------------------------------------
def _pair(space, seed=0, C=4, cells=3):
    sp = get_space(space)
    torch.manual_seed(seed)
    ref = sp.build_supernet(num_classes=5, in_channels=1, channels=C, cells=cells,
                            per_edge=True).double()
    ours = sp.build_supernet(num_classes=5, in_channels=1, channels=C, cells=cells).double()
    with torch.no_grad():
        for a in ref.arch_parameters():
            a.normal_()
    ours.load_per_edge(ref)
    return ours, ref


@pytest.fixture
def fixed_noise(monkeypatch):
    """The noise op returns a fixed function of its shape, so both layouts see the same."""
    def noise(shape, like):
        n = torch.arange(torch.Size(shape).numel(), dtype=like.dtype).reshape(shape)
        return torch.sin(n).to(like.device)

    monkeypatch.setattr(ops_mod, "draw_noise", noise)
    monkeypatch.setattr("genlab.nas.spaces.darts.fused.draw_noise", noise)


@pytest.mark.parametrize("space", ["darts", "s1", "s3", "s4"])
def test_fused_equals_per_edge_logits_grads_and_bn_state(space, fixed_noise):
    ours, ref = _pair(space)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 1, 8, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, 5, (6,), generator=g)
    lo, lr = ours(x), ref(x)
    torch.testing.assert_close(lo, lr, atol=1e-10, rtol=1e-9)
    F.cross_entropy(lo, y).backward()
    F.cross_entropy(lr, y).backward()
    for a, b in zip(ours.arch_parameters(), ref.arch_parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=1e-8)
    outside = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        if ".core." not in name and not name.startswith("alphas"):
            torch.testing.assert_close(p.grad, outside[name].grad, atol=1e-10, rtol=1e-8)
    for mine, theirs in zip(ours.cells, ref.cells, strict=True):
        expected = mine.core.per_edge_tensors(theirs.core, "grad")
        for name, grad in mine.core.grads().items():
            torch.testing.assert_close(grad, expected[name], atol=1e-10, rtol=1e-8, msg=name)
        state = mine.core.per_edge_tensors(theirs.core)  # BN statistics after the forward
        for name, value in state.items():
            if "_bn" in name:
                torch.testing.assert_close(getattr(mine.core, name), value)
    ours.eval()
    ref.eval()
    torch.testing.assert_close(ours(x), ref(x), atol=1e-10, rtol=1e-9)


def test_probe_nodes_and_unscaled_ops_match_the_reference(fixed_noise):
    ours, ref = _pair("s3")
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    p_ours, p_ref = CellTraces(ops=True), CellTraces(ops=True)
    torch.testing.assert_close(ours(x, probe=p_ours), ref(x, probe=p_ref))
    assert [t.alpha for t in p_ours.traces] == ["normal", "reduce", "reduce"]
    for a, b in zip(p_ours.traces, p_ref.traces, strict=True):
        assert len(a.inputs) == 2 and len(a.nodes) == 4
        torch.testing.assert_close(a.output, torch.cat(a.nodes, 1))
        for u, v in zip(a.nodes, b.nodes, strict=True):
            torch.testing.assert_close(u, v, atol=1e-10, rtol=1e-9)
    assert set(p_ours.ops) == set(p_ref.ops) and len(p_ours.ops) == 3 * 14 * 3
    for key, value in p_ours.ops.items():
        if key[3] == 0:  # none
            assert value is None and p_ref.ops[key] is None
        else:
            torch.testing.assert_close(value, p_ref.ops[key], atol=1e-10, rtol=1e-9)
    grad = torch.autograd.grad(p_ours.traces[1].nodes[2].sum(), ours.alphas()["reduce"])[0]
    assert grad.abs().sum() > 0


def test_noise_op_ignores_input_no_grad_also_in_eval():
    op = ops_mod.build_op("noise", 3, 3, 2, affine=True)
    x = torch.randn(2, 3, 7, 7, requires_grad=True)
    op.eval()
    out = op(x)
    assert out.shape == (2, 3, 4, 4) and not out.requires_grad
    assert not torch.equal(out, op(x)) and abs(float(op(torch.zeros(64, 3, 8, 8)).std()) - 1) < 0.05


# -- evaluation networks ------------------------------------------------------------------------
def test_darts_v2_parameter_count():
    net = build_darts_network(DARTS_V2, 10, C=36, layers=20, auxiliary=True, drop_path=0.2)
    assert count_parameters(net) == 3_349_342  # upstream count_parameters_in_MB: 3.35
    assert sum(p.numel() for p in net.parameters()) == 3_349_342 + 476_426  # + auxiliary head
    plain = build_darts_network(get_space("darts").parse(DARTS_V2), 10, auxiliary=False)
    assert sum(p.numel() for p in plain.parameters()) == 3_349_342
    assert not any("auxiliary" in name for name, _ in plain.named_parameters())


def test_cifar_and_imagenet_layouts_run():
    net = build_darts_network(DARTS_V2, 10, C=8, layers=5, auxiliary=True)
    net.train()
    logits, aux = net(torch.randn(2, 3, 32, 32))
    assert logits.shape == aux.shape == (2, 10)
    net.eval()
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    small = build_darts_network(DARTS_V2, 10, C=4, layers=5, in_channels=1).train()
    assert small(torch.randn(2, 1, 8, 8))[1].shape == (2, 10)  # adaptive aux pool at 2x2
    imnet = build_darts_network(DARTS_V2, 7, C=8, layers=4, layout="imagenet").train()
    assert imnet(torch.randn(2, 3, 64, 64))[0].shape == (2, 7)


def test_drop_path_zeroes_whole_samples_and_keeps_the_mean():
    torch.manual_seed(0)
    x = torch.ones(4000, 2, 3, 3, dtype=torch.float64)
    y = drop_path(x, 0.3)
    per_sample = y.flatten(1)
    assert set(per_sample.unique().tolist()) == {0.0, 1 / 0.7}
    assert torch.all(per_sample.min(1).values == per_sample.max(1).values)
    assert abs(float(y.mean()) - 1) < 0.05


def test_eval_cell_skips_drop_path_on_identities():
    g = DartsGenotype(normal=(("skip_connect", 0), ("skip_connect", 1)) * 4,
                      normal_concat=(2, 3, 4, 5), reduce=(("max_pool_3x3", 0),) * 8,
                      reduce_concat=(2, 3, 4, 5))
    net = build_darts_network(g, 3, C=4, layers=3, auxiliary=False, drop_path=0.99).train()
    normal = net.cells[0]  # cells: normal, reduce, reduce
    s = torch.randn(5, 12, 6, 6)
    out = normal(s, s, 0.99)
    pre = normal.preprocess0(s) + normal.preprocess1(s)
    for node in range(4):  # identities are never dropped (upstream rule)
        torch.testing.assert_close(out[:, 4 * node:4 * node + 4], pre)


def test_random_genotypes_round_trip_and_build():
    rng = random.Random(0)
    sp = get_space("s1")
    for _ in range(20):
        genes = {}
        for cell in ("normal", "reduce"):
            cell_genes, row = [], 0
            for node in range(4):
                for j in rng.sample(range(node + 2), 2):
                    cell_genes.append((rng.choice(sp.edge_ops[cell][row + j]), j))
                row += node + 2
            genes[cell] = tuple(cell_genes)
        g = DartsGenotype(genes["normal"], (2, 3, 4, 5), genes["reduce"], (2, 3, 4, 5))
        assert sp.parse(sp.format(g)) == g == parse_darts_genotype(g.to_string())
