"""Step cost of genlab's optimisers as a ratio to plain SGD on the same model and batch.

Models: a small CNN (conv-BN-ReLU-pool x2, 1x8x8 input, digits-sized) and an MLP
(64-128-10), batch 64, random inputs with a fixed seed. Every optimiser gets its
own copy of the same initial model. Steps are interleaved (in a new random
order every round) so CPU contention hits all alike; the figure is the median over
rounds after warm-up. The per-sample optimisers (COV, SAMGCM) take 10-400x an
SGD step and disturb the timing of whatever runs right after them, so they are
interleaved in a second group with their own SGD reference. SAMGCM runs with the
Woodbury solver and, where d <= 2500, also with the dense d x d solver.

A second part measures SAMGCM on the paper's sparse-regression setup (n=100,
d=150, diagonal net beta = u * v, batch 10, rho 5e-4, xi 1e-6): the Euclidean
length of its perturbation (vs SAM's rho = 0.3) and the time of one direction
solve, Woodbury vs dense (d = 300).

    python benchmarks/optim_step.py --out runs/bench            # ~5 min on 1 core
    python benchmarks/optim_step.py --out runs/bench --quick    # ~30 s

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
from genlab.optim.nonuniform import covariance_direction, per_sample_grads

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


def time_model(label: str, model: nn.Module, rounds: int, warmup: int, batch: int) -> dict:
    """Median ms per step of each optimiser on copies of ``model``; ratios to SGD."""
    d = sum(p.numel() for p in model.parameters())
    rows = []
    for per_sample in (False, True):
        group = [s for s in SETTINGS if s[1] == "sgd" or (s[1] in PER_SAMPLE_CLOSURE) == per_sample]
        group = [s for s in group if not (s[2].get("solver") == "dense" and d > DENSE_MAX_DIM)]
        rows.extend(r for r in time_group(group, model, rounds, warmup, batch)
                    if not (per_sample and r["optimizer"] == "SGD"))
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
        if name not in ("sgd", "cov"):
            kw["model"] = net
        runners.append((name_label, make_optimizer(name, net.parameters(), **kw),
                        make_closure(name, net, x, y)))
    times = {lbl: [] for lbl, _, _ in runners}
    order = random.Random(0)
    for r in range(warmup + rounds):
        order.shuffle(runners)          # no optimiser always follows the same one
        for lbl, opt, closure in runners:
            t0 = time.perf_counter()
            opt.step(closure)
            elapsed = time.perf_counter() - t0
            if r >= warmup:
                times[lbl].append(elapsed)
    sgd = statistics.median(times["SGD"])
    return [{"optimizer": lbl, "median_ms": 1e3 * statistics.median(ts),
             "ratio_to_sgd": statistics.median(ts) / sgd, "sgd_ms_in_group": 1e3 * sgd}
            for lbl, ts in times.items()]


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
    opt = make_optimizer("samgcm", [u, v], lr=0.05, rho=5e-4, xi=1e-6, solver="woodbury")
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
    rounds, warmup = (10, 3) if args.quick else (30, 5)
    results = {"quick": args.quick, "threads": args.threads, "models": []}
    for label, builder in (("cnn 1x8x8", small_cnn), ("mlp 64-128-10", mlp)):
        torch.manual_seed(0)
        res = time_model(label, builder(), rounds, warmup, batch=64)
        results["models"].append(res)
        print(f"\n{label} ({res['params']} parameters, batch 64, median of {rounds} rounds)")
        print(markdown_table(res["rows"], digits=2))
    sparse = sparse_regression_perturbation(steps=20 if args.quick else 200)
    results["samgcm_sparse_regression"] = sparse
    print("SAMGCM on sparse regression (d=300 parameters, batch 10, rho 5e-4, xi 1e-6)")
    print(markdown_table([sparse], digits=3))
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "optim_step.json", results)
    print(f"wrote {args.out / 'optim_step.json'}")


if __name__ == "__main__":
    main()
