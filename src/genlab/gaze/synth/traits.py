"""Subjects' traits, appearance clusters and domain specifications of the synthetic eye world.

Our reconstruction (see docs/gaze_data.md). A *subject* is a fixed set of appearance
traits (skin tone, iris colour, eye shape, kappa angle, glasses, brow, lashes). A
*domain* (:class:`DomainSpec`) is a distribution over subjects' traits and over capture
conditions (gaze and head-pose range, lighting, blur, resolution, noise, JPEG).

A domain may also mix *appearance clusters* (:class:`ClusterSpec`): visible families of
eyes (iris colour, lid aperture and lashes, canthal tilt and eye size together), each
with its own kappa (visual minus optical axis) and iris-displacement gain. The gain
scales the eye-in-head rotation that a given gaze label needs::

    optical axis = gaze - kappa + (gain - 1) * (gaze - head pose)

so in a clustered world the appearance decides part of the image-to-gaze mapping.
Without clusters, gain is 1 and kappa is drawn around (0, 2) degrees for everyone.

A cluster may also change the mapping through the eye's anatomy (the anatomy world,
genlab.gaze.synth.worlds): its own range of iris sizes (a larger iris moves its centre
less per degree, ``sqrt(1 - s^2)``, and more of it hides under the lids), how far the
upper lid follows the eye's vertical rotation (``lid_follow``; covering the iris and
shifting its visible centre), and a kappa that depends on eye shape (degrees of kappa per
degree of canthal tilt away from the cluster's mean tilt), so that the same look can mean
opposite offsets in two clusters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from genlab.core.errors import ConfigError, require_positive

# Iris colour families (linear RGB in [0, 1]) and skin tone end points (light -> dark).
IRIS_FAMILIES: dict[str, tuple[float, float, float]] = {
    "dark-brown": (0.16, 0.08, 0.04),
    "brown": (0.36, 0.19, 0.08),
    "hazel": (0.45, 0.36, 0.16),
    "green": (0.30, 0.42, 0.24),
    "blue": (0.26, 0.42, 0.62),
    "grey": (0.45, 0.48, 0.52),
}
_SKIN_LIGHT = np.array([0.95, 0.78, 0.68])
_SKIN_MID = np.array([0.78, 0.56, 0.40])
_SKIN_DARK = np.array([0.32, 0.20, 0.13])
NO_CLUSTER = -1
LID_FOLLOW = 0.7  # the upper lid's height per unit of sin(eye-in-head pitch), in aperture units


def skin_rgb(tone: float) -> np.ndarray:
    """Skin colour for a tone in [0, 1] (0 very light, 1 very dark), piecewise linear."""
    t = float(np.clip(tone, 0.0, 1.0))
    if t < 0.5:
        return _SKIN_LIGHT + (_SKIN_MID - _SKIN_LIGHT) * (t / 0.5)
    return _SKIN_MID + (_SKIN_DARK - _SKIN_MID) * ((t - 0.5) / 0.5)


@dataclass(frozen=True)
class SubjectTraits:
    """Appearance of one subject, fixed across all of their images."""

    subject_id: int
    skin_tone: float  # 0 (light) .. 1 (dark)
    skin_rgb: tuple[float, float, float]
    iris_family: str
    iris_rgb: tuple[float, float, float]
    aperture: float  # multiplies the eyelid opening (1 = average)
    canthal_tilt_deg: float  # positive: outer corner higher
    eye_size: float  # eyeball radius multiplier
    iris_size: float  # sine of the iris' angular radius on the eyeball (~0.5)
    kappa: tuple[float, float]  # (pitch, yaw) radians, visual minus optical axis
    glasses: bool
    lens_power: float  # diopters; 0 without glasses
    frame_rgb: tuple[float, float, float]
    brow_height: float  # in eyeball radii above the eye centre
    brow_thickness: float
    brow_arch: float
    hair_rgb: tuple[float, float, float]
    lash_density: float  # 0..1
    texture_seed: int
    cluster: int = NO_CLUSTER  # index of the subject's appearance cluster, -1 if none
    iris_gain: float = 1.0  # eye-in-head rotation per unit of gaze (see module docstring)
    lid_follow: float = LID_FOLLOW  # upper-lid height per unit of sin(eye-in-head pitch)

    def appearance_vector(self) -> np.ndarray:
        """The traits as one float vector (order: :data:`APPEARANCE_NAMES`)."""
        return np.array(
            [self.skin_tone, *self.iris_rgb, self.aperture, self.canthal_tilt_deg / 10.0,
             self.eye_size, self.iris_size, np.degrees(self.kappa[0]),
             np.degrees(self.kappa[1]), float(self.glasses), self.lens_power / 5.0,
             self.brow_height, self.brow_thickness, self.brow_arch, self.lash_density,
             float(self.cluster), self.iris_gain, self.lid_follow],
            dtype=np.float32,
        )


APPEARANCE_NAMES = (
    "skin_tone", "iris_r", "iris_g", "iris_b", "aperture", "canthal_tilt_10deg", "eye_size",
    "iris_size", "kappa_pitch_deg", "kappa_yaw_deg", "glasses", "lens_power_5D",
    "brow_height", "brow_thickness", "brow_arch", "lash_density", "cluster", "iris_gain",
    "lid_follow",
)


@dataclass(frozen=True)
class ClusterSpec:
    """A visible family of eyes with its own image-to-gaze mapping. Angles in degrees."""

    name: str
    iris_family: str
    aperture_mean_std: tuple[float, float]
    tilt_mean_std: tuple[float, float]
    eye_size_range: tuple[float, float]
    lash_density_range: tuple[float, float]
    kappa_deg: tuple[float, float]  # mean (pitch, yaw) kappa of the cluster
    iris_gain: float
    # anatomy (the defaults leave a cluster as the appearance world has it)
    iris_size_range: tuple[float, float] | None = None  # sine of the iris' angular radius
    lid_follow: float = LID_FOLLOW  # how far the upper lid follows the eye's pitch
    kappa_tilt_slope: tuple[float, float] = (0.0, 0.0)  # kappa (pitch, yaw) per deg of tilt


@dataclass(frozen=True)
class DomainSpec:
    """A distribution over subjects and capture conditions. Angles in degrees."""

    name: str
    description: str
    subject_offset: int  # subject ids of this domain start here (disjoint ranges)
    n_subjects: int
    # appearance mix
    skin_tone_beta: tuple[float, float]  # Beta(a, b) over tone 0..1
    iris_probs: dict[str, float]
    glasses_prob: float
    lens_power_range: tuple[float, float]
    aperture_mean_std: tuple[float, float]
    tilt_mean_std: tuple[float, float]
    # gaze / head pose: "normal" (mean, std, clipped at limit) or "screen" (uniform box)
    gaze_kind: str
    gaze_mean: tuple[float, float]
    gaze_std: tuple[float, float]
    gaze_limit: tuple[float, float]
    head_std: tuple[float, float]
    head_limit: tuple[float, float]
    # capture
    light_intensity: tuple[float, float]
    ambient: tuple[float, float]
    coloured_light_prob: float
    light_colour_std: float
    light_dir_std: float
    side_shadow: tuple[float, float]
    blur_sigma: tuple[float, float]  # pixels at the output size
    resolution_scale: tuple[float, float]  # effective resolution / output resolution
    noise_std: tuple[float, float]  # of uint8 levels
    jpeg_quality: tuple[int, int]
    scale_jitter: float  # relative eye size jitter per image
    shift_jitter: float  # pixels
    extra: dict = field(default_factory=dict)
    # appearance clusters and their mixing proportions (empty: no clusters)
    clusters: tuple[ClusterSpec, ...] = ()
    cluster_probs: tuple[float, ...] = ()

    def __post_init__(self):
        if len(self.clusters) != len(self.cluster_probs):
            raise ConfigError(f"domain {self.name}: {len(self.clusters)} clusters but "
                              f"{len(self.cluster_probs)} proportions")
        if self.clusters and (min(self.cluster_probs) < 0
                              or abs(sum(self.cluster_probs) - 1.0) > 1e-6):
            raise ConfigError(f"domain {self.name}: cluster proportions must be >= 0 and sum "
                              f"to 1, got {self.cluster_probs}")


def cluster_quotas(probs, n: int, rng: np.random.Generator) -> np.ndarray:
    """Cluster of each of ``n`` subjects: counts by largest remainders of ``probs * n``, shuffled.

    The population holds the clusters in the stated proportions up to rounding (a random
    draw per subject would leave a 20-subject target without a 20% cluster 1% of the time).
    """
    p = np.asarray(probs, dtype=np.float64)
    exact = p / p.sum() * n
    counts = np.floor(exact).astype(int)
    for k in np.argsort(-(exact - counts), kind="stable")[: n - counts.sum()]:
        counts[k] += 1
    return rng.permutation(np.repeat(np.arange(len(p)), counts))


def draw_subject(spec: DomainSpec, rng: np.random.Generator, subject_id: int,
                 cluster_index: int = NO_CLUSTER) -> SubjectTraits:
    """One subject of a domain from ``rng``; a clustered domain needs ``cluster_index``.

    The draws are taken in a fixed order (colours, then shape, then the cluster's own
    traits): a subject's traits depend only on ``rng``'s stream.
    """
    cluster = _subject_cluster(spec, cluster_index)
    traits = {"subject_id": subject_id, **_draw_colours(spec, rng, cluster)}
    traits |= _draw_shape(spec, rng, cluster)
    if cluster is not None:
        traits |= _cluster_traits(rng, *cluster, traits["canthal_tilt_deg"])
    return SubjectTraits(**traits)


def _subject_cluster(spec: DomainSpec, cluster_index: int) -> tuple[int, ClusterSpec] | None:
    """(index, cluster) of a clustered domain's subject; None in a domain without clusters."""
    if not spec.clusters:
        return None
    if not 0 <= cluster_index < len(spec.clusters):
        raise ConfigError(f"domain {spec.name}: cluster index {cluster_index} not in "
                          f"0..{len(spec.clusters) - 1}")
    return cluster_index, spec.clusters[cluster_index]


def _draw_colours(spec: DomainSpec, rng: np.random.Generator,
                  cluster: tuple[int, ClusterSpec] | None) -> dict:
    """Skin, iris, glasses and their frame, hair: the subject's colours (a cluster fixes the
    iris family; the family is drawn all the same, so the stream stays in step)."""
    tone = float(rng.beta(*spec.skin_tone_beta))
    families = list(spec.iris_probs)
    p = np.array([spec.iris_probs[f] for f in families])
    family = families[int(rng.choice(len(families), p=p / p.sum()))]
    if cluster is not None:
        family = cluster[1].iris_family
    iris = np.clip(np.array(IRIS_FAMILIES[family]) * rng.uniform(0.8, 1.2, 3), 0.02, 0.95)
    glasses = bool(rng.random() < spec.glasses_prob)
    power = float(rng.uniform(*spec.lens_power_range)) if glasses else 0.0
    frame = rng.choice([0.05, 0.25, 0.55, 0.8]) * rng.uniform(0.7, 1.3, 3)
    hair_dark = rng.uniform(0.03, 0.35) * (1.0 - 0.6 * tone)
    hair = np.clip(hair_dark * np.array([1.0, 0.8, 0.6]) * rng.uniform(0.8, 1.2, 3), 0.01, 0.6)
    return dict(
        skin_tone=tone,
        skin_rgb=tuple(float(c) for c in skin_rgb(tone) * rng.uniform(0.95, 1.05, 3)),
        iris_family=family,
        iris_rgb=tuple(float(c) for c in iris),
        glasses=glasses,
        lens_power=power,
        frame_rgb=tuple(float(c) for c in np.clip(frame, 0.0, 1.0)),
        hair_rgb=tuple(float(c) for c in hair),
    )


def _draw_shape(spec: DomainSpec, rng: np.random.Generator,
                cluster: tuple[int, ClusterSpec] | None) -> dict:
    """The eye's opening, tilt, size and kappa, the brow, the lashes and the texture's seed
    (a cluster sets the means of the opening and the tilt)."""
    ap_mean, ap_std = spec.aperture_mean_std if cluster is None else cluster[1].aperture_mean_std
    tilt_mean, tilt_std = spec.tilt_mean_std if cluster is None else cluster[1].tilt_mean_std
    return dict(
        aperture=float(np.clip(rng.normal(ap_mean, ap_std), 0.5, 1.5)),
        canthal_tilt_deg=float(np.clip(rng.normal(tilt_mean, tilt_std), -8.0, 14.0)),
        eye_size=float(rng.uniform(0.92, 1.08)),
        iris_size=float(rng.uniform(0.46, 0.54)),
        kappa=(float(np.radians(rng.normal(0.0, 1.0))),
               float(np.radians(rng.normal(2.0, 1.0)))),
        brow_height=float(rng.uniform(1.25, 1.6)),
        brow_thickness=float(rng.uniform(0.18, 0.4)),
        brow_arch=float(rng.uniform(0.0, 0.35)),
        lash_density=float(rng.uniform(0.3, 1.0)),
        texture_seed=int(rng.integers(0, 2**31 - 1)),
    )


def _cluster_traits(rng: np.random.Generator, k: int, c: ClusterSpec,
                    tilt_deg: float) -> dict:
    """The traits a cluster draws anew or sets: its kappa (around its mean, and per degree
    of ``tilt_deg`` away from its mean tilt), eye size, lashes, iris gain, lid follow and,
    where it has one, its iris size range."""
    kappa = np.asarray(c.kappa_deg) + rng.normal(0.0, 0.5, 2)
    # kappa that depends on eye shape: per degree of tilt away from the cluster's mean
    kappa = np.radians(kappa + np.asarray(c.kappa_tilt_slope) * (tilt_deg - c.tilt_mean_std[0]))
    traits = dict(
        cluster=k,
        iris_gain=float(c.iris_gain),
        eye_size=float(rng.uniform(*c.eye_size_range)),
        lash_density=float(rng.uniform(*c.lash_density_range)),
        kappa=(float(kappa[0]), float(kappa[1])),
        lid_follow=float(c.lid_follow),
    )
    if c.iris_size_range is not None:  # drawn last: the other traits keep their values
        traits["iris_size"] = float(rng.uniform(*c.iris_size_range))
    return traits


def sample_gaze_head(spec: DomainSpec, n: int, rng: np.random.Generator
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Gaze (visual axis) and head pose (n, 2) pitch-yaw in radians, drawn from a domain."""
    require_positive("count", n)
    if spec.gaze_kind == "screen":
        lim = np.array(spec.gaze_limit)
        gaze = np.array(spec.gaze_mean) + rng.uniform(-1.0, 1.0, (n, 2)) * lim
    elif spec.gaze_kind == "normal":
        gaze = _truncated_normal(rng, n, spec.gaze_mean, spec.gaze_std, spec.gaze_limit)
    else:
        raise ConfigError(f"domain {spec.name}: unknown gaze_kind {spec.gaze_kind!r}")
    head = _truncated_normal(rng, n, (0.0, 0.0), spec.head_std, spec.head_limit)
    return np.radians(gaze).astype(np.float32), np.radians(head).astype(np.float32)


def _truncated_normal(rng: np.random.Generator, n: int, mean, std, limit) -> np.ndarray:
    """(n, 2) normal draws with |value| <= limit, out-of-range draws redrawn (no spikes)."""
    mean, std, limit = (np.asarray(v, dtype=np.float64) for v in (mean, std, limit))
    x = mean + rng.normal(size=(n, 2)) * std
    for _ in range(50):
        bad = np.abs(x) > limit
        if not bad.any():
            break
        x[bad] = (mean + rng.normal(size=(n, 2)) * std)[bad]
    return np.clip(x, -limit, limit)
