"""High-dimensional sparse regression with a diagonal linear network ("Beyond Sharpness").

Setup of the official code of "Beyond Sharpness" (confirmed): n = 100 training and
n_test = 1000 test samples in d = 150 dimensions, X ~ N(0, I); theta* has |N(0, 1)| entries
on its first k = 3 coordinates, scaled to unit norm; y = X theta* + 0.2 N(0, 1) (test labels
clean). The model is beta = u * v (elementwise), u, v ~ 0.2 N(0, I), trained on
||X beta - y||^2 / (2n) with mini-batches of 10, lr 0.05, 400 epochs. SAM uses rho = 0.3,
SAMGCM rho = 5e-4 and xi = 1e-6 (solved in the Woodbury form: the batch covariance has rank
<= 9 in 300 dimensions). COV's lambda is ours (default 10; its mini-batch factor
a = (n - b) / (b (n - 1)) = 0.091): the largest of 1, 5, 10, 20 that did not collapse
beta to 0 on seed 0 (lambda = 20 does; see docs/nonuniformity.md).

Reported per optimiser over seeds: train and test loss, ||beta||_1 (for comparison:
||theta*||_1 of a unit vector with 3 entries lies between 1 and sqrt(3)), the number of
coordinates with |beta_j| > 1e-2 and whether they contain the true support. The claim's
comparison: each guided optimiser's ||beta||_1 (SAMGCM, COV) minus SAM's and minus SGD's,
paired by seed (each seed is one problem and one initialisation for every optimiser), a
smaller ||beta||_1 reading "better" (sparser), Holm over the study's comparisons
(:func:`genlab.optim.studies.stats.compare`).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from genlab.core.errors import ConfigError, require_choice, require_positive
from genlab.core.options import Options, check_options, option
from genlab.core.progress import progress
from genlab.core.report import figure
from genlab.core.runs import RunDir
from genlab.core.seeding import fixed_threads, make_generator
from genlab.optim.limits import MAX_EPOCHS, MAX_PARAMETERS, require_at_most
from genlab.optim.optimizers.registry import OPTIMIZER_REGISTRY, make_optimizer
from genlab.optim.studies import Study, register_study
from genlab.optim.studies.results import sparse_results, write_study_results
from genlab.optim.studies.stats import compare, comparison_block, mean_std, per_seed

SPARSE_OPTIMIZERS = ("sgd", "sam", "samgcm", "cov")
SUPPORT_THRESHOLD = 1e-2


@dataclass
class SparseConfig(Options):
    """The options of `genlab optim sparse` (the official setup)."""

    n: int = option(100, help="Training samples.", gt=0)
    n_test: int = option(1000, help="Test samples.", gt=0)
    d: int = option(150, help="Dimension.", gt=0)
    k: int = option(3, help="Support size of the true parameter.", gt=0)
    noise: float = option(0.2, help="Label noise std.", ge=0)
    init_scale: float = option(0.2, help="Scale of the diagonal net's initialisation.", gt=0)
    lr: float = option(0.05, help="Learning rate.", gt=0)
    batch_size: int = option(10, help="Mini-batch size.", gt=0)
    epochs: int = option(400, help="Epochs.", gt=0, le=MAX_EPOCHS)
    sam_rho: float = option(0.3, help="SAM radius.", gt=0)
    samgcm_rho: float = option(5e-4, help="SAMGCM radius.", gt=0)
    samgcm_xi: float = option(1e-6, help="SAMGCM damping.", gt=0)
    cov_lam: float = option(10.0, help="COV penalty weight (ours).", ge=0)
    optimizers: list[str] = option(factory=lambda: list(SPARSE_OPTIMIZERS), parse="list",
                                   choices=SPARSE_OPTIMIZERS, help="Optimisers to compare.")
    seeds: list[int] = option(factory=lambda: list(range(5)), parse="seeds",
                              help="Each seed draws a problem and an initialisation.")
    seed: int = option(0, help="First seed when --seeds is given as a count (library "
                       "callers).", ge=0)
    path_every: int = option(5, help="Epochs between recorded |beta| (the path plot of the "
                             "first seed).", gt=0)
    threads: int = option(1, help="torch CPU threads (0: torch's default).", ge=0)

    def validate(self) -> None:
        check_options(self)  # types, choices, limits; seeds: integers >= 0, no repeat
        for name in ("n", "n_test", "d", "k", "lr", "batch_size", "epochs", "sam_rho",
                     "samgcm_rho", "samgcm_xi", "path_every", "init_scale"):
            require_positive(name, getattr(self, name))
        require_at_most("epochs", self.epochs, MAX_EPOCHS)
        if (self.n + self.n_test) * self.d > MAX_PARAMETERS:
            raise ConfigError(f"n ({self.n}) and n_test ({self.n_test}) samples of dimension "
                              f"d ({self.d}) give {(self.n + self.n_test) * self.d:,} numbers; "
                              f"the limit is {MAX_PARAMETERS:,}")
        require_positive("noise", self.noise, allow_zero=True)
        require_positive("threads", self.threads, allow_zero=True)
        require_positive("cov_lam", self.cov_lam, allow_zero=True)
        if self.k > self.d:
            raise ConfigError(f"k ({self.k}) must not exceed d ({self.d})")
        if self.batch_size > self.n:
            raise ConfigError(f"batch_size ({self.batch_size}) exceeds n ({self.n})")
        if not self.optimizers:
            raise ConfigError("optimizers: give at least one of " + ", ".join(SPARSE_OPTIMIZERS))
        for name in self.optimizers:
            require_choice("optimizer", name, SPARSE_OPTIMIZERS)


class DiagonalNet(nn.Module):
    """Linear predictor x . (u * v): a depth-2 diagonal linear network."""

    def __init__(self, d: int, init_scale: float, generator: torch.Generator):
        super().__init__()
        self.u = nn.Parameter(init_scale * torch.randn(d, generator=generator, dtype=torch.float64))
        self.v = nn.Parameter(init_scale * torch.randn(d, generator=generator, dtype=torch.float64))

    def beta(self) -> torch.Tensor:
        return (self.u * self.v).detach()

    def forward(self, x):
        return x @ (self.u * self.v)


def make_problem(cfg: SparseConfig, seed: int) -> dict:
    """X, y (noisy), X_test, y_test (clean) and theta* for one seed."""
    g = make_generator(seed, 1)
    theta = torch.zeros(cfg.d, dtype=torch.float64)
    theta[: cfg.k] = torch.randn(cfg.k, generator=g, dtype=torch.float64).abs()
    theta /= theta.norm()
    x = torch.randn(cfg.n, cfg.d, generator=g, dtype=torch.float64)
    y = x @ theta + cfg.noise * torch.randn(cfg.n, generator=g, dtype=torch.float64)
    xt = torch.randn(cfg.n_test, cfg.d, generator=g, dtype=torch.float64)
    return {"x": x, "y": y, "x_test": xt, "y_test": xt @ theta, "theta": theta}


def half_mse(pred, y):
    """||pred - y||^2 / (2 n): the loss of the setup."""
    return 0.5 * ((pred - y) ** 2).mean()


def _optimizer(name: str, model: DiagonalNet, cfg: SparseConfig):
    # the study's own settings per optimiser; the diagonal net's elementwise product has no
    # layer the per-layer path knows, so the per-sample optimisers take the autograd path
    options = {"sgd": {}, "sam": {"rho": cfg.sam_rho},
               "samgcm": {"rho": cfg.samgcm_rho, "xi": cfg.samgcm_xi, "solver": "woodbury"},
               "cov": {"lam": cfg.cov_lam, "n_total": cfg.n}}[name]
    if OPTIMIZER_REGISTRY.get(name).per_sample:
        options["per_sample"] = "autograd"
    return make_optimizer(name, model.parameters(), lr=cfg.lr, **options)


def fit_one(name: str, cfg: SparseConfig, seed: int, record_path: bool = False) -> dict:
    """Train one optimiser on one seed's problem; final figures (and |beta| path if asked)."""
    prob = make_problem(cfg, seed)
    model = DiagonalNet(cfg.d, cfg.init_scale, make_generator(seed, 2))
    opt = _optimizer(name, model, cfg)
    per_sample = OPTIMIZER_REGISTRY.get(name).per_sample
    x, y = prob["x"], prob["y"]
    path = []
    t0 = time.perf_counter()
    for epoch in range(cfg.epochs):
        order = torch.randperm(cfg.n, generator=make_generator(seed, 3, epoch))
        for start in range(0, cfg.n, cfg.batch_size):
            idx = order[start : start + cfg.batch_size]
            xb, yb = x[idx], y[idx]
            if per_sample:
                opt.step(lambda xb=xb, yb=yb: 0.5 * (model(xb) - yb) ** 2)
            else:
                def closure(xb=xb, yb=yb):
                    opt.zero_grad()
                    loss = half_mse(model(xb), yb)
                    loss.backward()
                    return loss

                opt.step(closure)
        if record_path and (epoch % cfg.path_every == 0 or epoch == cfg.epochs - 1):
            path.append(model.beta().abs().tolist())
    beta = model.beta()
    with torch.no_grad():
        train_loss = float(half_mse(model(x), y))
        test_loss = float(half_mse(model(prob["x_test"]), prob["y_test"]))
    found = beta.abs() > SUPPORT_THRESHOLD
    true = prob["theta"] != 0
    out = {
        "optimizer": name, "seed": seed, "train_loss": train_loss, "test_loss": test_loss,
        "beta_l1": float(beta.abs().sum()), "theta_l1": float(prob["theta"].abs().sum()),
        "support_size": int(found.sum()), "support_recovered": bool(torch.all(found[true])),
        "support_exact": bool(torch.equal(found, true)),
        "beta_error": float((beta - prob["theta"]).norm()), "seconds": time.perf_counter() - t0,
    }
    if not all(math.isfinite(out[k]) for k in ("train_loss", "test_loss")):
        out["diverged"] = True
    if record_path:
        out["path"] = path
        out["final_beta"] = beta.tolist()
    return out


def aggregate(results: list[dict], optimizers: list[str]) -> list[dict]:
    """Mean (and std) over seeds of each optimiser's figures, one row per optimiser."""
    rows = []
    for name in optimizers:
        rs = [r for r in results if r["optimizer"] == name]
        if not rs:
            continue
        row = {"optimizer": name, "seeds": len(rs)}
        for key in ("train_loss", "test_loss", "beta_l1", "support_size"):
            row[key], row[f"{key}_std"] = mean_std([r[key] for r in rs])  # sample std
        row["support_recovered"] = sum(r["support_recovered"] for r in rs) / len(rs)
        row["seconds_per_run"] = float(np.mean([r["seconds"] for r in rs]))
        rows.append(row)
    return rows


def run_sparse(cfg: SparseConfig, out: str | Path, *, resume: bool = False,
               progress_bar: bool | None = None) -> dict:
    """Every optimiser on every seed (resumable per finished run); summary, table and plots."""
    cfg.validate()
    run = RunDir(out, {"command": "optim sparse", **asdict(cfg)}, resume=resume)
    with fixed_threads(cfg.threads):
        return _run(cfg, run, progress_bar)


def _run(cfg: SparseConfig, run: RunDir, progress_bar: bool | None) -> dict:
    state = run.resumed_state or {"results": [], "paths": {}}
    done = {(r["optimizer"], r["seed"]) for r in state["results"]}
    jobs = [(o, s) for s in cfg.seeds for o in cfg.optimizers]
    with progress(len(jobs), "sparse regression", progress_bar, completed=len(done)) as tick:
        for name, seed in jobs:
            if (name, seed) in done:
                continue
            res = fit_one(name, cfg, seed, record_path=(seed == cfg.seeds[0]))
            if "path" in res:
                state["paths"][name] = {"path": res.pop("path"), "final": res.pop("final_beta")}
            state["results"].append(res)
            run.log(res)
            run.save(state)
            tick(1, opt=name, test=res["test_loss"])
    rows = aggregate(state["results"], cfg.optimizers)
    values = {o: per_seed([r for r in state["results"] if r["optimizer"] == o
                           and not r.get("diverged")], "beta_l1") for o in cfg.optimizers}
    comparisons = compare({"beta_l1": values}, higher_is_better=False)
    _plot(run, cfg, state["paths"])
    summary = {"table": rows, "k": cfg.k, "support_threshold": SUPPORT_THRESHOLD,
               "seeds": cfg.seeds, "beta_l1_per_seed": values, "comparisons": comparisons,
               "torch_threads": torch.get_num_threads()}
    run.write_summary(summary)
    write_study_results("genlab optim sparse", cfg, run.path, sparse_results(summary, cfg))
    return summary


def _plot(run: RunDir, cfg: SparseConfig, paths: dict) -> None:
    names = [n for n in cfg.optimizers if n in paths]
    if not names:
        return
    fig, axes = figure(ncols=len(names), nrows=2, width=3.6, height=3.0)
    for j, name in enumerate(names):
        p = np.array(paths[name]["path"])
        epochs = np.arange(len(p)) * cfg.path_every
        ax = axes[0][j]
        ax.plot(epochs, p[:, cfg.k:], color="0.6", lw=0.5)
        ax.plot(epochs, p[:, : cfg.k], color="tab:red", lw=1.5)
        ax.set(title=name, xlabel="epoch", ylabel="|beta_j|" if j == 0 else None, yscale="log",
               ylim=(1e-6, 2))
        ax = axes[1][j]
        final = np.abs(np.array(paths[name]["final"]))
        ax.bar(np.arange(cfg.d), final, color=["tab:red"] * cfg.k + ["0.5"] * (cfg.d - cfg.k))
        ax.axhline(SUPPORT_THRESHOLD, color="k", lw=0.6, ls="--")
        ax.set(xlabel="coordinate j", ylabel="final |beta_j|" if j == 0 else None)
    fig.suptitle(f"diagonal net, seed {cfg.seeds[0]}: true support in red")
    run.save_figure(fig, "sparse_paths.png")


def report(summary: dict, cfg: SparseConfig) -> list:
    """What `genlab optim sparse` prints: each optimiser's figures, mean +- std over seeds."""
    rows = []
    for r in summary["table"]:
        row = {"optimizer": r["optimizer"]}
        for key, digits in (("train_loss", 4), ("test_loss", 4), ("beta_l1", 2),
                            ("support_size", 1)):
            row[key] = f"{r[key]:.{digits}f} ± {r[key + '_std']:.{digits}f}"
        row["support_recovered"] = f"{r['support_recovered']:.0%} of seeds"
        rows.append(row)
    return [(None, rows, None),
            comparison_block(COMPARED, summary["comparisons"])]


#: what the comparisons table compares
COMPARED = "||beta||_1 (lower: sparser, read as better)"


STUDY = register_study(Study("sparse", SparseConfig, run_sparse, report))
