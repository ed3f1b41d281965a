"""Synthetic gaze data: rendered eye images with exact labels, grouped into domains.

The renderer is in :mod:`genlab.gaze.synth.render`, subjects and domains in
:mod:`genlab.gaze.synth.domains`; this module draws a domain's data set
(:func:`render_domain`), checks the renderer's geometry (:func:`iris_centre_check`)
and writes a data set to disk in the ETH-XGaze layout (:func:`render_to_folder`).
:class:`SyntheticGaze` is a rendered domain as an in-memory
:class:`genlab.gaze.data.gazeset.GazeSet` (the one gaze data interface) that can also be
indexed like a torch Dataset: ``ds[i]`` is ``(image, gaze)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from genlab.core.errors import ConfigError, require_positive
from genlab.core.options import check_options, option
from genlab.core.progress import progress as progress_bar
from genlab.core.runs import RunDir
from genlab.core.storage.files import atomic_write_bytes
from genlab.gaze.data.gazeset import GazeLabels, GazeSet, to_float_image
from genlab.gaze.data.splits import fraction_indices
from genlab.gaze.data.xgaze import write_xgaze_h5
from genlab.gaze.draw import draw_gaze_arrows, write_image
from genlab.gaze.geometry import pitchyaw_to_vector
from genlab.gaze.synth.domains import (
    APPEARANCE_NAMES,
    DOMAINS,
    DomainSpec,
    SubjectTraits,
    domain_table,
    get_domain,
    sample_gaze_head,
    sample_subjects,
)
from genlab.gaze.synth.render import CLEAN, RHO_PER_WIDTH, render_eyes
from genlab.gaze.synth.traits import NO_CLUSTER

__all__ = [
    "APPEARANCE_NAMES", "DOMAINS", "DomainSpec", "SubjectTraits", "SynthBatch", "SyntheticGaze",
    "domain_table",
    "iris_centre_check", "render_domain", "render_eyes", "render_to_folder", "sample_subjects",
]


@dataclass
class SynthBatch:
    """A rendered data set: images (N,H,W,3) uint8 RGB and per-image labels."""

    images: np.ndarray
    gaze: np.ndarray  # (N, 2) float32 (pitch, yaw) radians of the visual axis
    head_pose: np.ndarray  # (N, 2) float32 (pitch, yaw) radians
    subject: np.ndarray  # (N,) int64 subject ids
    appearance: np.ndarray  # (N, A) float32 traits (order: APPEARANCE_NAMES)
    domain: str = ""
    cluster: np.ndarray | None = None  # (N,) int64 appearance cluster, -1 where none

    def __post_init__(self):
        if self.cluster is None:
            self.cluster = np.full(len(self.gaze), NO_CLUSTER, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.gaze)


def render_domain(domain: str, count: int, seed: int, size: tuple[int, int] = (64, 96),
                  n_subjects: int | None = None, progress: bool | None = None) -> SynthBatch:
    """Render ``count`` images of a domain; deterministic in (domain, count, seed, size, n).

    Images are shared out evenly over the domain's subjects (``n_subjects`` overrides
    their number). ``progress`` shows a bar (default: on a terminal).
    """
    require_positive("count", count)
    spec = get_domain(domain)
    n_subj = spec.n_subjects if n_subjects is None else n_subjects
    require_positive("n_subjects", n_subj)
    subjects = sample_subjects(spec, n_subj, seed)
    rng = np.random.default_rng([seed, 7, count])
    # each subject gets an (almost) equal share of the images, in shuffled order
    owner = rng.permutation(np.arange(count) % n_subj)
    gaze, head = sample_gaze_head(spec, count, rng)
    traits = [subjects[i] for i in owner]
    with progress_bar(count, f"render {spec.name}", enabled=progress) as tick:
        images = render_eyes(gaze, traits, head, rng, size=size, conditions=spec, on_chunk=tick)
    appearance = np.stack([s.appearance_vector() for s in subjects])[owner]
    ids = np.array([s.subject_id for s in subjects], dtype=np.int64)[owner]
    cluster = np.array([s.cluster for s in subjects], dtype=np.int64)[owner]
    return SynthBatch(images, gaze, head, ids, appearance, spec.name, cluster)


class SyntheticGaze(GazeSet):
    """Rendered eye images of one domain, rendered once at construction and kept in memory.

    ``subjects`` keeps only images of those subject ids (after rendering ``count``
    images); ``fraction`` then keeps a seeded random share of them. Besides the GazeSet
    interface (``labels``, ``load``, ``subset``, ``preview``) it keeps each image's
    ``head_pose`` and ``appearance`` traits, and ``ds[i]`` is ``(image float [0, 1], gaze)``.
    """

    def __init__(self, domain: str, count: int, seed: int, size: tuple[int, int] = (64, 96),
                 subjects: Sequence[int] | None = None, fraction: float = 1.0,
                 n_subjects: int | None = None):
        batch = render_domain(domain, count, seed, size=size, n_subjects=n_subjects)
        keep = np.arange(len(batch))
        if subjects is not None:
            wanted = np.asarray(list(subjects), dtype=np.int64)
            keep = keep[np.isin(batch.subject, wanted)]
            if len(keep) == 0:
                raise ConfigError(f"none of the subjects {wanted.tolist()[:8]} occur in domain "
                                  f"{domain!r} (ids {batch.subject.min()}..{batch.subject.max()})")
        keep = keep[fraction_indices(len(keep), fraction, seed)]
        self._fill(batch, keep)

    @classmethod
    def from_batch(cls, batch: SynthBatch) -> SyntheticGaze:
        """Wrap an already rendered batch without rendering again."""
        self = cls.__new__(cls)
        self._fill(batch, np.arange(len(batch)))
        return self

    def _fill(self, batch: SynthBatch, keep: np.ndarray) -> None:
        images = torch.from_numpy(np.ascontiguousarray(batch.images[keep].transpose(0, 3, 1, 2)))
        labels = GazeLabels.build(batch.gaze[keep], batch.subject[keep], batch.cluster[keep])
        GazeSet.__init__(self, images, labels, batch.domain)
        self.domain = batch.domain
        self.size = tuple(batch.images.shape[1:3])
        self.head_pose = torch.from_numpy(batch.head_pose[keep].astype(np.float32))
        self.appearance = batch.appearance[keep]

    def __getitem__(self, i):
        return to_float_image(self.images[i]), self.gaze[i]


def _iris_centroids(images: np.ndarray) -> np.ndarray:
    """Centroid (x, y) in pixels of strongly blue pixels, one per image."""
    im = images.astype(np.float32)
    mask = (im[..., 2] > im[..., 0] + 35) & (im[..., 2] > im[..., 1] + 10)
    ys, xs = np.mgrid[0:images.shape[1], 0:images.shape[2]] + 0.5
    cnt = mask.sum(axis=(1, 2))
    if np.any(cnt < 5):
        raise RuntimeError("iris_centre_check: iris not found by its colour in some images")
    return np.stack([(mask * xs).sum((1, 2)) / cnt, (mask * ys).sum((1, 2)) / cnt], -1)


def iris_centre_check(size: tuple[int, int] = (64, 96), max_deg: float = 20.0,
                      steps: int = 9) -> dict:
    """Self-check of the renderer's geometry: iris centroid shift vs the projected optical axis.

    One clean subject (blue iris, wide eyelids, no glasses, frontal head, no noise) looks
    at yaw in [-max, max] (pitch 0), then pitch in [-max, max] (yaw 0). The iris centroid
    found by a colour mask must move by ``rho * sqrt(1 - s^2) * (o_x, o_y)`` pixels (see
    synth.render). Returns, per axis, the fitted slope divided by the predicted one,
    the correlation and the largest residual in pixels.
    """
    H, W = size
    subject = sample_subjects(CLEAN, 1, 0)[0]
    subject = replace(subject, iris_rgb=(0.1, 0.25, 0.95), aperture=1.5, glasses=False,
                      lens_power=0.0, canthal_tilt_deg=0.0, eye_size=1.0, iris_size=0.5,
                      kappa=(0.0, 0.0), skin_rgb=(0.9, 0.75, 0.65), lash_density=0.3)

    angles = np.radians(np.linspace(-max_deg, max_deg, steps)).astype(np.float32)
    result = {}
    for axis, name in ((1, "yaw"), (0, "pitch")):
        gaze = np.zeros((steps, 2), np.float32)
        gaze[:, axis] = angles
        imgs = render_eyes(gaze, [subject] * steps, np.zeros_like(gaze),
                           np.random.default_rng(0), size=size, conditions=CLEAN)
        measured = _iris_centroids(imgs)[:, 0 if name == "yaw" else 1]
        o = pitchyaw_to_vector(gaze)
        rho = RHO_PER_WIDTH * W
        predicted = rho * np.sqrt(1 - 0.5**2) * (o[:, 0] if name == "yaw" else o[:, 1])
        slope = np.polyfit(predicted, measured, 1)[0]
        fit = np.polyval(np.polyfit(predicted, measured, 1), predicted)
        result[name] = {
            "slope_ratio": float(slope),
            "correlation": float(np.corrcoef(predicted, measured)[0, 1]),
            "max_residual_px": float(np.abs(measured - fit).max()),
            "predicted_px": predicted.tolist(),
            "measured_px": (measured - measured.mean() + predicted.mean()).tolist(),
        }
    return result


@dataclass
class RenderConfig:
    """The options of `genlab gaze render`."""

    domain: str = option("mixed", help="Synthetic domain.",
                         choices="genlab.gaze.synth.domains:DOMAINS")
    count: int = option(64, help="Number of images.", gt=0)
    seed: int = option(0, help="Rendering seed.", ge=0)
    size: list[int] = option(factory=lambda: [64, 96], parse="size", ge=8,
                             help="Size of each eye: N or HEIGHTxWIDTH, >= 8 pixels a side.")
    png: int = option(0, help="Also write the first N images as single-eye PNG files "
                      "(eyes/eye_0000.png ..., labels in eyes.csv) that gaze predict takes.",
                      ge=0)

    def render(self, out: str | Path) -> dict:
        check_options(self)
        return render_to_folder(self.count, self.domain, self.seed, out, tuple(self.size),
                                png=self.png)


def render_to_folder(count: int, domain: str, seed: int, out: str | Path,
                     size: tuple[int, int] = (64, 96), png: int = 0) -> dict:
    """Render a domain into ``out``: ETH-XGaze-style h5 files per subject plus a sample grid
    (samples.png, several eyes with their true gaze); with ``png`` = N also the first N
    images as single-eye files eyes/eye_0000.png ... (what ``gaze predict`` takes) and
    their labels in eyes.csv (file, subject, pitch_deg, yaw_deg).

    Returns a summary dict (files, counts, label ranges) that is also written to
    ``out/summary.json``; config.json records the options.
    """

    DOMAINS.canonical(domain)
    require_positive("count", count)
    if len(size) != 2 or min(size) < 8:
        raise ConfigError(f"size must be (height, width) of at least 8 pixels, got {size}")
    if not 0 <= png <= count:
        raise ConfigError(f"--png must be in 0..{count} (the --count of images), got {png}")
    run = RunDir(out, {"command": "gaze render", "count": count, "domain": domain,
                       "seed": seed, "size": list(size), "png": png})
    batch = render_domain(domain, count, seed, size=size)
    files = write_xgaze_h5(run.path, batch)
    k = min(24, len(batch))
    write_image(run.file("samples.png"),
                draw_gaze_arrows(batch.images[:k], batch.gaze[:k], legend=True))
    if png:
        deg = np.degrees(batch.gaze[:png])
        lines = ["file,subject,pitch_deg,yaw_deg"]
        for i in range(png):
            name = f"eyes/eye_{i:04d}.png"
            write_image(run.file(name), batch.images[i])
            lines.append(f"{name},{int(batch.subject[i])},{deg[i, 0]:.4f},{deg[i, 1]:.4f}")
        atomic_write_bytes(run.file("eyes.csv"), ("\n".join(lines) + "\n").encode())
    deg = np.degrees(batch.gaze)
    summary = {
        "domain": domain, "count": int(len(batch)), "subjects": int(len(np.unique(batch.subject))),
        "files": [p.name for p in files], "size": list(size),
        "gaze_pitch_deg": [float(deg[:, 0].min()), float(deg[:, 0].max())],
        "gaze_yaw_deg": [float(deg[:, 1].min()), float(deg[:, 1].max())],
        "glasses_fraction": float(batch.appearance[:, APPEARANCE_NAMES.index("glasses")].mean()),
    }
    run.write_summary(summary)
    return summary


def describe_domains() -> list[dict]:
    """Rows describing every domain (see docs/gaze_data.md)."""
    return domain_table()

