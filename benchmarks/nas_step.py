"""Time one first-order bilevel DARTS step of genlab's NB201 supernet against a per-edge reference.

The reference below is the textbook (AutoDL-style) supernet: one MixedOp module per edge, each
candidate op its own module applied in a Python loop, outputs weighted and summed. It is the
baseline here, not library code. Both networks get the same weights (copied), and the script
first checks that they give the same logits and gradients.

A bilevel step = forward+backward on a validation batch and an Adam step on alpha, then
forward+backward on a training batch and an SGD(momentum) step on the weights.

    python benchmarks/nas_step.py --out runs/nas_step            # full set (slow: ~15 min)
    python benchmarks/nas_step.py --out runs/nas_step --quick    # small subset

Writes DIR/nas_step.json: per config, median ms per step after warm-up (steps of the two
implementations interleaved so CPU contention hits both alike), peak RSS growth of a fresh
process running a few steps, and the ratio ours/reference.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from genlab.nas.ops import CONV_KERNELS, Head, ResidualBlock, Stem, make_op, stage_channels
from genlab.nas.spaces import NB201_EDGES, NB201_NODES, NB201_OPS
from genlab.nas.supernet import NB201SuperNet, SearchCell


# ----------------------------------------------------------------------------- reference
class ReferenceMixedOp(nn.Module):
    """One edge: every candidate op as its own module, outputs weighted and summed."""

    def __init__(self, channels, ops, track_running_stats=True):
        super().__init__()
        self.ops = nn.ModuleList(make_op(o, channels, affine=False,
                                         track_running_stats=track_running_stats) for o in ops)

    def forward(self, x, weights):
        return sum(w * op(x) for w, op in zip(weights, self.ops, strict=True))


class ReferenceSearchCell(nn.Module):
    """Edges in a ModuleDict keyed 'i<-j'; node_i = sum_j MixedOp_{i<-j}(node_j)."""

    def __init__(self, channels, ops, track_running_stats=True):
        super().__init__()
        self.edges = nn.ModuleDict({e: ReferenceMixedOp(channels, ops, track_running_stats)
                                    for e in NB201_EDGES})

    def forward(self, x, weights):
        nodes = [x]
        for i in range(1, NB201_NODES + 1):
            nodes.append(sum(self.edges[f"{i}<-{j}"](nodes[j], weights[NB201_EDGES.index(
                f"{i}<-{j}")]) for j in range(i)))
        return nodes[-1]


class ReferenceSuperNet(nn.Module):
    """Same macro skeleton as NB201SuperNet, per-edge cells; softmax once per forward."""

    def __init__(self, C=16, N=5, num_classes=10, in_channels=3, ops=NB201_OPS,
                 track_running_stats=True):
        super().__init__()
        self.stem = Stem(in_channels, C)
        self.cells = nn.ModuleList()
        c_prev = C
        for c, is_res in stage_channels(C, N):
            self.cells.append(ResidualBlock(c_prev, c, 2) if is_res
                              else ReferenceSearchCell(c, ops, track_running_stats))
            c_prev = c
        self.head = Head(c_prev, num_classes)
        self.arch_params = nn.Parameter(1e-3 * torch.randn(len(NB201_EDGES), len(ops)))

    def arch_parameters(self):
        return [self.arch_params]

    def weight_parameters(self):
        return [p for n, p in self.named_parameters() if n != "arch_params"]

    def forward(self, x):
        weights = torch.softmax(self.arch_params, dim=-1)
        h = self.stem(x)
        for cell in self.cells:
            h = cell(h, weights) if isinstance(cell, ReferenceSearchCell) else cell(h)
        return self.head(h)


@torch.no_grad()
def copy_reference_into(ours: NB201SuperNet, ref: ReferenceSuperNet) -> None:
    """Give ``ours`` the reference's weights: shared modules by name, cell convs by edge."""
    ours.arch_params.copy_(ref.arch_params)
    ours.stem.load_state_dict(ref.stem.state_dict())
    ours.head.load_state_dict(ref.head.state_dict())
    for mine, theirs in zip(ours.cells, ref.cells, strict=True):
        if not isinstance(mine, SearchCell):
            mine.load_state_dict(theirs.state_dict())
    ref_cells = [c for c in ref.cells if isinstance(c, ReferenceSearchCell)]
    for k, theirs in enumerate(ref_cells):
        for edge in NB201_EDGES:
            for name in CONV_KERNELS:
                if name in ours.ops:
                    conv = theirs.edges[edge].ops[ours.ops.index(name)].op[1]
                    ours.edge_weight(k, edge, name).copy_(conv.weight)


def grads_by_ours_name(ours: NB201SuperNet, ref: ReferenceSuperNet) -> list[tuple]:
    """(name, our grad, reference grad) for every parameter of ours (cell convs per edge)."""
    out = [("arch_params", ours.arch_params.grad, ref.arch_params.grad)]
    for part in ("stem", "head"):
        for (n, p), (_, q) in zip(getattr(ours, part).named_parameters(),
                                  getattr(ref, part).named_parameters(), strict=True):
            out.append((f"{part}.{n}", p.grad, q.grad))
    ref_cells = [c for c in ref.cells if isinstance(c, ReferenceSearchCell)]
    for mine, theirs in zip(ours.cells, ref.cells, strict=True):
        if not isinstance(mine, SearchCell):
            for (n, p), (_, q) in zip(mine.named_parameters(), theirs.named_parameters(),
                                      strict=True):
                out.append((f"res.{n}", p.grad, q.grad))
    for k, (mine, theirs) in enumerate(zip(ours.search_cells(), ref_cells, strict=True)):
        for edge in NB201_EDGES:
            for name in CONV_KERNELS:
                if name in ours.ops:
                    slot = int(edge[0]) - int(edge[-1]) - 1
                    c = mine.channels
                    g = mine.convs[f"{name}_from{edge[-1]}"].grad[slot * c:(slot + 1) * c]
                    conv = theirs.edges[edge].ops[ours.ops.index(name)].op[1]
                    out.append((f"cell{k}.{edge}.{name}", g, conv.weight.grad))
    return out


def _grad_error(ours, ref, norm: str = "max") -> float:
    """Worst per-parameter gradient difference relative to that gradient ('max' or 'l2' norm)."""
    worst = 0.0
    for _, g, h in grads_by_ours_name(ours, ref):
        d = g.double() - h.double()
        if norm == "max":
            rel = d.abs().max().item() / max(h.abs().max().item(), 1e-12)
        else:
            rel = d.norm().item() / max(h.double().norm().item(), 1e-12)
        worst = max(worst, rel)
    return worst


def max_differences(ours, ref, x, y) -> dict:
    """Logit and gradient differences of ours vs the reference after one backward.

    ``float64``: both in double precision, max-norm errors: the implementations must agree to
    rounding. ``float32_vs_float64``: ours in float32 against the double-precision reference,
    relative L2 errors: float32 rounding can move a value across a ReLU's kink, which changes
    single gradient entries by O(1) (in either implementation), so max-norms say little there.
    """
    out = {}
    ours64, ref64 = copy.deepcopy(ours).double(), copy.deepcopy(ref).double()
    for name, a, b, xa in (("float64", ours64, ref64, x.double()),
                           ("float32_vs_float64", ours, ref64, x)):
        for m in (a, b):
            m.zero_grad(set_to_none=True)
        la, lb = a(xa), b(x.double())
        F.cross_entropy(la, y).backward()
        F.cross_entropy(lb, y).backward()
        out[name] = {"logits_abs": (la.double() - lb).abs().max().item(),
                     "grads_rel": _grad_error(a, b, "max" if name == "float64" else "l2")}
        a.zero_grad(set_to_none=True)
    return out


# ----------------------------------------------------------------------------- timing
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


def make_pair(cfg, seed=0):
    """Reference and ours with identical weights for one config."""
    torch.manual_seed(seed)
    kw = dict(C=cfg["C"], N=cfg["N"], num_classes=10, in_channels=cfg["in_channels"])
    ref = ReferenceSuperNet(**kw)
    ours = NB201SuperNet(**kw)
    copy_reference_into(ours, ref)
    return ours, ref


def make_batches(cfg, seed=1):
    g = torch.Generator().manual_seed(seed)
    shape = (cfg["batch"], cfg["in_channels"], cfg["size"], cfg["size"])
    xt, xv = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    yt = torch.randint(0, 10, (cfg["batch"],), generator=g)
    yv = torch.randint(0, 10, (cfg["batch"],), generator=g)
    return xt, yt, xv, yv


def make_models(cfg, impl, seed=0):
    """The model of one implementation: 'ours', 'ours_nchw' (no channels_last) or 'reference'."""
    ours, ref = make_pair(cfg, seed)
    if impl == "reference":
        return ref
    ours.channels_last = impl == "ours"
    return ours


IMPLS = ("ours", "ours_nchw", "reference")


def worker_time(cfg, steps, warmup, impls=IMPLS):
    """Interleaved timing of ours, ours without channels_last, and the reference."""
    ours, ref = make_pair(cfg)
    data = make_batches(cfg)
    diff = max_differences(ours, ref, data[2][:16], data[3][:16])
    del ours, ref
    runners = {impl: Bilevel(make_models(cfg, impl)) for impl in impls}
    times = {k: [] for k in runners}
    for s in range(warmup + steps):
        for name, r in runners.items():
            t0 = time.perf_counter()
            r.step(*data)
            if s >= warmup:
                times[name].append(time.perf_counter() - t0)
    return {"ms": {k: 1000 * statistics.median(v) for k, v in times.items()},
            "ms_all": {k: [round(1000 * t, 2) for t in v] for k, v in times.items()},
            "equality": diff}


def worker_memory(cfg, impl, steps=2):
    """Peak RSS growth (MiB) of a few bilevel steps of one implementation in this process."""
    model = make_models(cfg, impl)
    data = make_batches(cfg)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    runner = Bilevel(model)
    for _ in range(steps):
        runner.step(*data)
    return {"peak_rss_delta_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base)
            / 1024}


def run_worker(args):
    torch.set_num_threads(args.threads)
    cfg = json.loads(args.worker)
    if args.memory:
        res = worker_memory(cfg, args.memory)
    else:
        impls = tuple(i for i in IMPLS if not (args.no_nchw and i == "ours_nchw"))
        res = worker_time(cfg, args.steps, args.warmup, impls)
    print(json.dumps(res))


def spawn(cfg, args, extra):
    cmd = [sys.executable, __file__, "--worker", json.dumps(cfg), "--threads", str(args.threads),
           "--steps", str(args.steps), "--warmup", str(args.warmup), *extra]
    if args.no_nchw:
        cmd.append("--no-nchw")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


FULL = [dict(C=16, N=5, batch=64, size=s, in_channels=3, name=f"full C16 N5 {s}x{s}")
        for s in (8, 16, 32)]
DIGITS = [dict(C=c, N=n, batch=64, size=s, in_channels=1, name=f"digits C{c} N{n} {s}x{s}")
          for s in (8, 16) for c, n in ((8, 1), (8, 2), (16, 1))]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="folder for nas_step.json")
    p.add_argument("--quick", action="store_true", help="8x8 full supernet and 2 digits configs")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=5, help="timed steps per implementation")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocesses")
    p.add_argument("--only", default="", help="run only configs whose name contains this")
    p.add_argument("--no-nchw", action="store_true", help="do not time ours without channels_last")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--memory", choices=IMPLS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return run_worker(args)
    if args.out is None:
        p.error("--out DIR is required")
    configs = ([FULL[0], DIGITS[0], DIGITS[3]] if args.quick else FULL + DIGITS)
    configs = [c for c in configs if args.only in c["name"]]
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for cfg in configs:
        res = {"config": cfg, **spawn(cfg, args, [])}
        res["ratio"] = res["ms"]["ours"] / res["ms"]["reference"]
        if "ours_nchw" in res["ms"]:
            res["ratio_nchw"] = res["ms"]["ours_nchw"] / res["ms"]["reference"]
        if not args.no_memory:
            mem = {impl: spawn(cfg, args, ["--memory", impl])["peak_rss_delta_mib"]
                   for impl in ("ours", "reference")}
            res["peak_rss_delta_mib"] = mem
            res["memory_ratio"] = mem["ours"] / max(mem["reference"], 1e-9)
        results.append(res)
        nchw = (f" (NCHW {res['ms']['ours_nchw']:7.1f} ms, ratio {res['ratio_nchw']:.2f})"
                if "ratio_nchw" in res else "")
        line = (f"{cfg['name']:>22}: ours {res['ms']['ours']:7.1f} ms  reference "
                f"{res['ms']['reference']:7.1f} ms  ratio {res['ratio']:.2f}{nchw}")
        if "peak_rss_delta_mib" in res:
            line += (f"  peak RSS +{mem['ours']:.0f} / +{mem['reference']:.0f} MiB")
        eq = res["equality"]
        line += (f"  float64 |dlogit| {eq['float64']['logits_abs']:.0e} grad rel "
                 f"{eq['float64']['grads_rel']:.0e}")
        print(line, flush=True)
    meta = {"threads": args.threads, "steps": args.steps, "warmup": args.warmup,
            "torch": torch.__version__, "command": " ".join(sys.argv)}
    name = "nas_step.json" if not args.only else f"nas_step_{args.only.replace(' ', '_')}.json"
    (args.out / name).write_text(json.dumps({"meta": meta, "results": results},
                                                       indent=1))
    print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()
