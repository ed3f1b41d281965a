"""Per-cell activation checkpointing (SearchConfig.checkpoint_cells): a checkpointed forward
and backward give the plain one's logits, alpha and weight gradients, BN running statistics
and generator state, with the random draws inside the cells (drop-path masks, S4's noise)
replayed; every cell runs twice (forward, then again in the backward); a search with it equals
one without, first and second order."""

import copy

import pytest
import torch
import torch.nn.functional as F

from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import get_space

CASES = {  # space, supernet options, knobs
    "darts": ("darts", {}, {}),
    "pc-darts with drop-path": ("darts", {"partial_channels": 4, "edge_norm": True,
                                          "drop_path": True}, {"drop_prob": 0.4}),
    "darts-minus": ("darts", {"aux_skip": True}, {"aux_scale": 0.5}),
    "gdas": ("darts", {"sampled": True}, {}),
    "s4 noise and drop-path": ("s4", {"drop_path": True}, {"drop_prob": 0.3}),
    "nb201 rdarts-dp": ("nb201", {"drop_path": True}, {"drop_prob": 0.3}),
    "nb201 per edge": ("nb201", {"per_edge": True}, {}),
    "mobilenet rdarts-dp": ("mobilenet", {"drop_path": True}, {"drop_prob": 0.3}),
}


def _net(space, options, knobs, C=8):
    sp = get_space(space)
    torch.manual_seed(0)
    kw = {**sp.proxy.options, "num_classes": 5, "in_channels": 1, "channels": C, **options}
    if sp.proxy.cells is not None:
        kw["cells"] = 3
    net = sp.build_supernet(**kw).double()
    with torch.no_grad():
        for a in net.arch_parameters():
            a.normal_()  # far from uniform
    net.set_knobs(**knobs)
    return net


def _counted(net) -> list[int]:
    """[number of cell forwards so far] (MobileNet: the first choice of every block)."""
    calls = [0]
    cells = [ops[0] for ops in net.blocks] if hasattr(net, "blocks") else net.cells
    for cell in cells:
        cell.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


@pytest.mark.parametrize("case", list(CASES))
def test_checkpointed_step_equals_the_plain_one(case):
    plain = _net(*CASES[case])
    ckpt = copy.deepcopy(plain)
    ckpt.checkpoint_cells = True
    x = torch.randn(8, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 5, (8,), generator=torch.Generator().manual_seed(2))
    runs = []
    for net in (plain, ckpt):
        calls = _counted(net)
        torch.manual_seed(7)  # the same drop-path masks and noise
        logits = net(x)
        F.cross_entropy(logits, y).backward()
        runs.append((logits, calls[0], torch.rand(3)))
    (lp, plain_calls, after_p), (lc, ckpt_calls, after_c) = runs
    assert ckpt_calls == 2 * plain_calls > 0  # each cell ran again in the backward
    assert torch.equal(lc, lp)
    assert torch.equal(after_c, after_p)  # the generator goes on from the same state
    for (name, p), q in zip(plain.named_parameters(), ckpt.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(q.grad, p.grad, atol=1e-12, rtol=1e-10, msg=name)
    assert any(p.grad.abs().sum() > 0 for p in ckpt.arch_parameters())
    for (name, b), c in zip(plain.named_buffers(), ckpt.buffers(), strict=True):
        assert torch.equal(c, b), name  # running statistics updated once, not twice
    if knobs := CASES[case][2].get("drop_prob"):  # the draws matter: other masks, other logits
        torch.manual_seed(8)
        assert (ckpt(x) - lc).abs().max() > 1e-3, knobs


def test_no_rerun_without_gradients_or_in_evaluation():
    net = _net("darts", {}, {})
    net.checkpoint_cells = True
    calls = _counted(net)
    x = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    with torch.no_grad():
        net(x).sum()
    net.eval()
    net(x).sum().backward()
    assert calls[0] == 2 * len(net.cells)


@pytest.mark.parametrize("method, order", [("pc-darts", 1), ("rdarts-dp", 1), ("darts", 2)])
def test_checkpointed_search_equals_the_plain_one(tmp_path, method, order):
    """Whole searches, float32, exactly: alphas, genotype, the Hessian diagnostic (a double
    backward through the checkpointed cells) and every weight and buffer. The second-order
    step's virtual forwards substitute the weights and run without checkpointing (a rerun
    would read the network's own)."""
    cfg = dict(space="darts", method=method, order=order, channels=8, cells=2, steps=4,
               batch_size=16, hessian_points=1, diag_batch=8, seed=1,
               supernet_params={"arch_start": 0.0})
    runs = [run_search(SearchConfig(**cfg, checkpoint_cells=on), tmp_path / str(on))
            for on in (False, True)]
    for key in ("alpha", "genotype", "hessian_eig"):
        assert runs[1][key] == runs[0][key], key
    nets = [torch.load(tmp_path / str(on) / "checkpoint.pt", weights_only=True)["net"]
            for on in (False, True)]
    assert nets[1].keys() == nets[0].keys()
    for name, value in nets[0].items():
        assert torch.equal(nets[1][name], value), name


def test_a_search_resumes_with_checkpointing_turned_on(tmp_path):
    """It changes memory and time only, so a resume may turn it on (a run that no longer
    fits) and ends where the plain run ends."""
    cfg = dict(space="darts", method="rdarts-dp", channels=8, cells=2, steps=22,
               batch_size=64, hessian_points=0, diag_batch=8, seed=2)
    full = run_search(SearchConfig(**cfg), tmp_path / "full")
    run_search(SearchConfig(**cfg), tmp_path / "part", stop_at=11)
    resumed = run_search(SearchConfig(**cfg, checkpoint_cells=True), tmp_path / "part",
                         resume=True)
    assert resumed["alpha"] == full["alpha"] and resumed["genotype"] == full["genotype"]


def test_a_search_checkpointed_on_the_per_edge_cells_resumes_on_them(tmp_path, monkeypatch,
                                                                     capsys):
    """A search checkpointed before its method's options were fused (its state the per-edge
    cells') resumes on the per-edge cells and ends where an uninterrupted run on them ends;
    a checkpoint that fits neither layout is refused in one line."""
    from genlab.core.errors import CheckpointError

    space = get_space("nb201")
    fused = space.build_supernet
    cfg = dict(space="nb201", method="darts-minus", channels=4, cells=1, steps=22,
               batch_size=64, hessian_points=0, diag_batch=8, seed=2)
    monkeypatch.setattr(space, "build_supernet",
                        lambda **kw: fused(**{**kw, "per_edge": True}))  # the earlier layout
    full = run_search(SearchConfig(**cfg), tmp_path / "full")
    for part in ("part", "bad"):
        run_search(SearchConfig(**cfg), tmp_path / part, stop_at=11)
    monkeypatch.setattr(space, "build_supernet", fused)
    assert not fused(num_classes=10, channels=4, cells=1, aux_skip=True).per_edge
    resumed = run_search(SearchConfig(**cfg), tmp_path / "part", resume=True)
    assert resumed["alpha"] == full["alpha"] and resumed["genotype"] == full["genotype"]
    assert "per-edge cells of an earlier genlab" in capsys.readouterr().err
    state = torch.load(tmp_path / "bad" / "checkpoint.pt", weights_only=True)
    state["net"]["cells.0.stray"] = torch.zeros(1)
    torch.save(state, tmp_path / "bad" / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="does not fit"):
        run_search(SearchConfig(**cfg), tmp_path / "bad", resume=True)
