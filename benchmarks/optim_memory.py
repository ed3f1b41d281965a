"""Peak memory of the streaming measures on a ResNet-18-sized model at batch 128.

A CIFAR ResNet-18 (genlab.optim.training.models, ``resnet`` width 64 depth 2: 11.2M
parameters, 3x32x32 inputs, 10 classes; BatchNorm in eval mode as every per-sample measure
uses) and 128 random images. Each measure runs in a fresh process, which reports its
resident memory before the measure (model and data loaded), its peak resident memory
(``ru_maxrss``) and their difference, and its CPU time:

- ``noise``: tr Sigma, gradient diversity and noise scale (``gradient_noise_stats``, the
  per-layer path, the 128 samples in one chunk);
- ``curvature``: s = sqrt(lambda_max(Sigma_H)) (``curvature_nonuniformity``, per-sample
  Hessian-vector products by vmap, ``--curvature-chunk`` samples at a time) for
  ``--iterations`` power iterations; memory does not grow with the iterations.

For comparison, the (b, d) matrix of per-sample gradients that the previous
implementation formed per chunk would take 128 x 11.2M x 4 bytes = 5.7 GB.

    python benchmarks/optim_memory.py --out runs/bench     # ~10 min on 1 core

Writes ``optim_memory.json`` to ``--out`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

from genlab.core.report import markdown_table
from genlab.core.runs import write_json

BATCH = 128


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_part(part: str, image_size: int, curvature_chunk: int, iterations: int) -> dict:
    """One measure in this process; figures as a dict."""
    from genlab.optim.measures.hessian import curvature_nonuniformity
    from genlab.optim.measures.per_sample import gradient_noise_stats
    from genlab.optim.training.models import build_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_model("resnet", 64, 2, in_channels=3, image_size=image_size).eval()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, 3, image_size, image_size, generator=gen)
    y = torch.randint(0, 10, (BATCH,), generator=gen)
    loss = nn.CrossEntropyLoss()
    before = rss_mb()
    c0, w0 = time.process_time(), time.perf_counter()
    if part == "noise":
        stats = gradient_noise_stats(model, loss, x, y, chunk_size=BATCH)
        values = {k: stats[k] for k in ("trace_sigma", "gradient_diversity", "noise_scale")}
        detail = f"chunk {BATCH}"
    else:
        values = {"curvature_nonuniformity": curvature_nonuniformity(
            model, loss, x, y, iterations=iterations, tol=0.0, chunk_size=curvature_chunk)}
        detail = f"chunk {curvature_chunk}, {iterations} power iteration(s)"
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    peak = peak_mb()
    return {"measure": part, "detail": detail,
            "params": sum(p.numel() for p in model.parameters()), "batch": BATCH,
            "image_size": image_size, "rss_before_mb": before, "peak_rss_mb": peak,
            "growth_mb": peak - before, "cpu_s": cpu, "wall_s_under_load": wall, **values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--curvature-chunk", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--part", choices=("noise", "curvature"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:  # child process: one measure, JSON on stdout
        print(json.dumps(run_part(args.part, args.image_size, args.curvature_chunk,
                                  args.iterations)))
        return
    if args.out is None:
        parser.error("--out is required")
    rows = []
    for part in ("noise", "curvature"):
        cmd = [sys.executable, __file__, "--part", part, "--image-size", str(args.image_size),
               "--curvature-chunk", str(args.curvature_chunk),
               "--iterations", str(args.iterations)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"{part}: peak {rows[-1]['peak_rss_mb']:.0f} MB", flush=True)
    params = rows[0]["params"]
    summary = {"rows": rows, "materialised_gb": BATCH * params * 4 / 1e9,
               "torch": torch.__version__}
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "optim_memory.json", summary)
    print(markdown_table(rows, ["measure", "detail", "params", "batch", "rss_before_mb",
                                "peak_rss_mb", "growth_mb", "cpu_s", "wall_s_under_load"],
                         digits=1))
    print(f"(b, d) per-sample gradient matrix: {summary['materialised_gb']:.1f} GB")
    print(f"wrote {args.out / 'optim_memory.json'}")


if __name__ == "__main__":
    main()
