"""Step cost of genlab's optimisers as a ratio to plain SGD on the same model and batch.

Models: a small CNN (conv-BN-ReLU-pool x2, 1x8x8 input, digits-sized, BatchNorm in
training mode) and an MLP (64-128-10), batch 64, random inputs with a fixed seed. Every
optimiser gets its own copy of the same initial model. Steps are interleaved (in a new
random order every round) so CPU contention hits all alike; the figure is the median over
rounds after warm-up, in wall-clock time and in CPU time of the calling thread (the latter
is far less sensitive to other processes on a shared machine). A third table pits SAM
against SGD alone and against ``TextbookSAM``, the common per-parameter SAM loop, as a
reference for the wrapper's overhead.

The per-sample optimisers COV and SAMGCM run twice: with the per-layer path (the default,
``per_sample="layers"``: per-sample norms, Gram matrix and weighted sums from the layers'
inputs and output gradients) and with the autograd reference they replaced
(``per_sample="autograd"``: a vectorised backward per sample and, for COV, a double
backward through all of them), each group interleaved with its own SGD reference; the
"speed-up" column is reference time / layer-path time. SAMGCM runs with the Woodbury
solver and, where d <= 2500, also with the dense d x d solver. On the CNN (BatchNorm in
training mode) the two paths define per-sample gradients differently (see
genlab/optim/measures/ghost.py); elsewhere they agree to rounding (tests/optim/test_ghost.py).

A second part measures SAMGCM on the paper's sparse-regression setup (n=100,
d=150, diagonal net beta = u * v, batch 10, rho 5e-4, xi 1e-6): the Euclidean
length of its perturbation (vs SAM's rho = 0.3) and the time of one direction
solve, Woodbury vs dense (d = 300).

    python benchmarks/optim_step.py --out runs/bench            # ~5 min on 1 core
    python benchmarks/optim_step.py --out runs/bench --quick    # ~1 min

Writes DIR/optim_step.json and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from genlab.core.report import markdown_table
from genlab.core.runs import write_json
from genlab.optim import PER_SAMPLE_CLOSURE, make_optimizer
from genlab.optim.optimizers.per_sample_source import per_sample_grads
from genlab.optim.optimizers.samgcm import covariance_direction

DENSE_MAX_DIM = 2500
SETTINGS = [  # (label, registry name, extra keyword arguments)
    ("SGD", "sgd", {}),
    ("SAM", "sam", dict(rho=0.05)),
    ("ASAM", "asam", dict(rho=0.5)),
    ("COV", "cov", dict(lam=0.1)),
    ("SAMGCM (woodbury)", "samgcm", dict(solver="woodbury")),
    ("SAMGCM (dense)", "samgcm", dict(solver="dense")),
    ("CSAM_Identity", "csam_identity", {}),
    ("CSAM (K-FAC)", "csam", {}),
    ("ACSAM_Identity", "acsam_identity", {}),
]
REFERENCE = " [autograd reference]"


class TextbookSAM(torch.optim.Optimizer):
    """Reference only: the common per-parameter SAM loop (e_w kept per parameter, w -= e_w)."""

    def __init__(self, params, rho: float = 0.05, **kw):
        super().__init__(params, dict(rho=rho, **kw))
        self.base = torch.optim.SGD(self.param_groups, **kw)
        self.param_groups = self.base.param_groups

    @torch.no_grad()
    def step(self, closure):
        closure = torch.enable_grad()(closure)
        loss = closure()
        norm = torch.norm(torch.stack([p.grad.norm(2) for g in self.param_groups
                                       for p in g["params"] if p.grad is not None]))
        for group in self.param_groups:
            scale = group["rho"] / (norm + 1e-12)
            for p in group["params"]:
                if p.grad is not None:
                    self.state[p]["e_w"] = p.grad * scale
                    p.add_(self.state[p]["e_w"])
        self.zero_grad()
        closure()
        for group in self.param_groups:
            for p in group["params"]:
                if "e_w" in self.state[p]:
                    p.sub_(self.state[p]["e_w"])
        self.base.step()
        return loss


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def make_closure(name: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor):
    """Per-sample-loss closure for COV/SAMGCM, the usual backward closure otherwise."""
    if name in PER_SAMPLE_CLOSURE:
        return lambda: nn.functional.cross_entropy(model(x), y, reduction="none")

    def closure():
        model.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    return closure


def time_model(label: str, model: nn.Module, rounds: tuple[int, int, int], warmup: int,
               batch: int) -> dict:
    """Median ms per step of each optimiser on copies of ``model``; ratios to SGD.

    ``rounds`` = rounds of the cheap group, of the per-sample layer path and of the
    per-sample autograd reference.
    """
    d = sum(p.numel() for p in model.parameters())
    rows = []
    groups = (("cheap", "layers"), ("per-sample", "layers"), ("per-sample", "autograd"))
    for (kind, per_sample), n_rounds in zip(groups, rounds, strict=True):
        group = [s for s in SETTINGS if s[1] == "sgd"
                 or (s[1] in PER_SAMPLE_CLOSURE) == (kind == "per-sample")]
        group = [s for s in group if not (s[2].get("solver") == "dense" and d > DENSE_MAX_DIM)]
        if kind == "per-sample":
            group = [(lbl if n == "sgd" or per_sample == "layers" else lbl + REFERENCE, n,
                      dict(kw, per_sample=per_sample) if n != "sgd" else kw)
                     for lbl, n, kw in group]
        rows.extend(r for r in time_group(group, model, n_rounds, warmup, batch)
                    if not (kind == "per-sample" and r["optimizer"] == "SGD"))
    by_label = {r["optimizer"]: r for r in rows}
    for r in rows:
        ref = by_label.get(r["optimizer"] + REFERENCE)
        r["cpu_speedup_vs_reference"] = ref["cpu_ms"] / r["cpu_ms"] if ref else None
    return {"model": label, "params": d, "batch": batch, "rounds": rounds, "rows": rows}


def time_group(settings: list, model: nn.Module, rounds: int, warmup: int, batch: int) -> list:
    """Interleaved timing of ``settings`` (SGD first); rows with ratios to this group's SGD."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 1, 8, 8, generator=gen)
    y = torch.randint(0, 10, (batch,), generator=gen)
    runners = []
    for name_label, name, extra in settings:
        net = copy.deepcopy(model)
        kw = dict(lr=0.01, **extra)
        if name != "cov":
            kw["momentum"] = 0.9
        if name != "sgd":
            kw["model"] = net
        runners.append((name_label, make_optimizer(name, net.parameters(), **kw),
                        make_closure(name, net, x, y)))
    return interleave(runners, rounds, warmup)


def interleave(runners: list, rounds: int, warmup: int) -> list:
    """Run (label, optimizer, closure) steps in a fresh random order each round; median
    wall-clock and thread-CPU ms per label, ratios to the label "SGD"."""
    wall = {lbl: [] for lbl, _, _ in runners}
    cpu = {lbl: [] for lbl, _, _ in runners}
    order = random.Random(0)
    runners = list(runners)
    for r in range(warmup + rounds):
        order.shuffle(runners)          # no optimiser always follows the same one
        for lbl, opt, closure in runners:
            w0, c0 = time.perf_counter(), time.thread_time()
            opt.step(closure)
            if r >= warmup:
                cpu[lbl].append(time.thread_time() - c0)
                wall[lbl].append(time.perf_counter() - w0)
    sgd_wall, sgd_cpu = statistics.median(wall["SGD"]), statistics.median(cpu["SGD"])
    return [{"optimizer": lbl, "median_ms": 1e3 * statistics.median(wall[lbl]),
             "ratio_to_sgd": statistics.median(wall[lbl]) / sgd_wall,
             "cpu_ms": 1e3 * statistics.median(cpu[lbl]),
             "cpu_ratio_to_sgd": statistics.median(cpu[lbl]) / sgd_cpu}
            for lbl in wall]


def sam_against_textbook(model: nn.Module, rounds: int, warmup: int) -> list:
    """SGD, genlab's SAM and TextbookSAM interleaved on copies of ``model`` (batch 64)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 1, 8, 8, generator=gen)
    y = torch.randint(0, 10, (64,), generator=gen)
    nets = [copy.deepcopy(model) for _ in range(3)]
    opts = [make_optimizer("sgd", nets[0].parameters(), lr=0.01, momentum=0.9),
            make_optimizer("sam", nets[1].parameters(), lr=0.01, momentum=0.9, model=nets[1]),
            TextbookSAM(nets[2].parameters(), lr=0.01, momentum=0.9)]
    runners = [(lbl, opt, make_closure("sam", net, x, y)) for lbl, opt, net in
               zip(("SGD", "SAM", "textbook SAM"), opts, nets, strict=True)]
    return interleave(runners, rounds, warmup)


def sparse_regression_perturbation(steps: int, seed: int = 0) -> dict:
    """SAMGCM on the sparse-regression setup: perturbation norms and solve times."""
    gen = torch.Generator().manual_seed(seed)
    n, d, k = 100, 150, 3
    X = torch.randn(n, d, generator=gen)
    theta = torch.zeros(d)
    theta[:k] = torch.randn(k, generator=gen).abs()
    theta /= theta.norm()
    y = X @ theta + 0.2 * torch.randn(n, generator=gen)
    u = (0.2 * torch.randn(d, generator=gen)).requires_grad_(True)
    v = (0.2 * torch.randn(d, generator=gen)).requires_grad_(True)
    opt = make_optimizer("samgcm", [u, v], lr=0.05, rho=5e-4, xi=1e-6, solver="woodbury",
                         per_sample="autograd")
    norms = []
    for step in range(steps):
        idx = torch.randperm(n, generator=gen)[:10]
        opt.step(lambda idx=idx: 0.5 * (X[idx] @ (u * v) - y[idx]) ** 2)
        norms.append(opt.last_perturbation_norm)
        if step == 0:
            losses = 0.5 * (X[idx] @ (u * v) - y[idx]) ** 2
            G = torch.cat([g.reshape(10, -1) for g in per_sample_grads(losses, [u, v])], 1)
    solve_ms = {}
    for solver in ("woodbury", "dense"):
        ts = []
        for _ in range(20):
            t0 = time.perf_counter()
            covariance_direction(G.detach(), 1e-6, solver)
            ts.append(time.perf_counter() - t0)
        solve_ms[solver] = 1e3 * statistics.median(ts)
    return {"steps": steps, "perturbation_norm_median": statistics.median(norms),
            "perturbation_norm_min": min(norms), "perturbation_norm_max": max(norms),
            "sam_rho": 0.3, "solve_ms_woodbury_d300": solve_ms["woodbury"],
            "solve_ms_dense_d300": solve_ms["dense"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rounds, warmup = ((12, 8, 2), 2) if args.quick else ((60, 40, 8), 4)
    results = {"quick": args.quick, "threads": args.threads, "models": []}
    paired = []
    for label, builder in (("cnn 1x8x8", small_cnn), ("mlp 64-128-10", mlp)):
        torch.manual_seed(0)
        res = time_model(label, builder(), rounds, warmup, batch=64)
        results["models"].append(res)
        print(f"\n{label} ({res['params']} parameters, batch 64, median of {rounds[0]} rounds, "
              f"{rounds[1]} for COV/SAMGCM, {rounds[2]} for their autograd reference)")
        print(markdown_table(res["rows"], digits=2))
        torch.manual_seed(0)
        for row in sam_against_textbook(builder(), 5 * rounds[0], warmup):
            paired.append({"model": label, **row})
    results["sam_vs_sgd_paired"] = paired
    print(f"SGD, SAM and a textbook SAM loop alone ({5 * rounds[0]} rounds)")
    print(markdown_table(paired, digits=2))
    sparse = sparse_regression_perturbation(steps=20 if args.quick else 200)
    results["samgcm_sparse_regression"] = sparse
    print("SAMGCM on sparse regression (d=300 parameters, batch 10, rho 5e-4, xi 1e-6)")
    print(markdown_table([sparse], digits=3))
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "optim_step.json", results)
    print(f"wrote {args.out / 'optim_step.json'}")


if __name__ == "__main__":
    main()
