"""Evaluate a trained gaze run on a synthetic domain or on a real data set from disk.

Writes predictions.csv (index, subject, pitch, yaw in radians) for every image; for
labelled data also the errors (overall, per subject, per cluster), the router's
statistics and an arrow grid. Unlabelled data (the ETH-XGaze test split) get the
predictions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from genlab.core.options import check_options, option
from genlab.core.runs import RunDir, atomic_write_bytes
from genlab.core.trainer import resolve_device
from genlab.gaze.data.realdata import open_real, split_ref
from genlab.gaze.metrics import predict, summarise
from genlab.gaze.plots import arrows_on, save_image
from genlab.gaze.predict import open_run
from genlab.gaze.protocol import synthetic_set
from genlab.gaze.train import config_from_dict


@dataclass
class EvalConfig:
    """The options of `genlab gaze eval`."""

    checkpoint: str = option(None, help="Run folder of gaze train or its checkpoint.pt.",
                             argument=True, required=True)
    data: str = option("narrow-m", help="Data to evaluate on; unlabelled files (ETH-XGaze "
                       "test) get predictions only.", more="genlab.gaze.config:data_help")
    count: int = option(1000, help="Images rendered from a synthetic domain.", gt=0)
    data_seed: int = option(1, help="Seed of the rendered images.", ge=0)
    device: str = option("cpu", help="cpu | cuda | cuda:N | auto (cuda when there is one).")
    workers: int = option(0, help="DataLoader workers for real data.", ge=0)

    def run(self, out: str | Path) -> dict:
        check_options(self)
        return evaluate_run(self.checkpoint, out, data=self.data, count=self.count,
                            data_seed=self.data_seed, device=self.device, workers=self.workers)


def evaluate_run(checkpoint: str | Path, out: str | Path, *, data: str = "narrow-m",
                 count: int = 1000, data_seed: int = 1, device: str = "cpu",
                 workers: int = 0) -> dict:
    """Errors (where labelled) and predictions of a run on ``data``; writes a folder."""
    dev = resolve_device(device)
    loaded = open_run(checkpoint, dev, command="gaze eval")
    model, cfg = loaded.model, config_from_dict(loaded.config)
    if split_ref(data) is not None:
        dataset = open_real(data, cfg.size, workers=workers, labels="optional")
        name = data
    else:
        dataset = synthetic_set(data, count, data_seed, cfg.size)
        name = f"synthetic {data} (seed {data_seed})"
    run = RunDir(out, {"checkpoint": str(loaded.folder), "data": data,
                       "count": len(dataset), "data_seed": data_seed, "device": device})
    pred = predict(model, dataset, dev)
    lines = ["index,subject,pitch_rad,yaw_rad"] + [
        f"{i},{int(s)},{p:.6f},{y:.6f}"
        for i, (s, (p, y)) in enumerate(zip(dataset.labels.subject.tolist(),
                                            pred.gaze.tolist(), strict=True))]
    atomic_write_bytes(run.file("predictions.csv"), ("\n".join(lines) + "\n").encode())
    summary = {"data": name, "images": len(dataset), "labelled": dataset.labels.labelled}
    if dataset.labels.labelled:
        summary.update(summarise(pred, dataset.labels))
        save_image(run, arrows_on(model, dataset, dev), "gaze_arrows.png")
    run.write_summary(summary)
    return summary
