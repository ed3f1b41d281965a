"""Does the batch entropy of the search cells peak before the parameter-free ops start to rise?

BER-peak (a candidate penalty that acts only after the running peak of the cells' batch
entropy) makes sense only if that peak, the information-bottleneck turning point, comes before
the collapse. This script answers it on plain DARTS (`--reg none`, today's search at its
defaults) for seeds 0, 1, 2: at every logging step it reads the outputs of every node of every
search cell and records their batch entropy (Peer et al.'s estimator, genlab.nas.entropy).

How the nodes are read: the fused supernet returns only each cell's output, so a global module
forward hook catches each search cell's input and architecture weights during the diagnostic
forward of every logging step (the only forward without gradients in a search) and recomputes
the cell node by node, edge by edge, from the cell's own kernels (plain conv + BatchNorm with
batch statistics, as the fused cell computes in training mode). The recomputed output must
equal the fused one (checked at every step), and the earlier estimator on it must reproduce the
`cell_batch_entropy` that the search logs. The search itself is untouched: the hook reads, never
writes, and consumes no random numbers.

The collapse side, from the search's metrics: the parameter-free weight (mean over edges of the
softmax mass on none, skip_connect and avg_pool_3x3; uniform: 0.6) and the parameter-free edge
count of the argmax cell. The rise starts at the last minimum of the parameter-free weight
(after it, the weight only climbs away); the peak is the step of the largest batch entropy of
nodes 1-3 (mean over nodes and cells), raw and after a 9-point moving average, and "peak
before rise" needs both before the rise.

    genlab nas entropy-peak --out runs/entropy_peak [--dataset NAME] [--seeds 0,1,2] [--resume]

Writes OUT/DATASET/peak.json, peak.md and peak.png; a killed run is resumed (each seed's
search is its own run folder).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from genlab.core.options import option, option_like
from genlab.core.report import figure, markdown_table
from genlab.core.runs import CHECKPOINT, SUMMARY, atomic_write_bytes, write_json
from genlab.core.studies import Study, markdown_report, register_study
from genlab.nas.entropy import batch_entropy, gaussian_batch_entropy
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import get_space
from genlab.nas.spaces.nb201.genotype import NB201_NODES
from genlab.nas.spaces.nb201.supernet import SearchCell, edge_index
from genlab.nas.supernet.ops import CONV_KERNELS, PARAM_FREE_OPS

NODE_FILE = "node_entropy.jsonl"  # one line per logging step, aligned with metrics.jsonl
RISE_MARGIN = 0.02  # the parameter-free weight must end this far above its last minimum
SMOOTH = 9  # logging steps (about 100 bilevel steps) in the smoothed entropy curve
NODE_COLOURS = ("tab:grey", "tab:blue", "tab:green", "tab:purple")  # red: p-free weight


@torch.no_grad()
def cell_nodes(cell: SearchCell, x: torch.Tensor, weights: torch.Tensor) -> list[torch.Tensor]:
    """Nodes 0..3 of a search cell, edge by edge from the cell's kernels (batch-statistics BN)."""
    nodes = [x]
    for i in range(1, NB201_NODES + 1):
        total = torch.zeros_like(x)
        for j in range(i):
            w, h = weights[edge_index(i, j)], nodes[j]
            for k, op in enumerate(cell.ops):
                if op == "skip_connect":
                    total = total + w[k] * h
                elif op == "avg_pool_3x3":
                    total = total + w[k] * F.avg_pool2d(h, 3, 1, 1, count_include_pad=False)
                elif op in CONV_KERNELS:
                    kern = cell.edge_weight(f"{i}<-{j}", op)
                    y = F.conv2d(F.relu(h), kern, padding=CONV_KERNELS[op] // 2)
                    total = total + w[k] * F.batch_norm(y, None, None, training=True,
                                                        eps=cell.bn_eps)
        nodes.append(total)
    return nodes


class NodeProbe:
    """Global forward hook: per-node batch entropies of the search cells in each diagnostic pass.

    A pass visits the ``n_cells`` search cells in order; when it is complete, one JSON line
    (the cells' records) is appended to ``path``. Lines are aligned with metrics.jsonl by count.
    """

    def __init__(self, n_cells: int, path: Path):
        self.n_cells, self.path = n_cells, path
        self.pending: list[dict] = []
        self.handle = torch.nn.modules.module.register_module_forward_hook(self._hook)

    def _hook(self, module, args, output):
        if not isinstance(module, SearchCell) or torch.is_grad_enabled():
            return
        x, weights = args[0], args[1]
        nodes = cell_nodes(module, x, weights)
        output = output[-1]  # the cell returns its nodes 1..3; the last is its output
        err = float((nodes[-1] - output).abs().max() / output.abs().max().clamp_min(1e-12))
        if err > 1e-4:
            raise RuntimeError(f"node recomputation disagrees with the fused cell ({err:.2e})")
        self.pending.append({"peer": [float(batch_entropy(n)) for n in nodes],
                             "gaussian_out": float(gaussian_batch_entropy(nodes[-1])),
                             "recompute_err": err})
        if len(self.pending) == self.n_cells:
            with open(self.path, "a") as fh:
                fh.write(json.dumps({"cells": self.pending}) + "\n")
            self.pending = []

    def close(self) -> None:
        self.handle.remove()


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def probed_search(cfg: SearchConfig, folder: Path) -> list[dict]:
    """Run (or resume, or reuse) one search with the probe; metrics records with their nodes.

    Each record gains ``nodes``: per search cell, Peer's batch entropy of nodes 0..3. The
    pairing is checked: the earlier estimator on the recomputed cell outputs must reproduce
    the record's ``cell_batch_entropy``.
    """
    cfg = cfg.resolved()
    node_file = folder / NODE_FILE
    if not ((folder / SUMMARY).exists() and node_file.exists()):
        resume = (folder / "config.json").exists()
        keep = torch.load(folder / CHECKPOINT, weights_only=True)["metrics_lines"] \
            if resume and (folder / CHECKPOINT).exists() else 0
        if resume:  # the node records the checkpoint's metrics keep (a new run's probe
            # creates the file once the search has made its folder: nothing is written first)
            lines = node_file.read_text().splitlines(keepends=True)[:keep] \
                if node_file.exists() else []
            atomic_write_bytes(node_file, "".join(lines).encode())
        probe = NodeProbe(3 * cfg.cells, node_file)
        try:
            run_search(cfg, folder, resume=resume, progress_bar=False)
        finally:
            probe.close()
    metrics, nodes = _read_jsonl(folder / "metrics.jsonl"), _read_jsonl(node_file)
    if len(metrics) != len(nodes):
        raise RuntimeError(f"{folder}: {len(metrics)} metrics records but {len(nodes)} node "
                           "records; delete the folder and rerun")
    for m, n in zip(metrics, nodes, strict=True):
        got = statistics.fmean(c["gaussian_out"] for c in n["cells"])
        if abs(got - m["cell_batch_entropy"]) > 1e-4 * max(1.0, abs(got)):
            raise RuntimeError(f"{folder}: node record of step {m['step']} does not match its "
                               f"metrics ({got} vs {m['cell_batch_entropy']})")
        m["nodes"] = [c["peer"] for c in n["cells"]]
    return metrics


def param_free_weight(record: dict, ops) -> float:
    """Mean over edges of the softmax mass on parameter-free ops."""
    free = [k for k, op in enumerate(ops) if op in PARAM_FREE_OPS]
    return statistics.fmean(sum(row[k] for k in free) for row in record["arch_weights"]["cell"])


def rise_onset(steps: list[int], values: list[float], margin: float = RISE_MARGIN) -> int | None:
    """Step of the last minimum of ``values`` after which they end ``margin`` higher; else None."""
    arr = np.asarray(values)
    k = int(np.flatnonzero(arr == arr.min())[-1])
    return steps[k] if arr[-1] - arr[k] >= margin else None


def count_onset(steps: list[int], counts: list[int]) -> int | None:
    """First step from which the argmax cell's parameter-free count stays above its minimum."""
    low = min(counts)
    above = [c > low for c in counts]
    if not above[-1]:
        return None
    k = len(above) - 1
    while k > 0 and above[k - 1]:
        k -= 1
    return steps[k]


def moving_average(values, window: int) -> np.ndarray:
    """Centred moving average; near the ends the window shrinks to the points available."""
    values = np.asarray(values, float)
    kernel = np.ones(window)
    return np.convolve(values, kernel, "same") / np.convolve(np.ones_like(values), kernel, "same")


def analyse(metrics: list[dict], ops) -> dict:
    """Peak of the node batch entropy and the onset of the parameter-free rise for one search."""
    steps = [m["step"] for m in metrics]
    per_node = np.array([m["nodes"] for m in metrics])  # (steps, cells, 4 nodes)
    inner = per_node[:, :, 1:].mean(axis=(1, 2))  # intermediate and output nodes, all cells
    pfw = [param_free_weight(m, ops) for m in metrics]
    counts = [m["param_free_ops"] for m in metrics]
    peak = steps[int(np.argmax(inner))]
    smooth_peak = steps[int(np.argmax(moving_average(inner, SMOOTH)))]
    node_peaks = [[steps[int(np.argmax(per_node[:, c, n]))] for n in range(1, 4)]
                  for c in range(per_node.shape[1])]
    onset = rise_onset(steps, pfw)
    return {"steps": steps, "node_entropy": per_node.tolist(), "mean_node_entropy": inner.tolist(),
            "param_free_weight": pfw, "param_free_count": counts,
            "peak_step": peak, "smoothed_peak_step": smooth_peak, "node_peak_steps": node_peaks,
            "param_free_rise_step": onset, "param_free_count_rise_step": count_onset(steps, counts),
            "peak_before_rise": None if onset is None else max(peak, smooth_peak) < onset,
            "final_genotype": metrics[-1]["genotype"], "final_param_free": counts[-1]}


def plot_peaks(results: dict[int, dict], dataset: str):
    """Per seed: node batch entropy (per node, mean over cells) and the parameter-free weight."""
    fig, axes = figure(ncols=len(results), width=4.6, height=3.6)
    for ax, (seed, r) in zip(axes.flat, results.items(), strict=True):
        per_node = np.array(r["node_entropy"]).mean(axis=1)  # (steps, 4)
        for n, colour in zip(range(per_node.shape[1]), NODE_COLOURS, strict=False):
            ax.plot(r["steps"], per_node[:, n], lw=1, c=colour,
                    label=f"node {n}" + (" (input)" * (n == 0)))
        ax.plot(r["steps"], r["mean_node_entropy"], c="k", lw=1.6, label="mean of nodes 1-3")
        ax.axvline(r["peak_step"], c="k", ls="--", lw=0.8)
        ax.set_xlabel("step")
        ax.set_ylabel("batch entropy (Peer), mean over cells")
        twin = ax.twinx()
        twin.plot(r["steps"], r["param_free_weight"], c="tab:red", lw=1.2)
        if r["param_free_rise_step"] is not None:
            twin.axvline(r["param_free_rise_step"], c="tab:red", ls=":", lw=1)
        twin.set_ylabel("parameter-free weight", color="tab:red")
        ax.set_title(f"{dataset}, none, seed {seed}: peak {r['peak_step']}, "
                     f"rise {r['param_free_rise_step']}", fontsize=9)
    axes.flat[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def summary_rows(results: dict[int, dict]) -> list[dict]:
    return [{"seed": seed, "peak step": r["peak_step"], "smoothed peak": r["smoothed_peak_step"],
             "node peak steps (cells x nodes 1-3)": str(r["node_peak_steps"]),
             "p-free weight rise": r["param_free_rise_step"],
             "p-free count rise": r["param_free_count_rise_step"],
             "peak before rise": r["peak_before_rise"],
             "final p-free": r["final_param_free"],
             "peak H_B": max(r["mean_node_entropy"]), "final H_B": r["mean_node_entropy"][-1]}
            for seed, r in results.items()]


@dataclass
class PeakConfig:
    """The options of `genlab nas entropy-peak`."""

    dataset: str = option_like(SearchConfig, "dataset")
    size: int | None = option_like(SearchConfig, "size")
    seeds: list[int] = option(factory=lambda: [0, 1, 2], parse="seeds",
                              help="Seeds of the `--reg none` searches.")


def run_peak(cfg: PeakConfig, out: str | Path, *, resume: bool = False) -> dict:
    """Every seed's probed search (each resumed when killed), then the peaks and the rise."""
    base = replace(SearchConfig(), reg="none", dataset=cfg.dataset, size=cfg.size,
                   nb201_table=None)
    out = Path(out) / cfg.dataset
    results = {}
    for seed in cfg.seeds:
        search = replace(base, seed=seed)
        metrics = probed_search(search, out / "search" / f"none-s{seed}")
        results[seed] = analyse(metrics, get_space(search.space).ops)
    rows = summary_rows(results)
    seeds = ",".join(map(str, cfg.seeds))
    write_json(out / "peak.json", {"config": asdict(base), "results": results, "rows": rows})
    md = (f"`--reg none` on {cfg.dataset}, seeds {seeds}; batch entropy of Peer et al. "
          "over nodes 1-3 of every search cell (mean), at every logging step.\n\n"
          + markdown_table(rows, digits=3))
    atomic_write_bytes(out / "peak.md", md.encode())
    fig = plot_peaks(results, cfg.dataset)
    fig.savefig(out / "peak.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return {"markdown": md, "rows": rows}


STUDY = register_study(Study("entropy-peak", PeakConfig, run_peak, markdown_report))
