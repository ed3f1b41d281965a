"""Cost of each search method: its bilevel step time as a ratio to DARTS', and peak memory.

Every method's step is the search loop's own (genlab.nas.architect.bilevel_step with the
method's parts, optimisers by genlab.nas.search.search_optimizers, the supernet its preset
builds), at the middle of a 100-step budget (past PC-DARTS' warm-up, the auxiliary skip at
beta 0.5). In one process, the methods' steps are interleaved (round r runs one step of every
method), so load from other processes hits them alike; the figure is the median over rounds
of process CPU seconds per step (``time.process_time``; wall seconds on a GPU, synchronised),
and the ratio is to DARTS' median in the same run. ``--amp bf16`` runs every step under the
search's own bfloat16 autocast (SearchConfig.amp). Memory: the peak of the tensors autograd
saves during a forward of the step (each storage once), which is what partial channels and
one op per edge save; on a GPU also torch.cuda.max_memory_allocated.

    python benchmarks/nas_methods_step.py --out runs/methods_step      # every space's proxy
    python benchmarks/nas_methods_step.py --out runs/methods_step --upstream \\
        --spaces darts --methods darts,pc-darts,gdas --rounds 3                    # C16 L8 32x32

Rows: every registered method at its preset (first order), ``ber`` (DARTS with BER, genlab's
default search), ``darts-2nd`` (DARTS' second-order step) and ``darts-ckpt`` (DARTS with
per-cell checkpointing, SearchConfig.checkpoint_cells). Each row is set beside its
target (TARGETS, issue 35's, at every space's digits proxy and at the upstream size) and
marked met or missed; the script exits 1 when a target is missed. Writes
DIR/methods_step[_upstream][_bf16].json and .md. benchmarks/gpu_check.py times the same steps
on CUDA.

    python benchmarks/nas_methods_step.py --out runs/methods_step --rss --upstream \\
        --spaces darts                                                             # memory

``--rss``: instead, per row (default: DARTS) two fresh processes, without and with per-cell
checkpointing (SearchConfig.checkpoint_cells): the peak RSS growth over two steps above the
baseline after the set-up, and the steps' seconds; DARTS in the DARTS space at the upstream
size is set beside issue 35's RSS_TARGET_MIB (exit 1 when neither process meets it). Writes
DIR/methods_rss[_upstream].json and .md.
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

from genlab.core.amp import make_precision
from genlab.core.errors import ConfigError, require_choice
from genlab.nas.architect import bilevel_step
from genlab.nas.captured import CapturedStep, capture_blockers
from genlab.nas.methods import method_names, search_method
from genlab.nas.search import (
    SEARCH_PRECISIONS,
    SearchConfig,
    search_optimizers,
    search_regularizer,
)
from genlab.nas.spaces import get_space, space_names

TOTAL, AT = 100, 50  # the step of a 100-step budget that is timed
# Issue 35's targets: a row's step as a multiple of DARTS' first-order step in the same run.
# DARTS- and R-DARTS (DP): the bound against genlab's DARTS (1.2x); R-DARTS (L2) and
# R-DARTS (ES) have none (their step is DARTS' with another weight decay, or DARTS').
TARGETS = {"pc-darts": 0.5, "gdas": 0.5, "sdarts-rs": 1.1, "drnas": 1.1, "beta": 1.1,
           "ber": 1.1, "sdarts-adv": 8.0, "darts-2nd": 2.5, "darts-minus": 1.2,
           "rdarts-dp": 1.2}
# Issue 35: peak RSS of a two-step DARTS-space search at the upstream size, batch 64, above
# the process's baseline (--rss, the DARTS space at --upstream).
RSS_TARGET_MIB = 3 * 1024
UPSTREAM = {"size": 32, "batch": 64, "in_channels": 3, "classes": 10}  # channels, cells: space's


def rows() -> dict[str, dict]:
    """label: setup keywords of every row (each method first order, then ``ber``,
    ``darts-2nd`` and ``darts-ckpt``, DARTS with per-cell checkpointing)."""
    return {**{m: {"method": m} for m in method_names()},
            "ber": {"method": "darts", "reg": "ber"},
            "darts-2nd": {"method": "darts", "order": 2},
            "darts-ckpt": {"method": "darts", "checkpoint_cells": True}}


def setup_row(space: str, label: str, args, **overrides):
    """setup() of the row ``label`` under the command line's size, device and precision."""
    keywords = {**rows()[label], **overrides}
    return setup(space, keywords.pop("method"), args.upstream, args.device, amp=args.amp,
                 **keywords)


def setup(space_name: str, method: str, upstream: bool, device: str, seed: int = 0,
          order: int = 1, amp: str = "off", sizes: dict | None = None, reg: str | None = None,
          checkpoint_cells: bool = False, cuda_graph: bool = False):
    """(net, step function) of one method's search step on a fixed batch, as the search runs
    it: the bilevel step under the autocast of ``amp`` (SearchConfig.amp: off or bf16).

    ``upstream``: the space's upstream width and depth at 32x32, batch 64; else its digits
    proxy. ``sizes`` overrides any of size, batch, in_channels, channels, cells. ``reg``: a
    regulariser other than the method's own (``ber``: genlab's default search).
    ``checkpoint_cells``: SearchConfig.checkpoint_cells. ``cuda_graph``: the step captured in
    a CUDA graph (genlab.nas.captured.CapturedStep: its first steps eager, then replays;
    ConfigError naming what blocks capture)."""
    space = get_space(space_name)
    if upstream:
        dims = {**UPSTREAM, **space.upstream}
    else:  # the digits proxy of the space: what `genlab nas bench` runs
        p = space.proxy
        dims = {"size": p.size, "batch": 64, "in_channels": 1, "channels": p.channels,
                "cells": p.cells}
    unknown = set(sizes or {}) - {"size", "batch", "in_channels", "channels", "cells"}
    if unknown:
        raise ValueError(f"setup: unknown sizes {sorted(unknown)}")
    dims.update(sizes or {})
    size, batch, cin = dims["size"], dims["batch"], dims["in_channels"]
    cfg = SearchConfig(space=space_name, method=method, size=size, channels=dims["channels"],
                       cells=dims["cells"], batch_size=batch, steps=TOTAL, device=device,
                       order=order, amp=amp, reg=reg,
                       checkpoint_cells=checkpoint_cells).resolved(space)
    require_choice("amp", cfg.amp, SEARCH_PRECISIONS)
    parts, penalty = search_method(cfg), search_regularizer(cfg)
    precision = make_precision(cfg.amp, device)
    torch.manual_seed(seed)
    net = space.build_supernet(num_classes=UPSTREAM["classes"], in_channels=cin,
                               channels=dims["channels"], cells=dims["cells"],
                               **{**space.proxy.options, **parts.supernet_options}).to(device)
    net.checkpoint_cells = cfg.checkpoint_cells  # as genlab.nas.search sets it
    parts.attach(net)
    g = torch.Generator().manual_seed(seed + 1)
    batches = [(torch.randn(batch, cin, size, size, generator=g).to(device),
                torch.randint(0, UPSTREAM["classes"], (batch,), generator=g).to(device))
               for _ in range(2)]
    if penalty.needs_probe:  # as the search: the candidate reads the network on a val batch
        penalty.setup(net, batches[1][0], space)
    a_opt, w_opt = search_optimizers(net, cfg, penalty)
    fn = bilevel_step
    if cuda_graph:
        blockers = capture_blockers(cfg.order, cfg.amp, cfg.checkpoint_cells, parts, penalty, net)
        if blockers:
            raise ConfigError(f"{method} cannot be captured: {'; '.join(blockers)}")
        fn = CapturedStep(net, a_opt, w_opt, penalty, torch.device(device))

    def step():
        parts.begin_step(net, AT, TOTAL)
        with precision.autocast():  # as genlab.nas.search wraps it
            fn(net, a_opt, w_opt, batches[0], batches[1], penalty, AT, TOTAL, cfg.grad_clip,
               cfg.order, None, parts)

    step.bilevel = fn  # the step function (a CapturedStep with cuda_graph)

    return net, step


def timed(step, device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        return time.perf_counter() - t0
    c0 = time.process_time()
    step()
    return time.process_time() - c0


def saved_activations_mib(net, step) -> float:
    """Peak, over the forwards of one step, of the tensors autograd saves for the backward
    (each storage once): the activation memory that partial channels and one-op-per-edge
    save, the same figure on every device."""
    seen: dict[int, int] = {}
    peak = [0]

    def reset(*_):
        seen.clear()

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in seen:
            seen[key] = t.untyped_storage().nbytes()
            peak[0] = max(peak[0], sum(seen.values()))
        return t

    handle = net.register_forward_pre_hook(reset)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            step()
    finally:
        handle.remove()
    return peak[0] / 2 ** 20


def saved_by_cell(net, step) -> dict[str, float]:
    """What the last forward of one step saves for the backward (MiB, each storage once), by
    the part that saved it: "stem" (before the first cell), "cell i", "between" (the
    concatenations and the head after a cell); {} for a supernet without ``cells``."""
    if not hasattr(net, "cells"):
        return {}
    seen: dict[int, tuple[str, int]] = {}
    part = ["stem"]

    def reset(*_):
        seen.clear()
        part[0] = "stem"

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in seen:
            seen[key] = (part[0], t.untyped_storage().nbytes())
        return t

    handles = [net.register_forward_pre_hook(reset)]
    for i, cell in enumerate(net.cells):
        handles.append(cell.register_forward_pre_hook(
            lambda *_, i=i: part.__setitem__(0, f"cell {i}")))
        handles.append(cell.register_forward_hook(lambda *_: part.__setitem__(0, "between")))
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            step()
    finally:
        for h in handles:
            h.remove()
    out: dict[str, float] = {}
    for name, size in seen.values():
        out[name] = out.get(name, 0.0) + size / 2 ** 20
    return out


def peak_memory(space: str, label: str, args) -> dict:
    """Saved activations of one step (MiB; under checkpointing those saved outside the
    cells); on a GPU also the allocator's peak."""
    net, step = setup_row(space, label, args)
    step()
    out = {"activations_mib": saved_activations_mib(net, step)}
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        step()
        out["cuda_peak_mib"] = torch.cuda.max_memory_allocated() / 2 ** 20
    return out


def bench_space(space: str, labels: list[str], args) -> dict:
    steps = {m: setup_row(space, m, args)[1] for m in labels}
    for step in steps.values():  # warm-up: one step each
        step()
    seconds = {m: [] for m in labels}
    for _ in range(args.rounds):
        for m, step in steps.items():
            seconds[m].append(timed(step, args.device))
    median = {m: statistics.median(v) for m, v in seconds.items()}
    out = {}
    for m in labels:
        out[m] = {"seconds": median[m], "ratio": median[m] / median["darts"],
                  "target": TARGETS.get(m)}
        if out[m]["target"] is not None:
            out[m]["met"] = out[m]["ratio"] <= out[m]["target"]
        if not args.no_memory:
            out[m].update(peak_memory(space, m, args))
    for m in labels:
        if "activations_mib" in out[m]:
            out[m]["memory_ratio"] = (out[m]["activations_mib"]
                                      / max(out["darts"]["activations_mib"], 1e-9))
    return out


def rss_worker(space: str, label: str, checkpoint_cells: bool, args) -> dict:
    """In this (fresh) process: the peak RSS growth over two steps of one row, above the
    baseline after the set-up (network, optimisers, batches), and each step's seconds."""
    net, step = setup_row(space, label, args, checkpoint_cells=checkpoint_cells)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds = [timed(step, args.device) for _ in range(2)]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {"peak_rss_mib": (peak - base) / 1024, "seconds": seconds}
    if not checkpoint_cells:  # a third step, after the peak: what it saves, by cell
        out["saved_mib_by_cell"] = saved_by_cell(net, step)
    return out


def bench_rss(space: str, labels: list[str], args) -> dict:
    """Per row, a fresh process each without and with per-cell checkpointing (rss_worker)."""
    out = {}
    for m in labels:
        out[m] = {}
        for mode, on in (("plain", False), ("checkpointed", True)):
            cmd = [sys.executable, __file__, "--rss-worker", json.dumps([space, m, on]),
                   "--threads", str(args.threads), "--device", args.device, "--amp", args.amp,
                   *(["--upstream"] if args.upstream else [])]
            text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            out[m][mode] = json.loads(text.strip().splitlines()[-1])
        if args.upstream and space == "darts" and m == "darts":
            out[m]["target_mib"] = RSS_TARGET_MIB
    return out


def rss_markdown(results: dict, args) -> str:
    size = "upstream size (C16, 32x32, batch 64)" if args.upstream else "digits proxy size"
    lines = [f"Peak RSS growth of a fresh process over two steps, {size}, {args.threads} "
             f"thread(s), {args.device}, amp {args.amp}; without / with per-cell "
             "checkpointing (--checkpoint-cells).", "",
             "| space | method | peak RSS MiB | checkpointed | x plain | s / step | checkpointed "
             "| x plain | target |", "|---|---|---|---|---|---|---|---|---|"]
    notes: list[str] = []
    for space, rs in results.items():
        for m, r in rs.items():
            plain, ckpt = r["plain"], r["checkpointed"]
            # the second step: the first pays for the allocator's and kernels' first use
            sp, sc = plain["seconds"][-1], ckpt["seconds"][-1]
            target = "-"
            if "target_mib" in r:
                met = [name for name in ("plain", "checkpointed")
                       if r[name]["peak_rss_mib"] <= r["target_mib"]]
                target = f"<= {r['target_mib']} ({'met: ' + ', '.join(met) if met else 'missed'})"
            if plain.get("saved_mib_by_cell"):
                parts = plain["saved_mib_by_cell"]
                notes.append(f"{space} {m}: saved for the backward (plain, the weight step's "
                             f"forward) {sum(parts.values()):.0f} MiB: " + ", ".join(
                                 f"{k} {v:.0f}" for k, v in parts.items() if v >= 0.5))
            lines.append(f"| {space} | {m} | {plain['peak_rss_mib']:.0f} | "
                         f"{ckpt['peak_rss_mib']:.0f} | "
                         f"{ckpt['peak_rss_mib'] / plain['peak_rss_mib']:.2f} | {sp:.3f} | "
                         f"{sc:.3f} | {sc / sp:.2f} | {target} |")
    return "\n".join(lines + [""] + notes) + "\n"


def rss_missed(results: dict) -> list[str]:
    """'space row' of every row with a memory target that neither mode meets."""
    return [f"{space} {m}" for space, rs in results.items() for m, r in rs.items()
            if "target_mib" in r and min(r["plain"]["peak_rss_mib"],
                                         r["checkpointed"]["peak_rss_mib"]) > r["target_mib"]]


def markdown(results: dict, args) -> str:
    size = "upstream size (C16, 32x32, batch 64)" if args.upstream else "digits proxy size"
    lines = [f"Step cost per method, {size}, {args.threads} thread(s), {args.device}, amp "
             f"{args.amp}; median of "
             f"{args.rounds} interleaved rounds; ratio to DARTS in the same run.", "",
             "| space | method | s / step | x DARTS | target | activations MiB | memory x DARTS |",
             "|---|---|---|---|---|---|---|"]
    for space, rows in results.items():
        for m, r in rows.items():
            target = "-" if r["target"] is None else \
                f"<= {r['target']} ({'met' if r['met'] else 'missed'})"
            mem = f"{r['activations_mib']:.1f}" if "activations_mib" in r else "-"
            mratio = f"{r['memory_ratio']:.2f}" if "memory_ratio" in r else "-"
            lines.append(f"| {space} | {m} | {r['seconds']:.3f} | {r['ratio']:.2f} | "
                         f"{target} | {mem} | {mratio} |")
    return "\n".join(lines) + "\n"


def missed(results: dict) -> list[str]:
    """'space row' of every row over its target."""
    return [f"{space} {m}" for space, rs in results.items() for m, r in rs.items()
            if r.get("met") is False]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("runs/methods_step"))
    p.add_argument("--spaces", default=",".join(space_names()),
                   help="comma-separated (default: every space)")
    p.add_argument("--methods", default=None,
                   help="rows, comma-separated: methods, ber, darts-2nd, darts-ckpt "
                        "(default: every row)")
    p.add_argument("--upstream", action="store_true", help="the space's upstream size")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--amp", default="off", choices=SEARCH_PRECISIONS,
                   help="the search's autocast (SearchConfig.amp)")
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--rss", action="store_true",
                   help="instead of the timing table: the peak RSS and step time of each row "
                        "in fresh processes, without and with per-cell checkpointing")
    p.add_argument("--rss-worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.rss_worker:
        space, label, on = json.loads(args.rss_worker)
        print(json.dumps(rss_worker(space, label, on, args)))
        return 0
    every = rows()
    labels = args.methods.split(",") if args.methods else list(every)
    unknown = [m for m in labels if m not in every]
    if unknown:
        p.error(f"unknown row(s) {', '.join(unknown)}; rows: {', '.join(every)}")
    if "darts" not in labels:
        labels = ["darts"] + labels
    if args.rss and args.methods is None:
        labels = ["darts"]
    table, bench, over_of = (rss_markdown, bench_rss, rss_missed) if args.rss else \
        (markdown, bench_space, missed)
    results = {}
    for space in args.spaces.split(","):
        results[space] = bench(space, labels, args)
        print(table({space: results[space]}, args), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    name = ("methods_rss" if args.rss else "methods_step") + \
        ("_upstream" if args.upstream else "") + ("" if args.amp == "off" else f"_{args.amp}")
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1))
    (args.out / f"{name}.md").write_text(table(results, args))
    print(f"outputs in {args.out}")
    over = over_of(results)
    targets = sum(("target_mib" in r) if args.rss else (r["target"] is not None)
                  for rs in results.values() for r in rs.values())
    print(f"targets: {targets - len(over)} met, {len(over)} missed"
          + (f" ({', '.join(over)})" if over else ""))
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
