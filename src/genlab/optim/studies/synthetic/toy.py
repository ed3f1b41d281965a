"""The 1-D two-minima toy: SGD leaves the minimum of high nonuniformity, GD stays.

Source: official code of "Beyond Sharpness: The Role of Nonuniformity in Generalization"
(its 1-D example). Two samples with losses

    f1(x) = min(x^2, 0.1 (x - 1)^2),   f2(x) = min(x^2, 1.9 (x - 1)^2),   f = (f1 + f2) / 2.

Both minima have the same sharpness f'' = 2: at x = 0 the sample curvatures are (2, 2), at
x = 1 they are (0.2, 3.8). The curvature nonuniformity s = sqrt(Var_i f_i'') = |f1'' - f2''| / 2
is 0 at x = 0 and 1.8 at x = 1. Near x = 1, SGD with one sample per step and lr 0.6
multiplies x - 1 by 1 - 0.6*0.2 = 0.88 or 1 - 0.6*3.8 = -1.28 with probability 1/2 each: the
log-mean factor 0.5 ln(0.88 * 1.28) > 0, so x = 1 is unstable for SGD (Wu, Ma & E 2018) while
GD multiplies by 1 - 0.6*2 = -0.2 and converges. At x = 0 both multiply by -0.2.

COV on the toy (ours; the official script's COV settings are not known): full-batch COV,
i.e. descent on f + (a lam / 2) tr Sigma_B with both samples in the batch and a = 1/b = 1/2
(genlab.optim.COV without n_total). Near x = 1, tr Sigma = (1.8 (x - 1))^2, so the penalty
adds lam * 3.24 / 2 = 1.62 lam to the curvature of the x = 1 minimum and nothing at x = 0:
x = 1 becomes unstable for lr 0.6 when 0.6 (2 + 1.62 lam) > 2, i.e. lam > 0.823, and COV then
leaves the nonuniform minimum deterministically.

A run "leaves" x = 1 at the first iteration with |x - 1| > ``leave_radius`` and "escapes" when
it ends within ``end_radius`` of x = 0 (definitions ours).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from genlab.core.errors import ConfigError, require_positive
from genlab.core.options import Options, check_options, option
from genlab.core.report import figure
from genlab.core.runs import RunDir
from genlab.optim.limits import MAX_ITERATIONS, require_at_most
from genlab.optim.optimizers.registry import make_optimizer
from genlab.optim.studies import Study, register_study
from genlab.optim.studies.results import toy_results, write_study_results

CURVATURE_X1 = (0.2, 3.8)  # f1'', f2'' at x = 1 (= 2 * 0.1, 2 * 1.9)


@dataclass
class ToyConfig(Options):
    """The options of `genlab optim toy`."""

    lr: float = option(0.6, help="Learning rate of SGD and GD.", gt=0)
    x0: float = option(1.0001, help="Start, next to the nonuniform minimum x = 1.")
    iterations: int = option(1000, help="Steps per run.", gt=0, le=MAX_ITERATIONS)
    seeds: list[int] = option(factory=lambda: list(range(20)), parse="seeds",
                              help="One SGD run per seed.")
    leave_radius: float = option(0.5, help="Distance from x = 1 that counts as leaving it.",
                                 gt=0)
    end_radius: float = option(1e-3, help="Distance from the other minimum that counts as "
                               "arriving.", gt=0)
    seed: int = option(0, help="First seed when --seeds is given as a count (library "
                       "callers).", ge=0)
    cov_lam: float = option(1.0, help="Full-batch COV penalty weight (0: no COV run); x = 1 "
                            "is unstable for COV when lam > 0.823.", ge=0)

    def validate(self) -> None:
        check_options(self)  # types, choices, limits; seeds: integers >= 0, no repeat
        require_positive("lr", self.lr)
        require_positive("iterations", self.iterations)
        require_at_most("iterations", self.iterations, MAX_ITERATIONS)
        require_positive("leave_radius", self.leave_radius)
        require_positive("end_radius", self.end_radius)
        require_positive("cov_lam", self.cov_lam, allow_zero=True)


def sample_grads(x: float) -> tuple[float, float]:
    """(f1'(x), f2'(x)): the gradient of the active branch of each min."""
    out = []
    for c in (0.1, 1.9):
        out.append(2 * x if x * x <= c * (x - 1) ** 2 else 2 * c * (x - 1))
    return out[0], out[1]


def sample_curvatures(x: float) -> tuple[float, float]:
    return tuple(2.0 if x * x <= c * (x - 1) ** 2 else 2 * c for c in (0.1, 1.9))


def loss(x: float) -> float:
    return 0.5 * (min(x * x, 0.1 * (x - 1) ** 2) + min(x * x, 1.9 * (x - 1) ** 2))


def noise_trace_at(x: float) -> float:
    """tr Sigma over the two samples: ((f1' - f2') / 2)^2."""
    g1, g2 = sample_grads(x)
    return ((g1 - g2) / 2) ** 2


def curvature_nonuniformity_at(x: float) -> float:
    h1, h2 = sample_curvatures(x)
    return abs(h1 - h2) / 2


def trajectory(cfg: ToyConfig, *, stochastic: bool, seed: int = 0) -> np.ndarray:
    """x_0..x_T of SGD (one random sample per step) or GD (mean gradient)."""
    rng = np.random.default_rng(seed)
    xs = np.empty(cfg.iterations + 1)
    x = xs[0] = cfg.x0
    for t in range(cfg.iterations):
        g1, g2 = sample_grads(x)
        g = (g1 if rng.integers(2) == 0 else g2) if stochastic else 0.5 * (g1 + g2)
        x = x - cfg.lr * g
        if not np.isfinite(x) or abs(x) > 1e6:
            xs[t + 1 :] = np.nan
            break
        xs[t + 1] = x
    return xs


def cov_trajectory(cfg: ToyConfig) -> np.ndarray:
    """x_0..x_T of full-batch COV (genlab.optim.COV, both samples per step; see module doc)."""
    x = torch.nn.Parameter(torch.tensor(cfg.x0, dtype=torch.float64))
    opt = make_optimizer("cov", [x], lr=cfg.lr, lam=cfg.cov_lam, per_sample="autograd")

    def per_sample_losses():
        return torch.stack([torch.minimum(x**2, c * (x - 1) ** 2) for c in (0.1, 1.9)])

    xs = np.empty(cfg.iterations + 1)
    xs[0] = cfg.x0
    for t in range(cfg.iterations):
        opt.step(per_sample_losses)
        xs[t + 1] = float(x.detach())
    return xs


def describe(xs: np.ndarray, cfg: ToyConfig) -> dict:
    """Leave iteration, escape flag, final x and the trajectory-mean tr Sigma of one run."""
    far = np.flatnonzero(np.abs(xs - 1) > cfg.leave_radius)
    final = float(xs[-1])
    finite = xs[np.isfinite(xs)]
    return {
        "left_at": int(far[0]) if len(far) else None,
        "escaped": bool(np.isfinite(final) and abs(final) < cfg.end_radius),
        "final_x": final,
        "mean_trace_sigma": float(np.mean([noise_trace_at(v) for v in finite])),
        "final_curvature_nonuniformity": curvature_nonuniformity_at(final)
        if np.isfinite(final) else None,
    }


def run_toy(cfg: ToyConfig, out: str | Path, *, resume: bool = False) -> dict:
    """SGD at each of ``cfg.seeds`` and GD from x0; writes summary.json and toy_paths.png."""
    cfg.validate()
    if cfg.x0 == 0:
        raise ConfigError("x0 = 0 is already the flat minimum; start near x = 1 (e.g. 1.0001)")
    run = RunDir(out, {"command": "optim toy", **asdict(cfg)}, resume=resume)
    sgd_runs = []
    paths = []
    for s in cfg.seeds:
        xs = trajectory(cfg, stochastic=True, seed=s)
        rec = {"seed": s, **describe(xs, cfg)}
        run.log({"optimizer": "sgd", **rec})
        sgd_runs.append(rec)
        paths.append(xs)
    gd_xs = trajectory(cfg, stochastic=False)
    gd = describe(gd_xs, cfg)
    run.log({"optimizer": "gd", **gd})
    cov_xs = cov_trajectory(cfg) if cfg.cov_lam > 0 else None
    cov = describe(cov_xs, cfg) if cov_xs is not None else {}
    if cov:
        run.log({"optimizer": "cov", **cov})
    left = [r["left_at"] for r in sgd_runs if r["left_at"] is not None]
    summary = {
        "sgd_escape_fraction": sum(r["escaped"] for r in sgd_runs) / len(cfg.seeds),
        "sgd_left_fraction": len(left) / len(cfg.seeds),
        "sgd_median_leave_iteration": float(np.median(left)) if left else None,
        "sgd_leave_iterations": [r["left_at"] for r in sgd_runs],
        "gd_escaped": gd["escaped"],
        "gd_left": gd["left_at"] is not None,
        "gd_final_x": gd["final_x"],
        "sgd_mean_trace_sigma": float(np.mean([r["mean_trace_sigma"] for r in sgd_runs])),
        "gd_mean_trace_sigma": gd["mean_trace_sigma"],
        "cov_left_at": cov.get("left_at"),
        "cov_escaped": cov.get("escaped"),
        "cov_final_x": cov.get("final_x"),
        "curvature_nonuniformity_x0": curvature_nonuniformity_at(0.0),
        "curvature_nonuniformity_x1": curvature_nonuniformity_at(1.0),
        "seeds": cfg.seeds,
    }
    _plot(run, cfg, paths, gd_xs, cov_xs)
    run.write_summary(summary)
    write_study_results("genlab optim toy", cfg, out, toy_results(summary, cfg))
    return summary


def _plot(run: RunDir, cfg: ToyConfig, paths: list[np.ndarray], gd_xs: np.ndarray,
          cov_xs: np.ndarray | None) -> None:
    fig, axes = figure(ncols=2, width=5.0)
    ax = axes[0][0]
    grid = np.linspace(-0.6, 1.6, 400)
    ax.plot(grid, [loss(v) for v in grid], color="k")
    ax.set(xlabel="x", ylabel="f(x)", title="two minima, same sharpness")
    ax.annotate("s = 0", (0, 0), textcoords="offset points", xytext=(0, 12), ha="center")
    ax.annotate("s = 1.8", (1, 0), textcoords="offset points", xytext=(0, 12), ha="center")
    ax = axes[0][1]
    for i, xs in enumerate(paths):
        ax.plot(xs, color="tab:blue", alpha=0.35, lw=0.8, label="SGD (seeds)" if i == 0 else None)
    ax.plot(gd_xs, color="tab:red", lw=1.5, label="GD")
    if cov_xs is not None:
        ax.plot(cov_xs, color="tab:green", lw=1.5, ls="--", label=f"COV (lam {cfg.cov_lam})")
    ax.set(xlabel="iteration", ylabel="x", title=f"lr {cfg.lr}, x0 = {cfg.x0}")
    ax.set_xscale("symlog", linthresh=10)
    ax.legend(loc="best")
    run.save_figure(fig, "toy_paths.png")


def report(summary: dict, cfg: ToyConfig) -> list:
    """What `genlab optim toy` prints: the escape figures as JSON."""
    keys = ("sgd_escape_fraction", "sgd_median_leave_iteration", "gd_escaped", "gd_final_x",
            "cov_left_at", "cov_final_x")
    return [json.dumps({k: summary[k] for k in keys}, indent=2, default=str)]


STUDY = register_study(Study("toy", ToyConfig, run_toy, report))
