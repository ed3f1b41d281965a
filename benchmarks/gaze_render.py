"""Throughput of the procedural eye renderer per domain, and its geometry self-check.

    python benchmarks/gaze_render.py --out runs/bench              # 1024 images per domain
    python benchmarks/gaze_render.py --out runs/bench --count 256  # quicker

Writes DIR/gaze_render.json with, per domain and thread count: wall-clock images/s
and images per CPU-second (process time, which stays meaningful when other jobs share
the CPU), plus the machine's load average before and after, and the iris-centre check.
Thread counts: 1 and 2 (the renderer's default on machines with >= 2 cores).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from genlab.core.runs import write_json
from genlab.gaze.synth.dataset import iris_centre_check, render_eyes
from genlab.gaze.synth.domains import DOMAINS, sample_gaze_head, sample_subjects


def time_domain(domain: str, count: int, size: tuple[int, int], workers: int,
                repeats: int) -> dict:
    """Best-of-``repeats`` wall and CPU throughput of rendering ``count`` images."""
    spec = DOMAINS.get(domain)
    subjects = sample_subjects(domain, spec.n_subjects, 0)
    rng = np.random.default_rng(0)
    gaze, head = sample_gaze_head(spec, count, rng)
    traits = [subjects[i % len(subjects)] for i in range(count)]
    render_eyes(gaze[:32], traits[:32], head[:32], np.random.default_rng(0), size=size,
                conditions=spec, workers=workers)  # warm-up
    walls, cpus = [], []
    for r in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        render_eyes(gaze, traits, head, np.random.default_rng(r), size=size, conditions=spec,
                    workers=workers)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return {"domain": domain, "workers": workers, "count": count,
            "images_per_s": count / min(walls),
            "images_per_cpu_s": count / min(cpus)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for gaze_render.json")
    ap.add_argument("--count", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--height", type=int, default=64)
    ap.add_argument("--width", type=int, default=96)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    size = (args.height, args.width)
    load_before = os.getloadavg()
    rows = []
    for domain in ("broad-e", "broad-g", "narrow-m", "narrow-d"):
        for workers in (1, 2):
            row = time_domain(domain, args.count, size, workers, args.repeats)
            rows.append(row)
            print(f"{domain:9s} threads={workers}  {row['images_per_s']:7.0f} img/s wall  "
                  f"{row['images_per_cpu_s']:7.0f} img/CPU-s")
    check = iris_centre_check(size)
    result = {
        "size": list(size), "cpu_count": os.cpu_count(),
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
        "rows": rows,
        "iris_centre_check": {k: {m: v[m] for m in ("slope_ratio", "correlation",
                                                    "max_residual_px")}
                              for k, v in check.items()},
    }
    write_json(out / "gaze_render.json", result)
    print(f"iris check: {result['iris_centre_check']}")
    print(f"wrote {out / 'gaze_render.json'}")


if __name__ == "__main__":
    main()
