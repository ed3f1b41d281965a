"""Time one first-order bilevel step of genlab's fused supernets against the per-edge layout.

The baseline is the textbook (upstream) supernet: one MixedOp per edge, every candidate op
its own module (``none`` computed as x * 0, pools followed by BN(affine=False) in the DARTS
spaces), outputs weighted and summed: ``space.build_supernet(per_edge=True)``, the layout
of quark0/darts model_search.py (NB201: AutoDL's). Both networks get the same weights
(``fused.load_per_edge(reference)``) and the script first checks, in float64 on a few
images, that they give the same logits and gradients.

A bilevel step = forward+backward on a validation batch and an Adam step on alpha, then
forward+backward on a training batch and an SGD(momentum) step on the weights.

    python benchmarks/nas_step.py --out runs/nas_step --only darts    # the DARTS-space row
    python benchmarks/nas_step.py --out runs/nas_step --quick         # small NB201 configs

Writes DIR/nas_step[_ONLY].json: per config, median CPU milliseconds per step (process CPU
time, so load from other processes distorts it little; steps of the two implementations
interleaved), the ratio fused / per-edge, peak RSS growth of a fresh process running two
steps of one implementation, and the float64 differences.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from genlab.nas.spaces import get_space

CONFIGS = [
    dict(name="darts C16 L8 32x32", space="darts", C=16, cells=8, batch=64, size=32,
         in_channels=3),
    dict(name="darts C16 L8 16x16", space="darts", C=16, cells=8, batch=64, size=16,
         in_channels=3),
    dict(name="darts digits C8 L5 8x8", space="darts", C=8, cells=5, batch=64, size=8,
         in_channels=1),
    dict(name="s3 digits C8 L5 8x8", space="s3", C=8, cells=5, batch=64, size=8,
         in_channels=1),
    *[dict(name=f"full C16 N5 {s}x{s}", space="nb201", C=16, cells=5, batch=64, size=s,
           in_channels=3) for s in (8, 16, 32)],  # NB201 at its upstream width
    dict(name="digits C8 N1 8x8", space="nb201", C=8, cells=1, batch=64, size=8,
         in_channels=1),
]
QUICK = ("full C16 N5 8x8", "digits C8 N1 8x8", "s3 digits C8 L5 8x8")
IMPLS = ("fused", "per_edge")


def make_pair(cfg: dict, seed: int = 0):
    """(fused, per-edge) supernets of one config with identical weights and alphas."""
    space = get_space(cfg["space"])
    torch.manual_seed(seed)
    kw = dict(num_classes=10, in_channels=cfg["in_channels"], channels=cfg["C"],
              cells=cfg["cells"])
    ref = space.build_supernet(per_edge=True, **kw)
    with torch.no_grad():
        for a in ref.arch_parameters():
            a.normal_()  # far from uniform, so a wrong weighting would show
    fused = space.build_supernet(**kw)
    fused.load_per_edge(ref)
    return fused, ref


def make_batches(cfg: dict, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    shape = (cfg["batch"], cfg["in_channels"], cfg["size"], cfg["size"])
    xt, xv = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    yt = torch.randint(0, 10, (cfg["batch"],), generator=g)
    yv = torch.randint(0, 10, (cfg["batch"],), generator=g)
    return xt, yt, xv, yv


def differences(cfg: dict, images: int = 4) -> dict:
    """float64 max |logit difference| and max relative alpha-gradient difference."""
    fused, ref = make_pair(cfg)
    fused.double()
    ref.double()
    xt, yt, _, _ = make_batches(cfg)
    x, y = xt[:images].double(), yt[:images]
    lf, lr = fused(x), ref(x)
    F.cross_entropy(lf, y).backward()
    F.cross_entropy(lr, y).backward()
    rel = max(float((a.grad - b.grad).abs().max() / b.grad.abs().max().clamp_min(1e-300))
              for a, b in zip(fused.arch_parameters(), ref.arch_parameters(), strict=True))
    return {"logits_abs": float((lf - lr).abs().max()), "alpha_grads_rel": rel}


class Bilevel:
    """First-order DARTS step: Adam on alpha (val batch), then SGD+momentum on w (train batch)."""

    def __init__(self, model):
        self.model = model
        self.a_opt = torch.optim.Adam(model.arch_parameters(), lr=3e-4, betas=(0.5, 0.999),
                                      weight_decay=1e-3)
        self.w_opt = torch.optim.SGD(model.weight_parameters(), lr=0.025, momentum=0.9,
                                     weight_decay=3e-4)

    def step(self, xt, yt, xv, yv):
        self.a_opt.zero_grad(set_to_none=True)
        F.cross_entropy(self.model(xv), yv).backward()
        self.a_opt.step()
        self.w_opt.zero_grad(set_to_none=True)
        F.cross_entropy(self.model(xt), yt).backward()
        self.w_opt.step()


def worker_time(cfg: dict, steps: int, warmup: int) -> dict:
    """Interleaved CPU time per bilevel step of both implementations."""
    diff = differences(cfg)
    fused, ref = make_pair(cfg)
    runners = {"fused": Bilevel(fused), "per_edge": Bilevel(ref)}
    data = make_batches(cfg)
    cpu = {k: [] for k in runners}
    wall = {k: [] for k in runners}
    for s in range(warmup + steps):
        for name, r in runners.items():
            c0, w0 = time.process_time(), time.perf_counter()
            r.step(*data)
            if s >= warmup:
                cpu[name].append(time.process_time() - c0)
                wall[name].append(time.perf_counter() - w0)
    return {"cpu_ms": {k: 1000 * statistics.median(v) for k, v in cpu.items()},
            "wall_ms": {k: 1000 * statistics.median(v) for k, v in wall.items()},
            "cpu_ms_all": {k: [round(1000 * t, 1) for t in v] for k, v in cpu.items()},
            "wall_ms_all": {k: [round(1000 * t, 1) for t in v] for k, v in wall.items()},
            "equality_float64": diff}


def worker_memory(cfg: dict, impl: str, steps: int = 2) -> dict:
    """Peak RSS growth (MiB) of a few bilevel steps of one implementation in this process."""
    fused, ref = make_pair(cfg)
    model = fused if impl == "fused" else ref
    del fused, ref
    data = make_batches(cfg)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    runner = Bilevel(model)
    for _ in range(steps):
        runner.step(*data)
    return {"peak_rss_delta_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base)
            / 1024}


def spawn(cfg: dict, args, extra: list[str]) -> dict:
    cmd = [sys.executable, __file__, "--worker", json.dumps(cfg), "--threads", str(args.threads),
           "--steps", str(args.steps), "--warmup", str(args.warmup), *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_worker(args) -> None:
    torch.set_num_threads(args.threads)
    cfg = json.loads(args.worker)
    res = worker_memory(cfg, args.memory) if args.memory else \
        worker_time(cfg, args.steps, args.warmup)
    print(json.dumps(res))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="folder for the JSON")
    p.add_argument("--quick", action="store_true", help="only " + ", ".join(QUICK))
    p.add_argument("--only", default="", help="run only configs whose name contains this")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=3, help="timed steps per implementation")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocesses")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--memory", choices=IMPLS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return run_worker(args)
    if args.out is None:
        p.error("--out DIR is required")
    configs = [c for c in CONFIGS if (not args.quick or c["name"] in QUICK)
               and args.only in c["name"]]
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for cfg in configs:
        res = {"config": cfg, **spawn(cfg, args, [])}
        ms = res["cpu_ms"]
        res["ratio"] = ms["fused"] / ms["per_edge"]
        wall = res["wall_ms"]
        res["wall_ratio"] = wall["fused"] / wall["per_edge"]
        line = (f"{cfg['name']:>24}: fused {ms['fused']:8.1f} ms  per-edge {ms['per_edge']:8.1f} "
                f"ms CPU/step  ratio {res['ratio']:.2f} (wall {wall['fused']:.0f} / "
                f"{wall['per_edge']:.0f} ms, {res['wall_ratio']:.2f})")
        if not args.no_memory:
            mem = {impl: spawn(cfg, args, ["--memory", impl])["peak_rss_delta_mib"]
                   for impl in IMPLS}
            res["peak_rss_delta_mib"] = mem
            line += f"  peak RSS +{mem['fused']:.0f} / +{mem['per_edge']:.0f} MiB"
        eq = res["equality_float64"]
        line += (f"  float64 |dlogit| {eq['logits_abs']:.0e} alpha-grad rel "
                 f"{eq['alpha_grads_rel']:.0e}")
        results.append(res)
        print(line, flush=True)
    meta = {"threads": args.threads, "steps": args.steps, "warmup": args.warmup,
            "torch": torch.__version__, "command": " ".join(sys.argv),
            "clock": "process CPU time (time.process_time)"}
    name = "nas_step.json" if not args.only else f"nas_step_{args.only.replace(' ', '_')}.json"
    (args.out / name).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()
