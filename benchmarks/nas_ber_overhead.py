"""CPU cost of the force diagnostics and of the BER candidates, as ratios taken in one process.

On the default search (digits, NB201, C=8, N=1, batch 64, one thread) it times, interleaved
so that machine load hits every variant alike, the CPU time (time.process_time) of one whole
bilevel step for each regulariser, with and without the force diagnostics (one extra backward
of CE_val, done at the logging steps only: 1 step in 11). Overhead of the diagnostics on a
search = (forced - plain) / (11 x plain); the candidates' cost = their plain step / none's.

    python benchmarks/nas_ber_overhead.py [--reps 30] [--regs none,ber-kl,ber-op,ber-lbe]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from genlab.core.data import Batches
from genlab.core.seeding import fixed_threads, seed_everything
from genlab.nas.data import load_image_data
from genlab.nas.regularizers import make_regularizer
from genlab.nas.search import SearchConfig, bilevel_step
from genlab.nas.spaces import get_space


def setup(reg_name: str, cfg: SearchConfig):
    seed_everything(0)
    space = get_space(cfg.space)
    data = load_image_data(cfg.dataset, None, size=cfg.size, seed=0)
    net = space.build_supernet(num_classes=data.num_classes, in_channels=data.in_channels,
                               channels=cfg.channels, cells=cfg.cells, **space.proxy.options)
    batches = list(Batches(data.train, cfg.batch_size, seed=1, drop_last=True).epoch(0))
    reg = make_regularizer(reg_name, 1.0, "constant")
    if reg.needs_probe:
        reg.setup(net, batches[0][0], space)
    a_opt = torch.optim.Adam(list(net.arch_parameters()) + reg.parameters(), lr=3e-2,
                             betas=(0.5, 0.999))
    w_opt = torch.optim.SGD(net.weight_parameters(), lr=0.025, momentum=0.9)
    return net, a_opt, w_opt, reg, batches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--regs", default="none,ber-kl,ber-op,ber-lbe")
    args = ap.parse_args()
    cfg = SearchConfig().resolved()
    with fixed_threads(1):
        runs = {r: setup(r, cfg) for r in args.regs.split(",")}
        times = {(r, f): [] for r in runs for f in (False, True)}
        for i in range(args.reps):
            for r, (net, a_opt, w_opt, reg, batches) in runs.items():
                for forced in (False, True):
                    tb, vb = batches[i % len(batches)], batches[(i + 1) % len(batches)]
                    t0 = time.process_time()
                    bilevel_step(net, a_opt, w_opt, tb, vb, reg, i, cfg.steps, 5.0, 1,
                                 {} if forced else None)
                    times[r, forced].append(time.process_time() - t0)
    base = statistics.median(times["none", False])
    print("| reg | CPU s per step (median) | with forces | forces overhead on a search | "
          "step vs none |\n|---|---|---|---|---|")
    for r in runs:
        plain, forced = statistics.median(times[r, False]), statistics.median(times[r, True])
        print(f"| {r} | {plain:.4f} | {forced:.4f} | {100 * (forced - plain) / (11 * plain):.1f}%"
              f" | {plain / base:.2f}x |")


if __name__ == "__main__":
    main()
