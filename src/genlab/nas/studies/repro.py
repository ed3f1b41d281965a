"""How far does `genlab nas search --reg ber --seed 0` move with threads and with last-bit noise?

A search is chaotic in its floating-point rounding: parallel CPU kernels split their sums over
the intra-op threads, so the thread count changes the last bits of every step, and a bilevel
search amplifies them. This script runs the default `ber` search of one seed as:

- ``threads1``: the reference, `--threads 1` (the default);
- ``threads1-again``: the same command once more (must be identical: the fix works);
- ``threads2``: `--threads 2`;
- ``init-eps-K``: `--threads 1` with every initial parameter (weights and alpha) multiplied by
  (1 + 1e-6 z), z ~ N(0, 1) from stream K: a change of about ten float32 ulps, standing in for
  another CPU whose kernels round differently (another instruction set, another library);
- ``no-onednn``: `--threads 1` with torch's oneDNN (mkldnn) convolutions switched off, so the
  convolutions run through another kernel with another summation order: the same data, the
  same start, different rounding, as on a machine whose library picks another algorithm.

The perturbed starts are written as a step-0 checkpoint of the very network the search builds
and then resumed, so the search code is the one users run; with eps = 0 this reproduces the
plain search exactly (tested). Compared with the reference: the derived genotype, the final
mean edge entropy, the parameter-free edges, the NB201 CIFAR-10 accuracy of the derived cell,
the distance between the final alphas, and the first logging step whose architecture weights
differ by more than 1e-3 (where the trajectories part).

    genlab nas repro --out runs/repro --shard 0/2 [--resume]   # shards in parallel, then
    genlab nas repro --out runs/repro --resume                 # aggregates

Writes OUT/repro.json, repro.md and repro.png (the distance to the reference over the steps).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from genlab.core.options import option, option_like
from genlab.core.report import figure, markdown_table
from genlab.core.runs import SUMMARY, RunDir, atomic_write_bytes, read_json, write_json
from genlab.core.seeding import capture_rng_state, fixed_threads, seed_everything
from genlab.core.studies import Study, markdown_report, register_study
from genlab.nas.architect import bilevel_step
from genlab.nas.bench import run_stage
from genlab.nas.data import load_image_data
from genlab.nas.regularizers import make_regularizer
from genlab.nas.search import SearchConfig, run_config, run_search
from genlab.nas.spaces import get_space, resolve_table
from genlab.nas.spaces.nb201.supernet import NB201SuperNet
from genlab.nas.spaces.nb201.table import NB201Table
from genlab.nas.studies.ber_select import parse_shard

EPS = 1e-6
PART_THRESHOLD = 1e-3
VARIANTS = {  # name -> (threads, perturbation stream or None, oneDNN convolutions on)
    "threads1": (1, None, True), "threads1-again": (1, None, True), "threads2": (2, None, True),
    "init-eps-0": (1, 0, True), "init-eps-1": (1, 1, True), "init-eps-2": (1, 2, True),
    "no-onednn": (1, None, False),
}


@torch.no_grad()
def write_perturbed_start(cfg: SearchConfig, folder: Path, stream: int, eps: float) -> None:
    """A step-0 checkpoint of the search's own initial network, each parameter x (1 + eps z)."""
    cfg = cfg.resolved()
    run = RunDir(folder, run_config(cfg))  # the config the search itself writes
    seed_everything(cfg.seed)  # the same draws, in the same order, as run_search
    data = load_image_data(cfg.dataset, cfg.data_root, size=cfg.size, seed=cfg.seed)
    space = get_space(cfg.space)
    net = space.build_supernet(num_classes=data.num_classes, in_channels=data.in_channels,
                               channels=cfg.channels, cells=cfg.cells, **space.proxy.options)
    rng_state = capture_rng_state()
    g = torch.Generator().manual_seed(stream)
    for p in net.parameters():
        p.mul_(1 + eps * torch.randn(p.shape, generator=g))
    # the optimisers exactly as the search makes them: loading a state restores its settings
    a_opt = torch.optim.Adam(net.arch_parameters(), lr=cfg.arch_lr, betas=(0.5, 0.999),
                             weight_decay=cfg.arch_weight_decay)
    w_opt = torch.optim.SGD(net.weight_parameters(), lr=cfg.w_lr, momentum=cfg.w_momentum,
                            weight_decay=cfg.w_weight_decay, nesterov=False)
    run.save({"net": net.state_dict(), "a_opt": a_opt.state_dict(), "w_opt": w_opt.state_dict(),
              "rng": rng_state, "step": 0, "elapsed": 0.0})


def run_variant(out: Path, name: str, base: SearchConfig, eps: float = EPS) -> dict:
    """One variant's search (reused when finished, resumed when killed) and its CPU seconds."""
    threads, stream, onednn = VARIANTS[name]
    cfg = replace(base, threads=threads)
    return run_stage(f"repro {name}", variant_search, cfg, out / "search" / name,
                     run_config(cfg.resolved()), stream=stream, eps=eps, onednn=onednn)


def variant_search(cfg: SearchConfig, folder, *, resume: bool, progress_bar=False,
                   stream: int | None, eps: float, onednn: bool) -> dict:
    """The search of one variant: from its perturbed start (``stream``), with oneDNN on or off;
    its wall and CPU seconds go to timing.json."""
    folder = Path(folder)
    fresh = not resume
    if stream is not None and fresh:
        write_perturbed_start(cfg, folder, stream, eps)
    t0, c0 = time.perf_counter(), time.process_time()
    before, torch.backends.mkldnn.enabled = torch.backends.mkldnn.enabled, onednn
    try:
        summary = run_search(cfg, folder, resume=not fresh or stream is not None,
                             progress_bar=False)
    finally:
        torch.backends.mkldnn.enabled = before
    write_json(folder / "timing.json", {"wall_s": time.perf_counter() - t0,
                                        "cpu_s": time.process_time() - c0,
                                        "whole_run": fresh})
    return summary


def thread_speed(base: SearchConfig, blocks: int = 8, steps_per_block: int = 15) -> dict:
    """Wall seconds per bilevel step at 1 and 2 threads, blocks interleaved in one process."""
    base = base.resolved()  # the proxy's size, width and depth
    seed_everything(0)
    data = load_image_data(base.dataset, base.data_root, size=base.size, seed=0)
    net = NB201SuperNet(C=base.channels, N=base.cells, num_classes=data.num_classes,
                        in_channels=data.in_channels)
    a_opt = torch.optim.Adam(net.arch_parameters(), lr=base.arch_lr, betas=(0.5, 0.999))
    w_opt = torch.optim.SGD(net.weight_parameters(), lr=base.w_lr, momentum=base.w_momentum)
    reg = make_regularizer(base.reg)
    x, y = data.train.images[:base.batch_size], data.train.labels[:base.batch_size]
    times = {1: [], 2: []}
    for block in range(blocks + 1):  # block 0 warms both up and is not counted
        for threads in (1, 2):
            with fixed_threads(threads):
                t0 = time.perf_counter()
                for step in range(steps_per_block):
                    bilevel_step(net, a_opt, w_opt, (x, y), (x, y), reg, step, 100, 5.0)
                if block:
                    times[threads].append((time.perf_counter() - t0) / steps_per_block)
    med = {t: statistics.median(v) for t, v in times.items()}
    return {"s_per_step_1_thread": med[1], "s_per_step_2_threads": med[2],
            "speedup_2_over_1": med[1] / med[2], "blocks": blocks,
            "steps_per_block": steps_per_block}


def weight_curve(folder: Path) -> tuple[list[int], np.ndarray]:
    """Logging steps and the (steps, edges, ops) architecture weights of one search."""
    rows = [json.loads(ln) for ln in (folder / "metrics.jsonl").read_text().splitlines()
            if ln.strip()]
    return [r["step"] for r in rows], np.array([r["arch_weights"]["cell"] for r in rows])


def compare(out: Path, names: list[str], table: NB201Table | None) -> dict:
    """Each variant against the reference ``threads1``: cell, entropy, alpha distance, parting."""
    ref_name = names[0]
    ref = read_json(out / "search" / ref_name / SUMMARY)
    ref_steps, ref_w = weight_curve(out / "search" / ref_name)
    ref_alpha = np.array(ref["alpha"]["cell"])
    rows, curves = [], {}
    for name in names:
        s = read_json(out / "search" / name / SUMMARY)
        steps, w = weight_curve(out / "search" / name)
        if steps != ref_steps:
            raise RuntimeError(f"{name}: logging steps differ from {ref_name}")
        dist = np.abs(w - ref_w).max(axis=(1, 2))
        curves[name] = dist.tolist()
        parted = np.flatnonzero(dist > PART_THRESHOLD)
        timing = out / "search" / name / "timing.json"
        rows.append({
            "variant": name, "threads": VARIANTS[name][0],
            "genotype": "`" + s["genotype"].replace("|", "\\|") + "`",
            "same cell": s["genotype"] == ref["genotype"], "p-free": s["param_free_ops"],
            "entropy": s["mean_entropy"],
            "C10": table.lookup(s["genotype"])["cifar10"] if table is not None else None,
            "max |alpha - ref|": float(np.abs(np.array(s["alpha"]["cell"]) - ref_alpha).max()),
            "parts at step": int(ref_steps[parted[0]]) if len(parted) else None,
            "CPU s": read_json(timing)["cpu_s"] if timing.exists() else None})
    others = [r for r in rows if r["variant"] not in (ref_name, ref_name + "-again")]
    spread = {"distinct_cells": len({r["genotype"] for r in rows}),
              "entropy_range": [min(r["entropy"] for r in rows), max(r["entropy"] for r in rows)],
              "p_free_range": [min(r["p-free"] for r in rows), max(r["p-free"] for r in rows)],
              "parting_steps": [r["parts at step"] for r in others]}
    if table is not None:
        c10 = [r["C10"] for r in rows]
        spread.update(c10_range=[min(c10), max(c10)], c10_std=statistics.stdev(c10))
    return {"rows": rows, "spread": spread, "steps": ref_steps, "distance_curves": curves,
            "eps": EPS, "part_threshold": PART_THRESHOLD}


def plot_distances(result: dict):
    """Max |softmax(alpha) - reference| over the search, per variant (log scale)."""
    fig, axes = figure(width=5.6, height=3.8)
    ax = axes[0, 0]
    for name, curve in result["distance_curves"].items():
        if any(v > 0 for v in curve):
            ax.semilogy(result["steps"], np.maximum(curve, 1e-12), label=name)
    ax.axhline(PART_THRESHOLD, c="grey", ls="--", lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("max |arch weights - threads1|")
    ax.set_title("how fast rounding differences grow")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


@dataclass
class ReproConfig:
    """The options of `genlab nas repro`."""

    reg: str = option("ber", help="The penalty of the searches (--reg of nas search).")
    seed: int = option(0, help="The searches' seed.", ge=0)
    steps: int | None = option_like(SearchConfig, "steps")
    nb201_table: str | None = option_like(SearchConfig, "nb201_table")
    shard: str | None = option(None, help="I/N: run every N-th variant from I, no aggregate; "
                               "the shards run in parallel.")


def run_repro(cfg: ReproConfig, out: str | Path, *, resume: bool = False) -> dict:
    """The variants (a shard of them), then the comparison; the folder is always continued
    (each variant is its own run folder)."""
    out = Path(out)
    base = replace(SearchConfig(), reg=cfg.reg, seed=cfg.seed, steps=cfg.steps,
                   nb201_table=None)
    names = list(VARIANTS)
    if cfg.shard:
        i, n = parse_shard(cfg.shard)
        for name in names[i::n]:
            run_variant(out, name, base)
        return {"shard": cfg.shard, "variants": names[i::n]}
    for name in names:
        run_variant(out, name, base)
    table = resolve_table(cfg.nb201_table)
    result = compare(out, names, table)
    result["config"] = asdict(base)
    result["thread_speed"] = thread_speed(base)
    write_json(out / "repro.json", result)
    md = (markdown_table(result["rows"], digits=4) + f"\nspread: {result['spread']}\n"
          + f"\nthread speed (wall, interleaved, one process): {result['thread_speed']}\n")
    atomic_write_bytes(out / "repro.md", md.encode())
    fig = plot_distances(result)
    fig.savefig(out / "repro.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return {**result, "markdown": md}


def report(summary: dict, cfg: ReproConfig) -> list:
    if "shard" in summary:
        return [f"shard {summary['shard']}: {', '.join(summary['variants'])} done"]
    return markdown_report(summary)


STUDY = register_study(Study("repro", ReproConfig, run_repro, report))
