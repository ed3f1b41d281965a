"""The captured search step (genlab.nas.captured): the code it records reads nothing on the
host (run under a dispatch mode that refuses every device-to-host read), it steps as the eager
step does (10 steps on the CPU; on CUDA the replayed graph against the eager step), and the
option refuses or falls back in one line where the step cannot be captured."""

import copy
import json

import pytest
import torch
import torch.optim.adam as adam_mod
from torch.utils._python_dispatch import TorchDispatchMode

import genlab.nas.captured as captured
import genlab.nas.search as search_mod
from genlab.core.errors import ConfigError
from genlab.nas.architect import bilevel_step
from genlab.nas.methods import method_names, search_method
from genlab.nas.regularizers import PENALTIES
from genlab.nas.search import (
    SearchConfig,
    cosine_lr,
    run_search,
    search_optimizers,
    search_regularizer,
)
from genlab.nas.spaces import build_space_supernet, get_space

aten = torch.ops.aten
# operators whose result the host must know: a CUDA graph cannot hold them (the stream would
# wait on the device), and on the CPU they are where a tensor's value becomes a Python value
HOST_READS = {aten._local_scalar_dense, aten.item, aten.is_nonzero, aten.nonzero,
              aten.equal, aten.masked_select, aten._unique, aten._unique2, aten.unique_dim,
              aten.unique_consecutive, aten.allclose}


MASKED = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}
# a tensor made from host data (torch.tensor(...), indexing by a Python list): on CUDA a copy
# from pageable host memory, which a capture refuses; a 0-dim one is let pass (a CUDA kernel
# takes a 0-dim CPU tensor as a scalar argument, without a copy: torch's Adam does this)
HOST_DATA = {aten.lift_fresh, aten.lift_fresh_copy}


def _masked(args) -> bool:
    """Indexing by a boolean mask (its size is the mask's count of True: known on the host)."""
    indices = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
               for i in indices)


class RefuseHostReads(TorchDispatchMode):
    """Raises on every operator of HOST_READS and HOST_DATA, indexing by a mask and
    repeat_interleave without an output size. Not seen on the CPU: ``tolist`` and ``numpy``
    (they read the memory without an operator); on CUDA the capture itself refuses them."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        sized = func.overloadpacket is aten.repeat_interleave and \
            func._overloadname == "Tensor" and kwargs.get("output_size") is None
        masked = func.overloadpacket in MASKED and _masked(args)
        if func.overloadpacket in HOST_READS or sized or masked:
            raise AssertionError(f"host read in the captured step: {func}")
        if func.overloadpacket in HOST_DATA and args[0].dim() > 0:
            raise AssertionError(f"host data copied in the captured step: {func}")
        return func(*args, **kwargs)


SIZES = {"size": 8, "channels": 4, "batch_size": 8, "steps": 10}
CELLS = {"nb201": 1, "darts": 2, "s4": 2, "mobilenet": None}  # s4: the noise op


def build(space: str, method: str, seed: int = 0, reg: str | None = None):
    """(net, a_opt, w_opt, reg, parts, batches) of a tiny search of ``method`` in ``space``,
    as genlab.nas.search builds them."""
    cfg = SearchConfig(space=space, method=method, cells=CELLS[space], reg=reg,
                       **SIZES).resolved()
    parts, penalty = search_method(cfg), search_regularizer(cfg)
    sp = get_space(space)
    torch.manual_seed(seed)
    net = build_space_supernet(sp, 10, 3, cfg.channels, cfg.cells,
                               {**sp.proxy.options, **parts.supernet_options})
    parts.attach(net)
    a_opt, w_opt = search_optimizers(net, cfg, penalty)
    g = torch.Generator().manual_seed(seed + 1)
    batches = [[(torch.randn(cfg.batch_size, 3, cfg.size, cfg.size, generator=g),
                 torch.randint(0, 10, (cfg.batch_size,), generator=g)) for _ in range(2)]
               for _ in range(cfg.steps)]
    return cfg, net, a_opt, w_opt, penalty, parts, batches


def claims(space: str, method: str) -> bool:
    cfg, net, _, _, reg, parts, _ = build(space, method)
    return captured.capture_blockers(1, "off", False, parts, reg, net) == []


CAPTURED_METHODS = [m for m in method_names() if claims("darts", m)]
# the penalties whose class claims capture, each on DARTS
CAPTURED_PENALTIES = [name for name, cls in PENALTIES.items() if cls.__dict__.get("capturable")]


@pytest.fixture
def cpu_capturable(monkeypatch):
    """Adam's capturable update allowed on the CPU (torch allows it on accelerators only), so
    that the CPU runs the optimiser code that the graph records on CUDA."""
    real = adam_mod._get_capturable_supported_devices
    monkeypatch.setattr(adam_mod, "_get_capturable_supported_devices",
                        lambda *a, **k: [*real(*a, **k), "cpu"])


def test_the_mode_catches_each_kind_of_host_read():
    t, counts, zero, rows = (torch.tensor([0.0, 1.0, 2.0]), torch.tensor([1, 2]),
                             torch.tensor(0.0), torch.tensor([0, 2]))
    reads = [lambda: float(t.sum()), lambda: bool(t[0]), lambda: t.nonzero(),
             lambda: t[t > 0.5], lambda: torch.equal(t, t), lambda: t.unique(),
             lambda: torch.repeat_interleave(counts),
             lambda: t.clone().index_put_((t > 0.5,), zero)]
    for read in reads:
        with pytest.raises(AssertionError, match="host read"), RefuseHostReads():
            read()
    # host data made into a tensor inside the step (on CUDA a pageable host-to-device copy,
    # which a capture refuses): a Python list as an index, torch.tensor of host numbers
    for made in (lambda: t[[0, 2]], lambda: t * torch.tensor([2.0])):
        with pytest.raises(AssertionError, match="host data"), RefuseHostReads():
            made()
    with RefuseHostReads():  # device-side work passes
        (t * 2).softmax(0).clamp(max=1.0)[rows]
        t[0:2].index_select(0, rows[:1])
        torch.where(t > 0.5, t, 0.0)


def test_the_methods_that_claim_capture():
    """DARTS and PC-DARTS (and R-DARTS' L2 and ES, DARTS' step with another decay or stopping
    rule) claim it; the methods that draw or set per-step host values do not, each named."""
    assert {"darts", "pc-darts", "rdarts-l2", "rdarts-es"} <= set(CAPTURED_METHODS)
    for method, phrase in (("gdas", "--relaxation gumbel"), ("gdas", "sampled"),
                           ("drnas", "--relaxation dirichlet"),
                           ("darts-minus", "aux_skip"), ("rdarts-dp", "drop_path"),
                           ("sdarts-rs", "--perturb random")):
        assert method not in CAPTURED_METHODS
        _, net, _, _, reg, parts, _ = build("darts", method)
        assert any(phrase in b for b in captured.capture_blockers(1, "off", False, parts, reg,
                                                                  net)), method
    _, net, _, _, reg, parts, _ = build("darts", "darts", reg="ber")
    assert captured.capture_blockers(2, "bf16", True, parts, reg, net, parallel=True) == [
        "--order 2 (the unrolled step reads the gradient norm on the host)",
        "--amp bf16 (autocast is not captured)",
        "--checkpoint-cells (recomputation in the backward is not captured)",
        "a data-parallel search (torchrun)",
        "--reg ber-anchor (reads the network or alpha on the host)"]


@pytest.mark.parametrize("space", sorted(CELLS))
@pytest.mark.parametrize("method, reg", [(m, None) for m in CAPTURED_METHODS]
                         + [("darts", p) for p in CAPTURED_PENALTIES])
def test_captured_code_reads_nothing_on_the_host(cpu_capturable, space, method, reg):
    """Every method and penalty that claims capture, in a space of each supernet class."""
    cfg, net, a_opt, w_opt, reg, parts, batches = build(space, method, reg=reg)
    assert captured.capture_blockers(1, "off", False, parts, reg, net) == []
    for group in a_opt.param_groups:
        group["foreach"] = True  # the multi-tensor update, as on CUDA
    step = captured.CapturedStep(net, a_opt, w_opt, reg, torch.device("cpu"), capture=False)
    step.grad_clip = cfg.grad_clip
    before = [p.detach().clone() for p in net.parameters()]
    for i in range(2):  # the first run makes the optimisers' state, the second uses it
        parts.begin_step(net, 5 + i, cfg.steps)
        assert step.load(*batches[i], 5 + i, cfg.steps)
        with RefuseHostReads():
            step.body()
    moved = [not torch.equal(a, p) for a, p in zip(before, net.parameters(), strict=True)]
    assert sum(moved) > len(moved) // 2


def _run(space, method, steps, captured_step: bool, reg=None):
    """Alphas and weights after ``steps`` search steps: bilevel_step, or the captured code run
    eagerly (the CPU), with the search's cosine rate and lambda_t."""
    cfg, net, a_opt, w_opt, penalty, parts, batches = build(space, method, reg=reg)
    fn = bilevel_step
    if captured_step:
        fn = captured.CapturedStep(net, a_opt, w_opt, penalty, torch.device("cpu"),
                                   capture=False)
    losses = []
    for s in range(steps):
        parts.begin_step(net, s, steps)
        for group in w_opt.param_groups:
            group["lr"] = cosine_lr(s, steps, cfg.w_lr, cfg.w_lr_min)
        losses.extend(fn(net, a_opt, w_opt, *batches[s], penalty, s, steps, cfg.grad_clip, 1,
                         None, parts))
    return [p.detach().clone() for p in net.parameters()], losses


@pytest.mark.parametrize("method, reg", [("darts", None), ("pc-darts", None), ("darts", "beta"),
                                         ("darts", "ber-kl")])
def test_captured_code_steps_as_the_eager_step(cpu_capturable, method, reg):
    """10 steps of the captured code (Adam's capturable update, SGD's update on a device
    rate) against bilevel_step from the same start: equal to float32 rounding. PC-DARTS'
    first 30% of the steps are its warm-up (alpha still), run by the eager step in both."""
    eager, eager_losses = _run("darts", method, 10, False, reg)
    mine, mine_losses = _run("darts", method, 10, True, reg)
    assert mine_losses == pytest.approx(eager_losses, rel=1e-5)
    for a, b in zip(eager, mine, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(eager, build("darts", method, reg=reg)[1]
                                                     .parameters(), strict=True))


def test_warm_up_then_one_capture_then_replays_with_the_eager_steps_between(cpu_capturable,
                                                                            monkeypatch):
    """What runs when (CUDA's graph replaced by a stand-in whose replay runs the captured code
    again): WARMUP_STEPS eager runs, one capture, then replays; a step that records the
    forces and PC-DARTS' warm-up steps take the eager step; the losses come back as numbers."""
    recorded, eager_steps = [], []

    class Replay:
        def replay(self):
            step.outputs = step.body()

    def record(self):
        recorded.append(len(eager_steps))
        self.graph = Replay()

    def eager(*args):
        eager_steps.append(args[6])
        return bilevel_step(*args)

    monkeypatch.setattr(captured.CapturedStep, "_run_eagerly", lambda self: self.body())
    monkeypatch.setattr(captured.CapturedStep, "_record", record)
    cfg, net, a_opt, w_opt, reg, parts, batches = build("darts", "pc-darts")
    step = captured.CapturedStep(net, a_opt, w_opt, reg, torch.device("cpu"), eager=eager)
    step.capture = True  # as on CUDA
    for s in range(10):
        forces = {} if s == 6 else None
        tl, vl = step(net, a_opt, w_opt, *batches[s], reg, s, 10, cfg.grad_clip, 1, forces,
                      parts)
        assert isinstance(tl, float) and isinstance(vl, float)
    # steps 0-2: PC-DARTS' warm-up (alpha still), the eager step; 3-5: the warm-up runs of
    # the captured code; 6: forces, the eager step; 7: the one capture, and replays at 7-9
    assert eager_steps == [0, 1, 2, 6] and step.eager_runs == captured.WARMUP_STEPS == 3
    assert recorded == [4] and step.replays == 3


def test_cuda_graph_option_on_the_cpu_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^--cuda-graph on needs a CUDA device") as err:
        SearchConfig(cuda_graph="on", device="cpu").validate()
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="needs a CUDA device"):
        captured.wanted("on", torch.device("cpu"))  # --device auto on a machine without CUDA
    # auto is off until a GPU has measured the captured step faster; off is off
    assert not captured.AUTO_ON_CUDA
    assert not captured.wanted("auto", torch.device("cuda"))
    assert not captured.wanted("off", torch.device("cuda"))


def test_a_blocked_capture_warns_once_and_runs_eagerly(monkeypatch, capsys):
    monkeypatch.setattr(captured, "wanted", lambda mode, device: True)
    _, net, a_opt, w_opt, reg, parts, _ = build("darts", "gdas")
    fn = captured.search_step("on", torch.device("cpu"), net, a_opt, w_opt, reg, parts, order=1,
                              amp="off", checkpoint_cells=False, parallel=False)
    assert fn is bilevel_step
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "runs eagerly, not captured" in lines[0]
    assert "--relaxation gumbel of method gdas" in lines[0]
    _, net, a_opt, w_opt, reg, parts, _ = build("darts", "darts")
    fn = captured.search_step("auto", torch.device("cpu"), net, a_opt, w_opt, reg, parts,
                              order=1, amp="off", checkpoint_cells=False, parallel=False)
    assert isinstance(fn, captured.CapturedStep)


def test_a_captured_searchs_optimiser_state_resumes_eagerly_on_the_cpu(cpu_capturable,
                                                                       monkeypatch):
    """The checkpoint of a captured search holds a capturable Adam (its step counts on the
    device); resumed with the eager step (here on the CPU, where torch refuses a capturable
    Adam) it goes back to the eager form and steps as an Adam that never was capturable."""
    cfg, net, a_opt, w_opt, reg, parts, batches = build("darts", "darts")
    step = captured.CapturedStep(net, a_opt, w_opt, reg, torch.device("cpu"), capture=False)
    step(net, a_opt, w_opt, *batches[0], reg, 5, 10, cfg.grad_clip, 1, None, parts)
    saved = a_opt.state_dict()
    assert saved["param_groups"][0]["capturable"]
    monkeypatch.undo()  # torch's own rule again: no capturable Adam on the CPU
    runs = []
    for resumed in (True, False):
        torch.manual_seed(3)
        _, net2, a2, w2, reg2, parts2, _ = build("darts", "darts")
        net2.load_state_dict(net.state_dict())
        a2.load_state_dict(copy.deepcopy(saved))  # as a checkpoint read back
        if resumed:
            fn = captured.search_step("off", torch.device("cpu"), net2, a2, w2, reg2, parts2,
                                      order=1, amp="off", checkpoint_cells=False,
                                      parallel=False)
            assert fn is bilevel_step and not a2.param_groups[0]["capturable"]
        else:  # the reference: the same state as an eager Adam would have saved it
            for group in a2.param_groups:
                group["capturable"] = False
            for st in a2.state.values():
                st["step"] = torch.tensor(float(st["step"]))
        bilevel_step(net2, a2, w2, *batches[1], reg2, 6, 10, cfg.grad_clip, 1, None, parts2)
        runs.append([a.detach().clone() for a in net2.arch_parameters()])
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a, b)


def test_the_search_loop_with_the_captured_code(tmp_path, cpu_capturable, monkeypatch):
    """A search whose step is the captured code (run eagerly on the CPU: forces and logging
    steps by the eager step) ends where the eager search ends, to float32 rounding."""
    cfg = dict(space="nb201", method="darts", steps=12, channels=4, size=8, batch_size=16,
               hessian_points=0, diag_batch=16, force_every=5)
    monkeypatch.setattr(search_mod, "_plots", lambda run, history, space: None)
    eager = run_search(SearchConfig(**cfg), tmp_path / "eager", progress_bar=False)
    made = []
    real = captured.CapturedStep

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(captured, "wanted", lambda mode, device: True)
    monkeypatch.setattr(captured, "CapturedStep", spy)
    mine = run_search(SearchConfig(**cfg, cuda_graph="auto"), tmp_path / "mine",
                      progress_bar=False)
    assert len(made) == 1 and made[0].eager_runs > 0
    for name, alpha in eager["alpha"].items():
        torch.testing.assert_close(torch.tensor(mine["alpha"][name]), torch.tensor(alpha),
                                   rtol=1e-4, atol=1e-5)
    forces = [json.loads(line) for line in (tmp_path / "mine" / "forces.jsonl").read_text()
              .splitlines()]
    assert [f["step"] for f in forces] == [0, 5, 10]


def search_steps(method: str, graph: bool, steps: int = 10, device: str = "cuda",
                 perturb: float = 0.0) -> tuple[list, list]:
    """(weights on the CPU, losses) after ``steps`` search steps of ``method`` in the DARTS space
    on ``device``: bilevel_step, or (graph) the first step eager, then the captured graph
    replayed; ``perturb``: every weight and alpha first scaled by 1 + perturb * N(0, 1)
    (seeded)."""
    cfg, net, a_opt, w_opt, reg, parts, batches = build("darts", method)
    if perturb:
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for p in [*net.weight_parameters(), *net.arch_parameters()]:
                p.mul_(1 + perturb * torch.randn(p.shape, generator=g))
    dev = torch.device(device)
    net.to(dev)
    a_opt, w_opt = search_optimizers(net, cfg, reg)
    fn = captured.CapturedStep(net, a_opt, w_opt, reg, dev, warmup=1) if graph else bilevel_step
    losses = []
    for s in range(steps):
        parts.begin_step(net, s, steps)
        for group in w_opt.param_groups:
            group["lr"] = cosine_lr(s, steps, cfg.w_lr, cfg.w_lr_min)
        xt, yt = (t.to(dev) for t in batches[s][0])
        xv, yv = (t.to(dev) for t in batches[s][1])
        losses.extend(fn(net, a_opt, w_opt, (xt, yt), (xv, yv), reg, s, steps,
                         cfg.grad_clip, 1, None, parts))
    if graph:
        assert fn.graph is not None and fn.replays >= 1
    return [p.detach().cpu() for p in net.parameters()], losses


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("method", CAPTURED_METHODS)
def test_replayed_graph_steps_as_the_eager_step_on_cuda(method):
    """On CUDA: 10 steps, the first eager, then the graph captured once and replayed, against
    bilevel_step from the same start, to float32 tolerance (TF32 off in both)."""
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        (eager, eager_losses), (mine, mine_losses) = (search_steps(method, graph)
                                                      for graph in (False, True))
        assert mine_losses == pytest.approx(eager_losses, rel=1e-4)
        for a, b in zip(eager, mine, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-5)
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
