"""The appearance-routing world and the two negative-control worlds (ours, synthetic).

In the *appearance* world four visible eye clusters (iris colour, lid aperture and
lashes, canthal tilt and eye size together) each have their own kappa and
iris-displacement gain (see :mod:`genlab.gaze.synth.traits`), so part of the
image-to-gaze mapping depends on how the eye looks. Sources and targets share capture
conditions and gaze range; only the clusters' proportions and the people differ:

    domain   clusters 0/1/2/3          role
    app-e    0.55/0.25/0.15/0.05       source (like ETH-XGaze: many subjects)
    app-g    0.25/0.55/0.05/0.15       source (like Gaze360)
    app-m    0.10/0.20/0.30/0.40       target
    app-d    0.20/0.10/0.40/0.30       target

The *anatomy* world (ana-e, ana-g -> ana-m, ana-d, the same proportions) keeps the
appearance world's clusters, kappas and gains and adds three facts about real eyes that
make a cluster change *how* the image maps to gaze, not only by how much
(:data:`ANATOMY_CLUSTERS`): each cluster's own range of iris sizes (the iris centre moves
by ``sqrt(1 - s^2)`` per unit of rotation and a large iris hides more under the lids),
how far the upper lid follows the eye's vertical rotation (a lid that follows strongly
covers the iris and shifts its visible centre), and a kappa that depends on eye shape
(kappa changes with canthal tilt, with opposite slopes in clusters 1 and 2).

The *control* world has one source ``ctrl-s`` without clusters (appearance does not
change the mapping) and two targets that shift one thing only: ``ctrl-label`` the gaze
distribution (lower and narrower, like a laptop), ``ctrl-capture`` the capture (low
resolution, blur, dim coloured light, noise, JPEG). Routing by appearance has nothing
to exploit there: MoEGaze should gain about nothing.
"""

from __future__ import annotations

from dataclasses import replace

from genlab.gaze.synth.traits import ClusterSpec, DomainSpec

CLUSTERS: tuple[ClusterSpec, ...] = (
    ClusterSpec("brown-almond", "brown", aperture_mean_std=(1.05, 0.06),
                tilt_mean_std=(2.0, 1.5), eye_size_range=(0.97, 1.03),
                lash_density_range=(0.4, 0.7), kappa_deg=(0.0, 0.0), iris_gain=1.0),
    ClusterSpec("blue-hooded", "blue", aperture_mean_std=(0.72, 0.05),
                tilt_mean_std=(-4.0, 1.5), eye_size_range=(0.92, 0.98),
                lash_density_range=(0.8, 1.0), kappa_deg=(3.0, -5.0), iris_gain=0.8),
    ClusterSpec("green-upturned", "green", aperture_mean_std=(0.95, 0.06),
                tilt_mean_std=(10.0, 1.5), eye_size_range=(1.0, 1.06),
                lash_density_range=(0.3, 0.5), kappa_deg=(-3.0, 5.0), iris_gain=1.2),
    ClusterSpec("grey-round", "grey", aperture_mean_std=(1.35, 0.06),
                tilt_mean_std=(0.0, 1.5), eye_size_range=(1.04, 1.1),
                lash_density_range=(0.5, 0.8), kappa_deg=(4.0, 7.0), iris_gain=1.35),
)

# The anatomy world's clusters: the appearance world's looks, kappas and gains, with a
# wider spread of canthal tilt (what kappa depends on), each cluster's iris sizes, how far
# its upper lid follows the eye's pitch, and kappa per degree of tilt (pitch, yaw).
_ANATOMY = {
    "brown-almond": dict(iris_size_range=(0.46, 0.54), lid_follow=0.7,
                         kappa_tilt_slope=(0.0, 0.0)),
    "blue-hooded": dict(iris_size_range=(0.56, 0.60), lid_follow=1.3,
                        kappa_tilt_slope=(0.0, -1.0)),
    "green-upturned": dict(iris_size_range=(0.40, 0.44), lid_follow=0.3,
                           kappa_tilt_slope=(0.0, 1.0)),
    "grey-round": dict(iris_size_range=(0.50, 0.54), lid_follow=1.0,
                       kappa_tilt_slope=(0.8, -0.8)),
}
ANATOMY_TILT_STD = 3.0
ANATOMY_CLUSTERS: tuple[ClusterSpec, ...] = tuple(
    replace(c, tilt_mean_std=(c.tilt_mean_std[0], ANATOMY_TILT_STD), **_ANATOMY[c.name])
    for c in CLUSTERS)

_BROAD_IRIS = {"dark-brown": 0.35, "brown": 0.30, "hazel": 0.12, "green": 0.08, "blue": 0.12,
               "grey": 0.03}

# Shared capture and gaze of the appearance and control worlds (studio-like, broad gaze).
_BASE = DomainSpec(
    name="app-base", description="", subject_offset=0, n_subjects=80,
    skin_tone_beta=(2.0, 2.0), iris_probs=_BROAD_IRIS, glasses_prob=0.0,
    lens_power_range=(0.0, 0.0), aperture_mean_std=(1.0, 0.15), tilt_mean_std=(2.0, 3.0),
    gaze_kind="normal", gaze_mean=(0.0, 0.0), gaze_std=(15.0, 20.0), gaze_limit=(35.0, 45.0),
    head_std=(8.0, 12.0), head_limit=(20.0, 30.0),
    light_intensity=(0.8, 1.0), ambient=(0.35, 0.45), coloured_light_prob=0.05,
    light_colour_std=0.04, light_dir_std=15.0, side_shadow=(0.0, 0.15),
    blur_sigma=(0.0, 0.5), resolution_scale=(0.9, 1.0), noise_std=(0.5, 2.0),
    jpeg_quality=(88, 97), scale_jitter=0.05, shift_jitter=1.5,
)


def _app(name: str, offset: int, n: int, probs: tuple[float, ...], role: str,
         clusters: tuple[ClusterSpec, ...] = CLUSTERS, world: str = "appearance") -> DomainSpec:
    return replace(_BASE, name=name, subject_offset=offset, n_subjects=n, clusters=clusters,
                   cluster_probs=probs,
                   description=f"{world} world {role}: clusters mixed "
                               + "/".join(f"{p:g}" for p in probs))


# (role, subjects, cluster proportions) of the clustered worlds' domains by suffix
_ROLES = {"e": ("source", 80, (0.55, 0.25, 0.15, 0.05)),
          "g": ("source", 60, (0.25, 0.55, 0.05, 0.15)),
          "m": ("target", 20, (0.10, 0.20, 0.30, 0.40)),
          "d": ("target", 20, (0.20, 0.10, 0.40, 0.30))}

APPEARANCE_DOMAINS = tuple(
    _app(f"app-{k}", 500_000 + 100_000 * i, n, probs, role)
    for i, (k, (role, n, probs)) in enumerate(_ROLES.items()))

ANATOMY_DOMAINS = tuple(
    _app(f"ana-{k}", 1_200_000 + 100_000 * i, n, probs, role, ANATOMY_CLUSTERS, "anatomy")
    for i, (k, (role, n, probs)) in enumerate(_ROLES.items()))

CONTROL_DOMAINS = (
    replace(_BASE, name="ctrl-s", subject_offset=900_000, n_subjects=80,
            description="control source: broad appearance without clusters"),
    replace(_BASE, name="ctrl-label", subject_offset=1_000_000, n_subjects=20,
            description="label-shift-only target: gaze lower and narrower, all else as ctrl-s",
            gaze_mean=(-8.0, 0.0), gaze_std=(7.0, 11.0), gaze_limit=(25.0, 25.0)),
    replace(_BASE, name="ctrl-capture", subject_offset=1_100_000, n_subjects=20,
            description="capture-shift-only target: low resolution, blur, dim coloured "
                        "light, noise; appearance and gaze as ctrl-s",
            light_intensity=(0.35, 0.9), ambient=(0.15, 0.4), coloured_light_prob=0.5,
            light_colour_std=0.15, light_dir_std=35.0, side_shadow=(0.1, 0.5),
            blur_sigma=(0.4, 1.2), resolution_scale=(0.45, 0.7), noise_std=(2.0, 6.0),
            jpeg_quality=(65, 85)),
)
