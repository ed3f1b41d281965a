"""The nonuniformity section of ``genlab demo``: small toy, sparse regression, one training."""

from __future__ import annotations

import time
from pathlib import Path

from genlab.core.report import Report
from genlab.optim.studies.synthetic.sparse import SparseConfig, run_sparse
from genlab.optim.studies.synthetic.toy import ToyConfig, run_toy
from genlab.optim.studies.train import TrainConfig, train_digits

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


def demo_section(out_dir: Path, report: Report, *, quick: bool = True) -> dict:
    """Run the three small studies into ``out_dir`` and add their results to ``report``.

    Image paths are relative to the report's folder (``out_dir``'s parent). A re-run
    continues the run folders already there.
    """
    out_dir = Path(out_dir)
    rel = Path(out_dir.name)
    t0 = time.perf_counter()
    report.heading("Nonuniformity: gradient noise, curvature and sharpness")

    toy = run_toy(ToyConfig(seeds=20, iterations=600 if quick else 1000), out_dir / "toy",
                  resume=True)
    report.text(
        "1-D toy with two minima of equal sharpness (f'' = 2). SGD with lr 0.6 started at "
        "x = 1.0001 (sample curvatures 0.2 and 3.8, nonuniformity s = 1.8) leaves for x = 0 "
        f"(s = 0) in {toy['sgd_escape_fraction']:.0%} of {toy['seeds']} seeds (median "
        f"iteration {toy['sgd_median_leave_iteration']}); GD stays at x = {toy['gd_final_x']:.4f}.")
    report.image(rel / "toy" / "toy_paths.png", "toy: SGD trajectories escape, GD stays")

    sparse_cfg = SparseConfig(seeds=1 if quick else 5, epochs=150 if quick else 400)
    sparse = run_sparse(sparse_cfg, out_dir / "sparse", resume=True, progress_bar=False)
    report.text(
        f"Sparse regression with a diagonal net (n = 100, d = 150, k = 3; {sparse_cfg.epochs} "
        f"epochs, {sparse_cfg.seeds} seed(s)): test loss, ||beta||_1 and the number of "
        "coordinates with |beta_j| > 0.01 (true support: 3).")
    report.table(sparse["table"], ["optimizer", "train_loss", "test_loss", "beta_l1",
                                   "support_size", "support_recovered"], digits=4)
    report.image(rel / "sparse" / "sparse_paths.png", "|beta_j| paths; true support in red")

    train_cfg = TrainConfig(arch="mlp", width=64, depth=2, epochs=8 if quick else 20,
                            measure_samples=256, curvature_samples=64, measure_iterations=15,
                            measure_probes=10)
    trained = train_digits(train_cfg, out_dir / "train", resume=True, progress_bar=False)
    m = trained["measures"]
    report.text(
        f"MLP on digits with SGD ({train_cfg.epochs} epochs): clean test accuracy "
        f"{trained['test_acc']:.3f}, gap (test - train loss) {trained['gap_loss']:.3f}. "
        f"Measures on {m['n_samples']} training samples (BatchNorm mode: {m['bn_mode']}):")
    report.table([{"measure": label, "value": m[key]} for key, label in MEASURE_ROWS],
                 digits=4)
    report.image(rel / "train" / "curves.png", "training curves")
    return {"toy": toy, "sparse": sparse["table"], "train": trained,
            "seconds": time.perf_counter() - t0}
