"""The nonuniformity section of ``genlab demo``: small toy, sparse regression, one training."""

from __future__ import annotations

import time
from pathlib import Path

from genlab.core.report import Report, mean_std_text
from genlab.optim.studies.synthetic.sparse import SparseConfig, run_sparse
from genlab.optim.studies.synthetic.toy import ToyConfig, run_toy
from genlab.optim.training.train import TrainConfig, train_digits

MEASURE_ROWS = [
    ("trace_sigma", "tr Sigma (gradient noise)"),
    ("minibatch_noise", "a tr Sigma (mini-batch noise)"),
    ("curvature_nonuniformity", "s = sqrt(lambda_max(Sigma_H))"),
    ("hessian_top_eigenvalue", "lambda_max(H)"),
    ("hessian_trace", "tr H (Hutchinson)"),
    ("m_sharpness", "adaptive worst-case m-sharpness"),
    ("average_sharpness", "average-case sharpness"),
    ("gradient_diversity", "gradient diversity"),
    ("noise_scale", "noise scale tr Sigma / ||g||^2"),
]


def sparse_rows(table: list[dict]) -> list[dict]:
    """The sparse-regression table: mean (± std over seeds when n >= 2) per optimiser."""
    rows = []
    for r in table:
        n = r.get("seeds", 1)
        row = {"optimizer": r["optimizer"]}
        for key, col, digits in (("train_loss", "train loss", 4), ("test_loss", "test loss", 4),
                                 ("beta_l1", "||beta||_1", 3), ("support_size", "support", 1)):
            row[col] = mean_std_text(r[key], r.get(f"{key}_std"), n, digits)
        row["true support found"] = f"{round(r['support_recovered'] * n)}/{n} seeds"
        rows.append(row)
    return rows


def sparse_reading(table: list[dict], k: int) -> str:
    """The sparse table's reading: lowest test loss and smallest support, against SGD."""
    if not table:
        return "No optimiser ran."
    best = min(table, key=lambda r: r["test_loss"])
    small = min(table, key=lambda r: r["support_size"])
    sgd = next((r for r in table if r["optimizer"] == "sgd"), None)
    text = f"Lowest test loss: {best['optimizer']} ({best['test_loss']:.4f}"
    text += f" vs sgd {sgd['test_loss']:.4f})" if sgd and sgd is not best else ")"
    text += (f"; smallest support: {small['optimizer']} ({small['support_size']:.0f} "
             f"coordinates; the true support has {k})")
    missed = [r["optimizer"] for r in table if r["support_recovered"] < 1]
    text += ("; every optimiser found the true support in every seed." if not missed else
             f"; the true support was missed in some seed by: {', '.join(missed)}.")
    return text


def measures_reading(m: dict) -> str:
    """The measures table's reading: the noise scale and worst- vs average-case sharpness."""
    parts = []
    if m.get("noise_scale") is not None:
        parts.append(f"the gradient noise tr Sigma is {m['noise_scale']:.0f} times the squared "
                     "norm of the mean gradient (noise scale)")
    worst, avg = m.get("m_sharpness"), m.get("average_sharpness")
    if worst is not None and avg is not None:
        if avg > 0 and worst >= avg:
            parts.append(f"the worst-case m-sharpness ({worst:.4f}) is {worst / avg:.1f} times "
                         f"the average-case sharpness ({avg:.4f})")
        else:
            parts.append(f"the worst-case m-sharpness is {worst:.4f} and the average-case "
                         f"sharpness {avg:.4f}")
    return ("At the end of training " + "; ".join(parts) + ".") if parts else "No measures."


def _started(folder: Path) -> bool:
    """A re-run of the demo continues its folders; a first run starts them (no warning)."""
    return (folder / "config.json").exists()


def demo_section(out_dir: Path, report: Report, *, quick: bool = True) -> dict:
    """Run the three small studies into ``out_dir`` and add their results to ``report``.

    Image paths are relative to the report's folder (``out_dir``'s parent). A re-run
    continues the run folders already there.
    """
    out_dir = Path(out_dir)
    rel = Path(out_dir.name)
    t0 = time.perf_counter()
    toy_cfg = ToyConfig(seeds=20, iterations=600 if quick else 1000)
    sparse_cfg = SparseConfig(seeds=1 if quick else 5, epochs=150 if quick else 400)
    train_cfg = TrainConfig(arch="mlp", width=64, depth=2, epochs=8 if quick else 20,
                            measure_samples=256, curvature_samples=64, measure_iterations=15,
                            measure_probes=10)
    n_sparse = len(sparse_cfg.seeds)
    sparse_seeds = "one seed" if n_sparse == 1 else f"{n_sparse} seeds"
    report.heading(
        f"Gradient noise, curvature and sharpness: a 1-D toy ({len(toy_cfg.seeds)} seeds), sparse "
        f"regression ({sparse_seeds}, {sparse_cfg.epochs} epochs) and an MLP on digits "
        f"({train_cfg.epochs} epochs)")

    toy = run_toy(toy_cfg, out_dir / "toy", resume=_started(out_dir / "toy"))
    report.text(
        "1-D toy with two minima of equal sharpness (f'' = 2). SGD with lr 0.6 started at "
        "x = 1.0001 (sample curvatures 0.2 and 3.8, nonuniformity s = 1.8) leaves for x = 0 "
        f"(s = 0) in {toy['sgd_escape_fraction']:.0%} of {len(toy['seeds'])} seeds (median "
        f"iteration {toy['sgd_median_leave_iteration']}); GD stays at x = {toy['gd_final_x']:.4f}.")
    report.image(rel / "toy" / "toy_paths.png", "toy: SGD trajectories escape, GD stays")

    sparse = run_sparse(sparse_cfg, out_dir / "sparse", resume=_started(out_dir / "sparse"),
                        progress_bar=False)
    report.text(
        f"Sparse regression with a diagonal net (n = 100, d = 150, k = 3; {sparse_cfg.epochs} "
        f"epochs, {sparse_seeds}): test loss, ||beta||_1 and the support, the number of "
        f"coordinates with |beta_j| > {sparse['support_threshold']} (true support: "
        f"{sparse['k']}).")
    report.table(sparse_rows(sparse["table"]))
    report.reading(sparse_reading(sparse["table"], sparse["k"]))
    report.image(rel / "sparse" / "sparse_paths.png", "|beta_j| paths; true support in red")

    trained = train_digits(train_cfg, out_dir / "train", resume=_started(out_dir / "train"),
                           progress_bar=False)
    m = trained["measures"]
    report.text(
        f"MLP on digits with SGD ({train_cfg.epochs} epochs): clean test accuracy "
        f"{trained['test_acc']:.1f}%, gap (test - train loss) {trained['gap_loss']:.3f}. "
        f"Measures on {m['n_samples']} training samples (BatchNorm mode: {m['bn_mode']}):")
    report.table([{"measure": label, "value": m[key]} for key, label in MEASURE_ROWS],
                 digits=4)
    report.reading(measures_reading(m))
    report.image(rel / "train" / "curves.png", "training curves")
    return {"toy": toy, "sparse": sparse["table"], "train": trained,
            "seconds": time.perf_counter() - t0}
