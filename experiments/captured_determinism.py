"""Why a captured search step's losses leave the eager step's on CUDA: is it the device's own
nondeterminism or the capture? (docs/scale.md, "The captured step on an H100".)

For each method, 10 search steps in the DARTS space as the CUDA test of
tests/nas/test_captured_step.py runs them (``search_steps``, TF32 off): the eager step twice
(eager against eager: what the device's kernels vary by themselves) and the captured step
once (captured against the first eager run), the largest relative difference of the 20
losses; then the same under ``torch.use_deterministic_algorithms(True)`` and deterministic
cuDNN. If eager against eager varies as much as captured against eager, the tolerance of the
test, not the capture, is what to change; if it does not, the capture changes the arithmetic.

``--perturb EPS`` (no GPU needed): how far the same 10 eager steps carry a perturbation of
every weight and alpha by a relative EPS (times a seeded normal draw), per step, on the CPU:
how much of a device's rounding differences the test's tolerance can absorb.

    PYTHONPATH=src python experiments/captured_determinism.py --methods beta,darts \\
        [--out determinism.json]
    PYTHONPATH=src python experiments/captured_determinism.py --perturb 1e-6
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


def sensitivity(methods: list[str], eps: float) -> dict:
    """Per method, the largest relative loss difference at each step between the perturbed
    and the unperturbed search (CPU, one thread)."""
    from test_captured_step import search_steps

    torch.set_num_threads(1)
    figures = {}
    for method in methods:
        base, moved = (search_steps(method, False, device="cpu", perturb=e)[1]
                       for e in (0.0, eps))
        rel = [abs(x - y) / abs(y) for x, y in zip(moved, base, strict=True)]
        per_step = [max(rel[i:i + 2]) for i in range(0, len(rel), 2)]
        figures[method] = per_step
        print(f"{method:10s} eps {eps:.0e}  largest relative loss difference per step: "
              + " ".join(f"{r:.0e}" for r in per_step), flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="beta,darts", help="Comma-separated search methods.")
    ap.add_argument("--out", type=Path, default=None, help="JSON file for the figures.")
    ap.add_argument("--perturb", type=float, default=None,
                    help="On the CPU: carry a relative perturbation EPS through 10 steps.")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "tests" / "nas"))
    methods = args.methods.split(",")
    if args.perturb is not None:
        figures = sensitivity(methods, args.perturb)
        if args.out:
            args.out.write_text(json.dumps(figures, indent=1))
        return 0
    if not torch.cuda.is_available():
        print("no GPU: the captured step needs CUDA; nothing to measure")
        return 0
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    from test_captured_step import search_steps

    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    figures = {}
    for deterministic in (False, True):
        torch.use_deterministic_algorithms(deterministic)
        torch.backends.cudnn.deterministic = deterministic
        for method in methods:
            first, again, captured = (search_steps(method, graph)[1]
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
