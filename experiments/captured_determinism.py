"""Why a captured search step's losses leave the eager step's on CUDA: is it the device's own
nondeterminism or the capture? (docs/scale.md, "The captured step on an H100".)

For each method, 10 search steps in the DARTS space as the CUDA test of
tests/nas/test_captured_step.py runs them (``steps_on_cuda``, TF32 off): the eager step twice
(eager against eager: what the device's kernels vary by themselves) and the captured step
once (captured against the first eager run), the largest relative difference of the 20
losses; then the same under ``torch.use_deterministic_algorithms(True)`` and deterministic
cuDNN. If eager against eager varies as much as captured against eager, the tolerance of the
test, not the capture, is what to change; if it does not, the capture changes the arithmetic.

    PYTHONPATH=src python experiments/captured_determinism.py --methods beta,darts \\
        [--out determinism.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent


def largest_relative(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) / abs(y) for x, y in zip(a, b, strict=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="beta,darts", help="Comma-separated search methods.")
    ap.add_argument("--out", type=Path, default=None, help="JSON file for the figures.")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no GPU: the captured step needs CUDA; nothing to measure")
        return 0
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    sys.path.insert(0, str(REPO / "tests" / "nas"))
    from test_captured_step import steps_on_cuda

    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    figures = {}
    for deterministic in (False, True):
        torch.use_deterministic_algorithms(deterministic)
        torch.backends.cudnn.deterministic = deterministic
        for method in args.methods.split(","):
            first, again, captured = (steps_on_cuda(method, graph)[1]
                                      for graph in (False, False, True))
            row = {"eager_vs_eager": largest_relative(again, first),
                   "captured_vs_eager": largest_relative(captured, first)}
            figures[f"{method} deterministic={deterministic}"] = row
            print(f"{method:8s} deterministic={deterministic!s:5s} eager vs eager "
                  f"{row['eager_vs_eager']:.2e}  captured vs eager {row['captured_vs_eager']:.2e}",
                  flush=True)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
