"""The stopping rule of `genlab optim correlate` on corners of its grids: epochs and seconds.

Each corner is one training of the correlate grid of its architecture (the measures' sizes
of `optim correlate`), run with `--stop-loss` at its cap and schedule; the script prints,
per corner, the epochs trained, whether it reached the loss, the first epoch below each of
0.01, 0.02, 0.03, 0.05 and 0.1 (from the run's `train_ce` per epoch), the training seconds
per epoch and the wall seconds of the whole training (data, training, measures, plot).

    python experiments/optim_stop_loss_cost.py --arch transformer --stop-loss 0.05 \\
        --out runs/stop_cost

Rerunning a finished corner reads its folder back (s_per_epoch is then the one it took,
wall_s the reading).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from genlab.core.report import markdown_table
from genlab.optim.training.train import TrainConfig, train_digits

THRESHOLDS = (0.01, 0.02, 0.03, 0.05, 0.1)

#: per architecture, corners of its correlate grid: the slow ones (smallest learning rate and
#: largest batch), a middle one and the noisy one (largest learning rate, smallest batch)
CORNERS: dict[str, list[dict]] = {
    "mlp": [dict(lr=0.02, batch_size=128, width=32, depth=3, optimizer="sam", weight_decay=5e-4),
            dict(lr=0.02, batch_size=128, width=128, depth=1, optimizer="sgd", weight_decay=0.0),
            dict(lr=0.05, batch_size=64, width=64, depth=1, optimizer="sam", weight_decay=5e-4),
            dict(lr=0.1, batch_size=16, width=128, depth=3, optimizer="sgd", weight_decay=5e-4)],
    "cnn": [dict(lr=0.02, batch_size=128, width=8, depth=2, optimizer="sam", weight_decay=5e-4),
            dict(lr=0.02, batch_size=128, width=32, depth=1, optimizer="sgd", weight_decay=0.0),
            dict(lr=0.05, batch_size=64, width=16, depth=1, optimizer="sam", weight_decay=5e-4),
            dict(lr=0.1, batch_size=32, width=32, depth=2, optimizer="sgd", weight_decay=5e-4),
            dict(lr=0.02, batch_size=128, width=8, depth=3, optimizer="sam", weight_decay=5e-4),
            dict(lr=0.02, batch_size=32, width=32, depth=3, optimizer="sgd", weight_decay=0.0),
            dict(lr=0.1, batch_size=32, width=32, depth=3, optimizer="sam", weight_decay=5e-4)],
    "transformer": [
        dict(lr=0.03, batch_size=64, width=16, depth=2, optimizer="sam", weight_decay=1e-3),
        dict(lr=0.03, batch_size=64, width=32, depth=1, optimizer="sgd", weight_decay=5e-4),
        dict(lr=0.05, batch_size=32, width=24, depth=1, optimizer="sam", weight_decay=1e-3),
        dict(lr=0.1, batch_size=32, width=32, depth=2, optimizer="sgd", weight_decay=1e-3)],
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", choices=sorted(CORNERS), required=True)
    p.add_argument("--stop-loss", type=float, required=True)
    p.add_argument("--cap", type=int, default=200)
    p.add_argument("--schedule", default="constant", choices=("constant", "cosine"))
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    rows = []
    for i, corner in enumerate(CORNERS[args.arch]):
        cfg = TrainConfig(arch=args.arch, epochs=args.cap, schedule=args.schedule,
                          stop_loss=args.stop_loss, measure_samples=256, curvature_samples=64,
                          measure_iterations=15, measure_probes=10, threads=1, **corner)
        folder = args.out / f"{args.arch}-{args.schedule}-{args.stop_loss:g}-{i}"
        start = time.perf_counter()
        summary = train_digits(cfg, folder, progress_bar=False)
        wall = time.perf_counter() - start
        ce = [json.loads(line)["train_ce"]
              for line in (folder / "metrics.jsonl").read_text().splitlines()]
        row = {**corner, "epochs": summary["epochs_trained"],
               "reached": summary["reached_stop_loss"], "min_ce": min(ce),
               "s_per_epoch": summary["train_seconds"] / len(ce), "wall_s": wall}
        row.update({f"first<{t:g}": next((k + 1 for k, v in enumerate(ce) if v < t), None)
                    for t in THRESHOLDS})
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(markdown_table(rows, digits=3))


if __name__ == "__main__":
    main()
