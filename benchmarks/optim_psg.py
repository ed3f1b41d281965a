"""Per-sample gradients and tr Sigma: torch.func (vmap, chunked) vs a per-sample backward loop.

For an MLP and a small CNN (BatchNorm, eval mode) on digit-sized inputs and batches of 64 and
256, times ``per_sample_grads`` and ``noise_trace`` with vmap (chunk 64) and with one backward
pass per sample, and reports the speed-up and the largest absolute difference between the
two. Writes ``optim_psg.json`` to ``--out``.

    python benchmarks/optim_psg.py --out runs/bench
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from genlab.core.runs import write_json
from genlab.optim.measures import noise_trace, per_sample_grads
from genlab.optim.studies.models import build_model


def best_time(fn, repeats: int) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls (after one warm-up) and the last result."""
    out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def bench(arch: str, width: int, batch: int, repeats: int) -> dict:
    torch.manual_seed(0)
    model = build_model(arch, width, 2).eval()
    x = torch.randn(batch, 1, 8, 8)
    y = torch.randint(0, 10, (batch,))
    loss = nn.CrossEntropyLoss()
    t_vmap, g_vmap = best_time(lambda: per_sample_grads(model, loss, x, y, chunk_size=64), repeats)
    t_loop, g_loop = best_time(lambda: per_sample_grads(model, loss, x, y, method="loop"), repeats)
    t_tr_vmap, tr_vmap = best_time(lambda: noise_trace(model, loss, x, y, chunk_size=64), repeats)
    t_tr_loop, tr_loop = best_time(lambda: noise_trace(model, loss, x, y, method="loop"), repeats)
    return {
        "arch": arch, "width": width, "batch": batch,
        "params": sum(p.numel() for p in model.parameters()),
        "psg_vmap_s": t_vmap, "psg_loop_s": t_loop, "psg_speedup": t_loop / t_vmap,
        "psg_max_abs_diff": float((g_vmap - g_loop).abs().max()),
        "trace_vmap_s": t_tr_vmap, "trace_loop_s": t_tr_loop,
        "trace_speedup": t_tr_loop / t_tr_vmap,
        "trace_abs_diff": abs(tr_vmap - tr_loop), "trace": tr_vmap,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [bench(arch, width, batch, args.repeats)
            for arch, width in (("mlp", 128), ("cnn", 16)) for batch in (64, 256)]
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "optim_psg.json", {
        "rows": rows, "threads": args.threads, "torch": torch.__version__,
        "machine": platform.machine(), "repeats": args.repeats})
    for r in rows:
        print(f"{r['arch']:4s} b={r['batch']:3d} d={r['params']:6d}  per-sample grads "
              f"x{r['psg_speedup']:.1f} (max |diff| {r['psg_max_abs_diff']:.1e})  tr Sigma "
              f"x{r['trace_speedup']:.1f} (|diff| {r['trace_abs_diff']:.1e})")
    print(f"wrote {args.out / 'optim_psg.json'}")


if __name__ == "__main__":
    main()
