"""Curvature measures from Hessian-vector products: lambda_max, tr H, nonuniformity s.

- Hessian-vector product Hv by double backward through the mean loss (chunked: the mean
  loss of n samples is sum_c (n_c / n) L_c, so Hv = sum_c (n_c / n) H_c v).
- lambda_max(H): Lanczos with full reorthogonalisation (default; the largest algebraic
  eigenvalue, stopped on the residual of the top Ritz pair) or power iteration on v -> Hv
  (the eigenvalue of largest magnitude, e.g. PyHessian).
- tr H: Hutchinson's estimator tr H = E_z z^T H z with Rademacher z; the standard error of
  the mean over probes is reported with the estimate.
- Nonuniformity of curvature (Wu, Ma & E 2018, "How SGD selects the global minima",
  definition of non-uniformity): Sigma_H = (1/n) sum_i H_i^2 - H^2, s = sqrt(lambda_max(Sigma_H)).
  Sigma_H is the covariance of the per-sample Hessians (positive semi-definite), so power
  iteration on v -> (1/n) sum_i H_i (H_i v) - H (H v) converges to its top eigenvalue.
  Per-sample HVPs H_i v are forward-over-reverse (torch.func.jvp of grad), vmapped.

BatchNorm: ``bn_mode="eval"`` (running statistics) everywhere; lambda_max and tr H also
accept ``bn_mode="batch"`` (statistics of each evaluated chunk; running statistics restored).
The per-sample nonuniformity needs eval mode.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import grad, jvp, vmap

from genlab.core.errors import require_choice, require_positive
from genlab.optim.measures.per_sample import (
    PER_SAMPLE_COPIES,
    chunks,
    collect,
    fill_none,
    flatten,
    measuring,
    memory_chunk,
    require_per_sample_mode,
    sample_loss_fn,
    trainable,
    unflatten,
)


@dataclass
class TraceEstimate:
    """Hutchinson estimate of tr H with the standard error of the mean over probes."""

    value: float
    stderr: float
    probes: int


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.requires_grad]


def _size_dtype(model: nn.Module) -> tuple[int, torch.dtype]:
    params = _params(model)
    return sum(p.numel() for p in params), params[0].dtype


def hvp(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
        v: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
    """H v for the mean loss over (x, y) in the model's current mode (double backward)."""
    params = _params(model)
    out = torch.zeros_like(v)
    n = len(x)
    vs = unflatten(v, {str(i): p for i, p in enumerate(params)})
    for sl in chunks(n, chunk_size):
        loss = loss_fn(model(x[sl]), y[sl]) * (sl.stop - sl.start) / n
        gs = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
        dot = sum((g * vs[str(i)]).sum() for i, g in enumerate(gs) if g is not None)
        if not isinstance(dot, torch.Tensor) or not dot.requires_grad:
            continue
        hv = torch.autograd.grad(dot, params, allow_unused=True)
        out += flatten(fill_none(hv, params))
    return out.detach()


def _random_unit(d: int, seed: int, device, dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(d, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
    return v / v.norm()


def power_iteration(operator: Callable[[torch.Tensor], torch.Tensor], d: int, *,
                    iterations: int = 100, tol: float = 1e-4, seed: int = 0,
                    device="cpu", dtype=torch.float32) -> float:
    """Dominant eigenvalue (largest magnitude, signed) of a symmetric linear operator."""
    require_positive("iterations", iterations)
    v = _random_unit(d, seed, device, dtype)
    lam = 0.0
    for _ in range(iterations):
        w = operator(v)
        new = float(v @ w)
        norm = float(w.norm())
        if norm == 0.0 or not math.isfinite(norm):
            return 0.0 if norm == 0.0 else new
        v = w / norm
        if abs(new - lam) <= tol * max(abs(new), 1e-12):
            return new
        lam = new
    return lam


def lanczos_top(operator: Callable[[torch.Tensor], torch.Tensor], d: int, *,
                iterations: int = 100, tol: float = 1e-6, seed: int = 0, device="cpu",
                dtype=torch.float32) -> float:
    """Largest algebraic eigenvalue by Lanczos with full reorthogonalisation.

    Stops once the residual of the top Ritz pair, beta_j |s_j| (s_j: last component of its
    eigenvector in the tridiagonal matrix), is at most ``tol`` * |theta|: for a symmetric
    operator the Ritz value theta is then within that residual of an eigenvalue (Parlett,
    "The Symmetric Eigenvalue Problem", Thm. 11.5.1 / Kahan's bound).
    """
    require_positive("iterations", iterations)
    k = min(iterations, d)
    basis = [_random_unit(d, seed, device, dtype)]
    alphas, betas = [], []
    top = 0.0
    for j in range(k):
        w = operator(basis[j])
        alphas.append(float(basis[j] @ w))
        for q in basis:  # full reorthogonalisation (twice is enough)
            w = w - (q @ w) * q
        for q in basis:
            w = w - (q @ w) * q
        beta = float(w.norm())
        theta, vectors = torch.linalg.eigh(_tridiagonal(alphas, betas))
        top = float(theta[-1])
        if beta < 1e-10 or beta * abs(float(vectors[-1, -1])) <= tol * max(abs(top), 1e-30):
            break
        betas.append(beta)
        basis.append(w / beta)
    return top


def _tridiagonal(alphas: list[float], betas: list[float]) -> torch.Tensor:
    t = torch.diag(torch.tensor(alphas, dtype=torch.float64))
    for i, b in enumerate(betas[: len(alphas) - 1]):
        t[i, i + 1] = t[i + 1, i] = b
    return t


def hessian_top_eigenvalue(model: nn.Module, loss_fn: Callable, inputs, targets=None, *,
                           method: str = "lanczos", iterations: int = 100, tol: float = 1e-6,
                           chunk_size: int | None = 256, seed: int = 0,
                           bn_mode: str = "eval") -> float:
    """lambda_max of the Hessian of the mean loss.

    ``lanczos`` (default): the largest eigenvalue, to a relative residual ``tol``;
    ``power``: power iteration, the eigenvalue of largest magnitude (PyHessian's practice),
    stopping when successive estimates differ by less than ``tol`` relative (its error is
    then about tol * lambda_2 / (lambda_1 - lambda_2), larger than tol when the top
    eigenvalues are close).
    """
    require_choice("method", method, ("power", "lanczos"))
    x, y = collect(inputs, targets)
    d, dtype = _size_dtype(model)
    with measuring(model, bn_mode):
        op = lambda v: hvp(model, loss_fn, x, y, v, chunk_size)  # noqa: E731
        if method == "power":
            return power_iteration(op, d, iterations=iterations, tol=tol, seed=seed,
                                   device=x.device, dtype=dtype)
        return lanczos_top(op, d, iterations=iterations, tol=tol, seed=seed, device=x.device,
                           dtype=dtype)


def hessian_trace(model: nn.Module, loss_fn: Callable, inputs, targets=None, *,
                  probes: int = 100, chunk_size: int | None = 256, seed: int = 0,
                  bn_mode: str = "eval") -> TraceEstimate:
    """Hutchinson tr H with Rademacher probes; returns the estimate and its standard error."""
    require_positive("probes", probes)
    x, y = collect(inputs, targets)
    d, dtype = _size_dtype(model)
    gen = torch.Generator().manual_seed(seed)
    values = []
    with measuring(model, bn_mode):
        for _ in range(probes):
            z = (torch.randint(0, 2, (d,), generator=gen) * 2 - 1).to(device=x.device, dtype=dtype)
            values.append(float(z @ hvp(model, loss_fn, x, y, z, chunk_size)))
    vals = torch.tensor(values, dtype=torch.float64)
    stderr = float(vals.std(unbiased=True) / math.sqrt(probes)) if probes > 1 else math.inf
    return TraceEstimate(float(vals.mean()), stderr, probes)


# -- nonuniformity of curvature --------------------------------------------------------------
def _load_forward_ad_quietly() -> None:
    """torch's forward-mode AD loads its decompositions with torch.jit.script on first use,
    which torch >= 2.14 reports as deprecated (a FutureWarning from inside torch, not from
    code a user can change): load them once here with that one warning silenced."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated",
                                category=FutureWarning)
        with torch.autograd.forward_ad.dual_level():
            torch.autograd.forward_ad.make_dual(torch.zeros(1), torch.zeros(1))


def _per_sample_hvp_fn(model: nn.Module, loss_fn: Callable):
    """hv(params, x_i, y_i, t) = H_i t by forward-over-reverse differentiation."""
    f = sample_loss_fn(model, loss_fn)
    _load_forward_ad_quietly()

    def hv(params, x, y, tangent):
        return jvp(lambda p: grad(f)(p, x, y), (params,), (tangent,))[1]

    return hv


def _second_moment_vmap(model, loss_fn, x, y, v, chunk_size) -> tuple[torch.Tensor, torch.Tensor]:
    """((1/n) sum_i H_i^2 v, (1/n) sum_i H_i v) with vmapped per-sample HVPs.

    Memory: a few (chunk, d) sets of per-sample products at a time, reduced per parameter;
    the chunk shrinks below ``chunk_size`` so that they fit in limits.PER_SAMPLE_BYTES.
    """
    params = trainable(model)
    d = sum(p.numel() for p in params.values())
    itemsize = next(iter(params.values())).element_size()
    chunk_size = memory_chunk(chunk_size, len(x), d, itemsize, PER_SAMPLE_COPIES)
    hv = _per_sample_hvp_fn(model, loss_fn)
    shared = vmap(hv, in_dims=(None, 0, 0, None))
    own = vmap(hv, in_dims=(None, 0, 0, 0))
    vt = unflatten(v, params)
    sq = {k: torch.zeros_like(p) for k, p in params.items()}
    first = {k: torch.zeros_like(p) for k, p in params.items()}
    for sl in chunks(len(x), chunk_size):
        u = shared(params, x[sl], y[sl], vt)  # H_i v, batched
        for k, t in u.items():
            first[k] += t.sum(0)
        w = own(params, x[sl], y[sl], u)  # H_i (H_i v)
        del u
        for k, t in w.items():
            sq[k] += t.sum(0)
        del w
    n = len(x)
    return (flatten(sq) / n).detach(), (flatten(first) / n).detach()


def _second_moment_loop(model, loss_fn, x, y, v, chunk_size) -> tuple[torch.Tensor, torch.Tensor]:
    """Same as the vmap version with one double-backward per sample."""
    sq, first = torch.zeros_like(v), torch.zeros_like(v)
    for i in range(len(x)):
        xi, yi = x[i : i + 1], y[i : i + 1]
        u = hvp(model, loss_fn, xi, yi, v)
        sq += hvp(model, loss_fn, xi, yi, u)
        first += u
    return sq / len(x), first / len(x)


def curvature_nonuniformity(model: nn.Module, loss_fn: Callable, inputs, targets=None, *,
                            iterations: int = 50, tol: float = 1e-4,
                            chunk_size: int | None = 128, method: str = "vmap",
                            solver: str = "power", seed: int = 0,
                            bn_mode: str = "eval") -> float:
    """s = sqrt(lambda_max(Sigma_H)) of Wu, Ma & E (2018); power iteration or Lanczos (eval BN).

    ``method`` makes the per-sample HVPs (vmap or a loop); ``solver`` finds the top eigenvalue.
    """
    require_choice("method", method, ("vmap", "loop"))
    require_choice("solver", solver, ("power", "lanczos"))
    require_per_sample_mode(model, bn_mode)
    x, y = collect(inputs, targets)
    d, dtype = _size_dtype(model)
    moment = _second_moment_vmap if method == "vmap" else _second_moment_loop

    def op(v):
        sq, hv_mean = moment(model, loss_fn, x, y, v, chunk_size)
        return sq - hvp(model, loss_fn, x, y, hv_mean, chunk_size)

    with measuring(model, "eval"):
        if solver == "power":
            lam = power_iteration(op, d, iterations=iterations, tol=tol, seed=seed,
                                  device=x.device, dtype=dtype)
        else:
            lam = lanczos_top(op, d, iterations=iterations, tol=tol, seed=seed,
                              device=x.device, dtype=dtype)
    return math.sqrt(max(lam, 0.0))
