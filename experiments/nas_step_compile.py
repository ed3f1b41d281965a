"""DARTS' bilevel step with the supernet's forward under torch.compile, against eager: does a
compiler cut the launch-bound GPU step (docs/scale.md, "Where the GPU time goes")?

Each mode builds the method's step as benchmarks/nas_methods_step.py does (DARTS space,
upstream size unless --device cpu, where a toy size runs), wraps ``net.forward`` in
``torch.compile(backend=MODE)`` (eager: none), times the first two steps (compilation) and the
median of five after them (synchronised wall seconds on CUDA, process CPU seconds on CPU).

    PYTHONPATH=src python experiments/nas_step_compile.py --device cuda \\
        --methods darts --modes eager,inductor,cudagraphs
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from nas_methods_step import setup, timed  # noqa: E402

TOY = {"size": 8, "batch": 2, "in_channels": 3, "channels": 4, "cells": 2}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--methods", default="darts,pc-darts")
    ap.add_argument("--modes", default="eager,inductor,cudagraphs",
                    help="eager, or torch.compile backends")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    for method in args.methods.split(","):
        for mode in args.modes.split(","):
            torch._dynamo.reset()
            net, step = setup("darts", method, True, args.device, sizes=None if cuda else TOY)
            if mode != "eager":
                net.forward = torch.compile(net.forward, backend=mode, dynamic=False)
            t0 = time.perf_counter()
            for _ in range(2):
                step()
            if cuda:
                torch.cuda.synchronize()
            first = time.perf_counter() - t0
            median = statistics.median(timed(step, args.device) for _ in range(5))
            print(f"{method:9s} {mode:12s} step {median * 1e3:8.1f} ms   first two {first:6.1f} s",
                  flush=True)
            del net, step


if __name__ == "__main__":
    main()
