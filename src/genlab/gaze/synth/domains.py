"""The registry of synthetic gaze domains (our reconstruction, see docs/gaze_data.md).

Traits, clusters and the DomainSpec type are in :mod:`genlab.gaze.synth.traits`.
The *realistic* world defined here mirrors the four cross-domain tasks of MoEGaze
(E->M, E->D, G->M, G->D) with two broad source domains ("broad-e", "broad-g") and two
narrow target domains ("narrow-m", "narrow-d") that differ in appearance mix *and* in
capture and gaze range. The appearance-routing world and the control world
(:mod:`genlab.gaze.synth.worlds`) are registered here too.
"""

from __future__ import annotations

from dataclasses import asdict, fields

import numpy as np

from genlab.core.errors import require_positive
from genlab.core.registry import Registry
from genlab.gaze.synth.traits import (
    APPEARANCE_NAMES,
    IRIS_FAMILIES,
    NO_CLUSTER,
    ClusterSpec,
    DomainSpec,
    SubjectTraits,
    cluster_quotas,
    draw_subject,
    sample_gaze_head,
    skin_rgb,
)
from genlab.gaze.synth.worlds import (
    ANATOMY_DOMAINS,
    APPEARANCE_DOMAINS,
    CLUSTERS,
    CONTROL_DOMAINS,
)

__all__ = [
    "APPEARANCE_NAMES", "CLUSTERS", "DOMAINS", "IRIS_FAMILIES", "ClusterSpec", "DomainSpec",
    "SubjectTraits", "domain_markdown", "domain_statistics", "domain_table", "get_domain",
    "sample_gaze_head", "sample_subjects", "skin_rgb",
]

_IRIS_BROAD = {"dark-brown": 0.35, "brown": 0.30, "hazel": 0.12, "green": 0.08, "blue": 0.12,
               "grey": 0.03}

_BASE_DOMAINS = (
    DomainSpec(
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
    DomainSpec(
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
    DomainSpec(
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
    DomainSpec(
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
)
DOMAINS: Registry[DomainSpec] = Registry("domain")
for _spec in _BASE_DOMAINS:
    DOMAINS.register(_spec.name, _spec)
DOMAINS.register("mixed", DomainSpec(
    **{**{f.name: getattr(DOMAINS.get("broad-e"), f.name) for f in fields(DomainSpec)},
       "name": "mixed", "description": "demo mix: broad appearance, moderate capture noise",
       "subject_offset": 400_000, "n_subjects": 40, "glasses_prob": 0.25,
       "skin_tone_beta": (1.5, 1.5), "coloured_light_prob": 0.2, "blur_sigma": (0.0, 1.0),
       "resolution_scale": (0.6, 1.0), "noise_std": (1.0, 4.0)},
))
for _spec in (*APPEARANCE_DOMAINS, *CONTROL_DOMAINS, *ANATOMY_DOMAINS):  # appended: earlier
    DOMAINS.register(_spec.name, _spec)  # domains keep their seed codes


def get_domain(domain: str | DomainSpec) -> DomainSpec:
    """Look up a domain by name (ConfigError naming the choices if unknown)."""
    if isinstance(domain, DomainSpec):
        return domain
    return DOMAINS.get(domain)


def domain_code(name: str) -> int:
    """A registered domain's seed code: its place in registration order, from 1 (99 if
    unregistered); subjects' random streams are seeded by it."""
    names = DOMAINS.names()
    return names.index(name) + 1 if name in names else 99


def sample_subjects(domain: str | DomainSpec, n: int, seed: int) -> list[SubjectTraits]:
    """``n`` subjects of a domain; subject i's traits depend only on (domain, seed, i).

    In a clustered domain, which subject belongs to which cluster depends on (domain,
    seed, n): the clusters are shared out in their stated proportions. Ids are
    ``domain.subject_offset + i``, so different domains never share an id.
    """
    require_positive("n_subjects", n)
    spec = get_domain(domain)
    code = domain_code(spec.name)
    clusters = (cluster_quotas(spec.cluster_probs, n, np.random.default_rng([seed, code, 1]))
                if spec.clusters else np.full(n, NO_CLUSTER))
    return [draw_subject(spec, np.random.default_rng([seed, code, 0, i]),
                         spec.subject_offset + i, int(clusters[i]))
            for i in range(n)]


def domain_table() -> list[dict]:
    """One row per domain with its main parameters (for docs and reports)."""
    rows = []
    for _, spec in DOMAINS.items():
        d = asdict(spec)
        rows.append({k: d[k] for k in ("name", "n_subjects", "skin_tone_beta", "glasses_prob",
                                       "tilt_mean_std", "gaze_kind", "gaze_std", "gaze_limit",
                                       "head_std", "light_intensity", "coloured_light_prob",
                                       "blur_sigma", "resolution_scale", "noise_std",
                                       "jpeg_quality")})
        rows[-1]["cluster_probs"] = d["cluster_probs"] or "-"
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
        "kappa_yaw_std": float(np.std([np.degrees(s.kappa[1]) for s in subjects])),
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
