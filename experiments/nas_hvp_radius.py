"""How well the second-order architect's finite difference matches the autograd derivative.

DARTS' unrolled gradient needs grad2_{alpha,w} L_train(w, alpha) v; upstream estimates it by
central differences at w +- R v, R = r / ||v||, r = 0.01. Autograd gives the derivative of
the piecewise-smooth gradient with ReLU'' = 0; a finite difference also sees the jumps of the
gradient where pre-activations cross zero between w - Rv and w + Rv. This script measures
the relative difference between the two for r in {1e-2, ..., 1e-8} on the digits-proxy
supernets (float64, random weights, v the gradient of the loss on another batch).

    python experiments/nas_hvp_radius.py --out runs/bench

Writes DIR/nas_hvp_radius.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from genlab.nas.architect import call_with, mixed_hessian_vector, weights_of
from genlab.nas.spaces import get_space

RADII = (1e-2, 1e-4, 1e-6, 1e-8)


def measure(space_name: str, seed: int = 0) -> dict:
    space = get_space(space_name)
    torch.manual_seed(seed)
    net = space.build_supernet(num_classes=10, in_channels=1, channels=space.proxy.channels,
                               cells=space.proxy.cells, **space.proxy.options).double()
    g = torch.Generator().manual_seed(seed + 1)
    size = space.proxy.size
    xt, xv = (torch.randn(64, 1, size, size, generator=g, dtype=torch.float64) for _ in "tv")
    yt, yv = (torch.randint(0, 10, (64,), generator=g) for _ in "tv")
    names, w = weights_of(net)
    alphas = net.arch_parameters()
    grads = torch.autograd.grad(F.cross_entropy(call_with(net, names, w, xv), yv), w,
                                allow_unused=True)
    v = [torch.zeros_like(p) if d is None else d for p, d in zip(w, grads, strict=True)]
    loss = F.cross_entropy(call_with(net, names, w, xt), yt)
    g_w = torch.autograd.grad(loss, w, create_graph=True, allow_unused=True)
    dot = sum((a * b).sum() for a, b in zip(g_w, v, strict=True) if a is not None)
    exact = torch.autograd.grad(dot, alphas, allow_unused=True)
    exact_flat = torch.cat([(e if e is not None else torch.zeros_like(a)).reshape(-1)
                            for e, a in zip(exact, alphas, strict=True)])
    out = {"space": space_name, "seed": seed, "relative_difference": {}}
    for r in RADII:
        fd = mixed_hessian_vector(net, names, w, v, (xt, yt), r)
        fd_flat = torch.cat([f.reshape(-1) for f in fd])
        out["relative_difference"][str(r)] = float((fd_flat - exact_flat).norm()
                                                   / exact_flat.norm())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--spaces", default="nb201,s2,s3")
    p.add_argument("--seeds", default="0,1")
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = [measure(s, int(seed)) for s in args.spaces.split(",")
            for seed in args.seeds.split(",")]
    for row in rows:
        diffs = "  ".join(f"r={r}: {d:.3g}" for r, d in row["relative_difference"].items())
        print(f"{row['space']:6} seed {row['seed']}  |FD - autograd| / |autograd|   {diffs}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "nas_hvp_radius.json").write_text(json.dumps(
        {"command": " ".join(sys.argv), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
