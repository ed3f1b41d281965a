"""Subjects and domains of the synthetic gaze world (our reconstruction, see docs/gaze_data.md).

A *subject* is a fixed set of appearance traits (skin tone, iris colour, eye shape,
kappa angle, glasses, brow, lashes). A *domain* is a distribution over subjects'
traits and over capture conditions (gaze and head-pose range, lighting, blur,
resolution, noise, JPEG). The four cross-domain tasks of MoEGaze (E->M, E->D, G->M,
G->D) are mirrored by two broad source domains ("broad-e", "broad-g") and two narrow
target domains ("narrow-m", "narrow-d") whose appearance mix is shifted towards traits
that are rare, not absent, in the sources.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

from genlab.core.errors import ConfigError, require_choice, require_positive

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

    def appearance_vector(self) -> np.ndarray:
        """The traits as one float vector (order: :data:`APPEARANCE_NAMES`)."""
        return np.array(
            [self.skin_tone, *self.iris_rgb, self.aperture, self.canthal_tilt_deg / 10.0,
             self.eye_size, self.iris_size, np.degrees(self.kappa[0]),
             np.degrees(self.kappa[1]), float(self.glasses), self.lens_power / 5.0,
             self.brow_height, self.brow_thickness, self.brow_arch, self.lash_density],
            dtype=np.float32,
        )


APPEARANCE_NAMES = (
    "skin_tone", "iris_r", "iris_g", "iris_b", "aperture", "canthal_tilt_10deg", "eye_size",
    "iris_size", "kappa_pitch_deg", "kappa_yaw_deg", "glasses", "lens_power_5D",
    "brow_height", "brow_thickness", "brow_arch", "lash_density",
)


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


_IRIS_BROAD = {"dark-brown": 0.35, "brown": 0.30, "hazel": 0.12, "green": 0.08, "blue": 0.12,
               "grey": 0.03}

DOMAINS: dict[str, DomainSpec] = {
    "broad-e": DomainSpec(
        name="broad-e",
        description="ETH-XGaze-like source: many subjects, broad appearance, wide gaze and "
                    "head pose, studio light",
        subject_offset=0, n_subjects=80,
        skin_tone_beta=(1.6, 2.6), iris_probs=_IRIS_BROAD, glasses_prob=0.08,
        lens_power_range=(-4.0, 2.0), aperture_mean_std=(1.05, 0.15), tilt_mean_std=(2.0, 3.0),
        gaze_kind="normal", gaze_mean=(0.0, 0.0), gaze_std=(15.0, 20.0),
        gaze_limit=(35.0, 45.0), head_std=(12.0, 18.0), head_limit=(30.0, 40.0),
        light_intensity=(0.8, 1.0), ambient=(0.35, 0.45), coloured_light_prob=0.05,
        light_colour_std=0.04, light_dir_std=15.0, side_shadow=(0.0, 0.15),
        blur_sigma=(0.0, 0.5), resolution_scale=(0.9, 1.0), noise_std=(0.5, 2.0),
        jpeg_quality=(88, 97), scale_jitter=0.05, shift_jitter=1.5,
    ),
    "broad-g": DomainSpec(
        name="broad-g",
        description="Gaze360-like source: widest gaze and head range, outdoor/indoor light, "
                    "more blur, lower effective resolution",
        subject_offset=100_000, n_subjects=60,
        skin_tone_beta=(1.8, 2.4), iris_probs=_IRIS_BROAD, glasses_prob=0.10,
        lens_power_range=(-4.0, 2.0), aperture_mean_std=(1.0, 0.15), tilt_mean_std=(2.5, 3.0),
        gaze_kind="normal", gaze_mean=(0.0, 0.0), gaze_std=(18.0, 28.0),
        gaze_limit=(40.0, 55.0), head_std=(18.0, 28.0), head_limit=(40.0, 55.0),
        light_intensity=(0.55, 1.1), ambient=(0.25, 0.5), coloured_light_prob=0.15,
        light_colour_std=0.08, light_dir_std=30.0, side_shadow=(0.0, 0.35),
        blur_sigma=(0.3, 1.3), resolution_scale=(0.45, 0.8), noise_std=(1.0, 5.0),
        jpeg_quality=(60, 90), scale_jitter=0.10, shift_jitter=3.0,
    ),
    "narrow-m": DomainSpec(
        name="narrow-m",
        description="MPIIFaceGaze-like target: laptop use, narrow gaze below the camera, "
                    "dim and coloured light; more glasses, darker skin, tilted eyes",
        subject_offset=200_000, n_subjects=15,
        skin_tone_beta=(3.0, 1.6),
        iris_probs={"dark-brown": 0.55, "brown": 0.25, "hazel": 0.05, "green": 0.03,
                    "blue": 0.07, "grey": 0.05},
        glasses_prob=0.45, lens_power_range=(-6.0, 3.0), aperture_mean_std=(0.85, 0.15),
        tilt_mean_std=(7.0, 3.0),
        gaze_kind="normal", gaze_mean=(-8.0, 0.0), gaze_std=(7.0, 11.0),
        gaze_limit=(25.0, 25.0), head_std=(6.0, 9.0), head_limit=(20.0, 25.0),
        light_intensity=(0.35, 0.9), ambient=(0.15, 0.4), coloured_light_prob=0.5,
        light_colour_std=0.15, light_dir_std=35.0, side_shadow=(0.1, 0.5),
        blur_sigma=(0.0, 0.8), resolution_scale=(0.6, 0.9), noise_std=(2.0, 6.0),
        jpeg_quality=(70, 92), scale_jitter=0.08, shift_jitter=2.0,
    ),
    "narrow-d": DomainSpec(
        name="narrow-d",
        description="EyeDiap-like target: screen target, low resolution and blur; fewer, "
                    "differently mixed subjects (light eyes, small apertures, glasses)",
        subject_offset=300_000, n_subjects=14,
        skin_tone_beta=(2.2, 2.2),
        iris_probs={"dark-brown": 0.2, "brown": 0.2, "hazel": 0.15, "green": 0.15,
                    "blue": 0.2, "grey": 0.1},
        glasses_prob=0.3, lens_power_range=(-5.0, 4.0), aperture_mean_std=(0.8, 0.12),
        tilt_mean_std=(-1.0, 3.5),
        gaze_kind="screen", gaze_mean=(-5.0, 0.0), gaze_std=(0.0, 0.0),
        gaze_limit=(12.0, 18.0), head_std=(5.0, 7.0), head_limit=(15.0, 20.0),
        light_intensity=(0.6, 0.9), ambient=(0.25, 0.4), coloured_light_prob=0.2,
        light_colour_std=0.08, light_dir_std=20.0, side_shadow=(0.0, 0.3),
        blur_sigma=(0.6, 1.6), resolution_scale=(0.35, 0.55), noise_std=(2.0, 5.0),
        jpeg_quality=(65, 85), scale_jitter=0.06, shift_jitter=2.0,
    ),
}
DOMAINS["mixed"] = DomainSpec(
    **{**{f.name: getattr(DOMAINS["broad-e"], f.name) for f in fields(DomainSpec)},
       "name": "mixed", "description": "demo mix: broad appearance, moderate capture noise",
       "subject_offset": 400_000, "n_subjects": 40, "glasses_prob": 0.25,
       "skin_tone_beta": (1.5, 1.5), "coloured_light_prob": 0.2, "blur_sigma": (0.0, 1.0),
       "resolution_scale": (0.6, 1.0), "noise_std": (1.0, 4.0)},
)
_DOMAIN_CODE = {name: i + 1 for i, name in enumerate(DOMAINS)}


def get_domain(domain: str | DomainSpec) -> DomainSpec:
    """Look up a domain by name (ConfigError naming the choices if unknown)."""
    if isinstance(domain, DomainSpec):
        return domain
    require_choice("domain", domain, list(DOMAINS))
    return DOMAINS[domain]


def _subject(spec: DomainSpec, rng: np.random.Generator, subject_id: int) -> SubjectTraits:
    tone = float(rng.beta(*spec.skin_tone_beta))
    families = list(spec.iris_probs)
    p = np.array([spec.iris_probs[f] for f in families])
    family = families[int(rng.choice(len(families), p=p / p.sum()))]
    iris = np.clip(np.array(IRIS_FAMILIES[family]) * rng.uniform(0.8, 1.2, 3), 0.02, 0.95)
    glasses = bool(rng.random() < spec.glasses_prob)
    power = float(rng.uniform(*spec.lens_power_range)) if glasses else 0.0
    frame = rng.choice([0.05, 0.25, 0.55, 0.8]) * rng.uniform(0.7, 1.3, 3)
    hair_dark = rng.uniform(0.03, 0.35) * (1.0 - 0.6 * tone)
    hair = np.clip(hair_dark * np.array([1.0, 0.8, 0.6]) * rng.uniform(0.8, 1.2, 3), 0.01, 0.6)
    ap_mean, ap_std = spec.aperture_mean_std
    tilt_mean, tilt_std = spec.tilt_mean_std
    return SubjectTraits(
        subject_id=subject_id,
        skin_tone=tone,
        skin_rgb=tuple(float(c) for c in skin_rgb(tone) * rng.uniform(0.95, 1.05, 3)),
        iris_family=family,
        iris_rgb=tuple(float(c) for c in iris),
        aperture=float(np.clip(rng.normal(ap_mean, ap_std), 0.5, 1.5)),
        canthal_tilt_deg=float(np.clip(rng.normal(tilt_mean, tilt_std), -8.0, 14.0)),
        eye_size=float(rng.uniform(0.92, 1.08)),
        iris_size=float(rng.uniform(0.46, 0.54)),
        kappa=(float(np.radians(rng.normal(0.0, 1.0))),
               float(np.radians(rng.normal(2.0, 1.0)))),
        glasses=glasses,
        lens_power=power,
        frame_rgb=tuple(float(c) for c in np.clip(frame, 0.0, 1.0)),
        brow_height=float(rng.uniform(1.25, 1.6)),
        brow_thickness=float(rng.uniform(0.18, 0.4)),
        brow_arch=float(rng.uniform(0.0, 0.35)),
        hair_rgb=tuple(float(c) for c in hair),
        lash_density=float(rng.uniform(0.3, 1.0)),
        texture_seed=int(rng.integers(0, 2**31 - 1)),
    )


def sample_subjects(domain: str | DomainSpec, n: int, seed: int) -> list[SubjectTraits]:
    """``n`` subjects of a domain; subject i depends only on (domain, seed, i).

    Ids are ``domain.subject_offset + i``, so different domains never share an id.
    """
    require_positive("n_subjects", n)
    spec = get_domain(domain)
    code = _DOMAIN_CODE.get(spec.name, 99)
    return [_subject(spec, np.random.default_rng([seed, code, 0, i]), spec.subject_offset + i)
            for i in range(n)]


def sample_gaze_head(spec: DomainSpec, n: int, rng: np.random.Generator
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Gaze (visual axis) and head pose (n, 2) pitch-yaw in radians, drawn from a domain."""
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


def domain_table() -> list[dict]:
    """One row per domain with its main parameters (for docs and reports)."""
    rows = []
    for spec in DOMAINS.values():
        d = asdict(spec)
        rows.append({k: d[k] for k in ("name", "n_subjects", "skin_tone_beta", "glasses_prob",
                                       "tilt_mean_std", "gaze_kind", "gaze_std", "gaze_limit",
                                       "head_std", "light_intensity", "coloured_light_prob",
                                       "blur_sigma", "resolution_scale", "noise_std",
                                       "jpeg_quality")})
    return rows


def domain_statistics(domain: str, n_subjects: int = 2000, n_images: int = 20000,
                      seed: int = 0) -> dict:
    """Sampled shares of appearances and spreads of labels of a domain (for the docs table)."""
    spec = get_domain(domain)
    subjects = sample_subjects(spec, n_subjects, seed)
    gaze, head = sample_gaze_head(spec, n_images, np.random.default_rng([seed, 3]))
    g, h = np.degrees(gaze), np.degrees(head)
    share = lambda f: float(np.mean([f(s) for s in subjects]))  # noqa: E731
    return {
        "domain": spec.name,
        "glasses": share(lambda s: s.glasses),
        "dark_skin(tone>0.7)": share(lambda s: s.skin_tone > 0.7),
        "light_iris(blue/grey/green)": share(lambda s: s.iris_family in ("blue", "grey", "green")),
        "tilt>6deg": share(lambda s: s.canthal_tilt_deg > 6),
        "small_aperture(<0.85)": share(lambda s: s.aperture < 0.85),
        "gaze_pitch_mean": float(g[:, 0].mean()), "gaze_pitch_std": float(g[:, 0].std()),
        "gaze_yaw_std": float(g[:, 1].std()), "head_yaw_std": float(h[:, 1].std()),
    }


def domain_markdown() -> str:
    """Markdown tables of the domains' parameters and sampled statistics."""
    from genlab.core.report import markdown_table

    rows = domain_table()
    for r in rows:
        for k, v in r.items():
            if isinstance(v, (tuple, list)):
                r[k] = "/".join(f"{x:g}" for x in v)
    stats = [domain_statistics(d) for d in DOMAINS]
    return markdown_table(rows, digits=2) + "\n" + markdown_table(stats, digits=2)
