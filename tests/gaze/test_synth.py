"""Renderer: determinism, shapes, geometry self-check, domains, glasses and arrows."""

import json
from dataclasses import replace

import numpy as np
import pytest

from genlab.core.errors import ConfigError, RunExistsError
from genlab.gaze.draw import draw_gaze_arrows
from genlab.gaze.synth.dataset import (
    APPEARANCE_NAMES,
    DOMAINS,
    _iris_centroids,
    iris_centre_check,
    render_domain,
    render_eyes,
    render_to_folder,
    sample_subjects,
)
from genlab.gaze.synth.domains import sample_gaze_head
from genlab.gaze.synth.render import CLEAN

CROSS = ("broad-e", "broad-g", "narrow-m", "narrow-d")


def test_render_domain_shapes_and_dtypes():
    b = render_domain("broad-e", 12, seed=0, size=(32, 48))
    assert b.images.shape == (12, 32, 48, 3) and b.images.dtype == np.uint8
    assert b.gaze.shape == (12, 2) and b.gaze.dtype == np.float32
    assert b.head_pose.shape == (12, 2) and b.subject.shape == (12,)
    assert b.appearance.shape == (12, len(APPEARANCE_NAMES)) and b.appearance.dtype == np.float32
    assert b.images.std() > 10  # not a blank image


def test_render_is_deterministic_by_seed():
    a = render_domain("narrow-m", 10, seed=3)
    b = render_domain("narrow-m", 10, seed=3)
    c = render_domain("narrow-m", 10, seed=4)
    np.testing.assert_array_equal(a.images, b.images)
    np.testing.assert_array_equal(a.gaze, b.gaze)
    assert not np.array_equal(a.images, c.images)


def test_render_is_independent_of_thread_count():
    s = sample_subjects("broad-g", 3, 0)
    rng = np.random.default_rng(5)
    gaze, head = sample_gaze_head(DOMAINS["broad-g"], 20, rng)
    traits = [s[i % 3] for i in range(20)]
    one = render_eyes(gaze, traits, head, np.random.default_rng(1), conditions=DOMAINS["broad-g"],
                      workers=1)
    two = render_eyes(gaze, traits, head, np.random.default_rng(1), conditions=DOMAINS["broad-g"],
                      workers=2)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("size", [(64, 96), (32, 48)])
def test_iris_centre_follows_geometry(size):
    r = iris_centre_check(size)
    for axis in ("yaw", "pitch"):
        assert abs(r[axis]["slope_ratio"] - 1.0) < 0.05, r[axis]
        assert r[axis]["correlation"] > 0.998, r[axis]
        assert r[axis]["max_residual_px"] < 0.5, r[axis]


def test_positive_yaw_moves_iris_to_image_left_and_up_pitch_moves_it_up():
    s = replace(sample_subjects("broad-e", 1, 0)[0], iris_rgb=(0.1, 0.25, 0.95), aperture=1.5,
                glasses=False, kappa=(0.0, 0.0))
    gaze = np.radians([[0.0, -15.0], [0.0, 15.0], [15.0, 0.0], [-15.0, 0.0]]).astype(np.float32)
    imgs = render_eyes(gaze, [s] * 4, np.zeros_like(gaze), np.random.default_rng(0),
                       conditions=CLEAN)
    c = _iris_centroids(imgs)
    assert c[1, 0] < c[0, 0] - 3  # +yaw: iris further left (camera's left)
    assert c[2, 1] < c[3, 1] - 3  # +pitch (up): iris higher (smaller y)


def test_kappa_offsets_iris_from_visual_axis():
    s = replace(sample_subjects("broad-e", 1, 0)[0], iris_rgb=(0.1, 0.25, 0.95), aperture=1.5,
                glasses=False, kappa=(0.0, 0.0))
    k = replace(s, kappa=(0.0, float(np.radians(5.0))))
    g = np.zeros((1, 2), np.float32)
    imgs = render_eyes(np.repeat(g, 2, 0), [s, k], np.zeros((2, 2), np.float32),
                       np.random.default_rng(0), conditions=CLEAN)
    c = _iris_centroids(imgs)
    # optical = visual - kappa: yaw -5 deg moves the iris to the image right
    assert c[1, 0] > c[0, 0] + 0.8


def test_glasses_magnify_iris_displacement():
    s = replace(sample_subjects("broad-e", 1, 0)[0], iris_rgb=(0.1, 0.25, 0.95), aperture=1.5,
                glasses=True, frame_rgb=(0.0, 0.0, 0.0), kappa=(0.0, 0.0))
    plus, minus = replace(s, lens_power=8.0), replace(s, lens_power=-8.0)
    gaze = np.radians([[0.0, -20.0], [0.0, 20.0]] * 2).astype(np.float32)
    imgs = render_eyes(gaze, [plus, plus, minus, minus], np.zeros_like(gaze),
                       np.random.default_rng(0), conditions=CLEAN)
    c = _iris_centroids(imgs)
    assert abs(c[0, 0] - c[1, 0]) > 1.15 * abs(c[2, 0] - c[3, 0])


def test_looking_down_lowers_upper_lid():
    s = replace(sample_subjects("broad-e", 1, 0)[0], glasses=False)
    gaze = np.radians([[20.0, 0.0], [-20.0, 0.0]]).astype(np.float32)
    imgs = render_eyes(gaze, [s, s], np.zeros_like(gaze), np.random.default_rng(0),
                       conditions=CLEAN).astype(np.float32)
    # sclera is bright and unsaturated; count such pixels: the open eye area
    bright = (imgs.min(-1) > 150) & (imgs.max(-1) - imgs.min(-1) < 40)
    assert bright[0].sum() > 1.2 * bright[1].sum()


def test_domains_exist_differ_and_have_disjoint_subjects():
    for name in (*CROSS, "mixed"):
        assert name in DOMAINS
    ids = {d: {s.subject_id for s in sample_subjects(d, 30, 0)} for d in CROSS}
    for i, a in enumerate(CROSS):
        for b in CROSS[i + 1:]:
            assert not ids[a] & ids[b]
    means = {d: render_domain(d, 24, seed=1).images.mean(axis=(0, 1, 2)) for d in CROSS}
    for i, a in enumerate(CROSS):
        for b in CROSS[i + 1:]:
            assert np.abs(means[a] - means[b]).max() > 1.0, (a, b)


def test_targets_hold_appearances_rare_not_absent_in_sources():
    subj = {d: sample_subjects(d, 600, 0) for d in CROSS}
    frac = lambda d, f: np.mean([f(s) for s in subj[d]])  # noqa: E731
    glasses = lambda s: s.glasses  # noqa: E731
    dark = lambda s: s.skin_tone > 0.7  # noqa: E731
    for src in ("broad-e", "broad-g"):
        assert 0.0 < frac(src, glasses) < frac("narrow-m", glasses)
        assert 0.0 < frac(src, dark) < frac("narrow-m", dark)
        assert 0.0 < frac(src, glasses) < frac("narrow-d", glasses)
    rng = np.random.default_rng(0)
    spread = {d: np.degrees(sample_gaze_head(DOMAINS[d], 4000, rng)[0]).std(0) for d in CROSS}
    assert spread["broad-g"][1] > spread["broad-e"][1] > spread["narrow-m"][1]
    assert spread["broad-e"][1] > spread["narrow-d"][1]


def test_bad_inputs_raise_config_error():
    s = sample_subjects("broad-e", 2, 0)
    with pytest.raises(ConfigError):
        render_eyes(np.zeros((3, 2)), s, np.zeros((3, 2)), np.random.default_rng(0))
    with pytest.raises(ConfigError):
        render_domain("nope", 4, 0)
    with pytest.raises(ConfigError):
        render_domain("broad-e", 0, 0)


def test_draw_gaze_arrows_points_along_gaze():
    imgs = np.zeros((2, 32, 48, 3), np.uint8)
    gaze = np.radians([[0.0, 40.0], [-40.0, 0.0]])  # left; down
    grid = draw_gaze_arrows(imgs, gaze, ncols=2, upscale=1)
    assert grid.shape == (34, 100, 3)
    for k, (dx, dy) in enumerate([(-1, 0), (0, 1)]):
        tile = grid[:32, k * 50:k * 50 + 48].astype(int)
        green = np.argwhere((tile[..., 1] > 150) & (tile[..., 0] < 80))
        centre = green.mean(0)  # (row, col)
        assert np.sign(round(centre[1] - 24, 0)) == dx or dx == 0
        assert np.sign(round(centre[0] - 16, 0)) == dy or dy == 0
        if dx:
            assert (centre[1] - 24) * dx > 3
        if dy:
            assert (centre[0] - 16) * dy > 3


def test_render_to_folder_writes_h5_grid_summary_and_refuses_overwrite(tmp_path):
    out = tmp_path / "run"
    summary = render_to_folder(20, "narrow-d", 0, out, size=(32, 48))
    assert summary["count"] == 20
    assert (out / "samples.png").is_file() and (out / "config.json").is_file()
    assert json.loads((out / "summary.json").read_text())["domain"] == "narrow-d"
    assert len(list(out.glob("subject*.h5"))) == summary["subjects"]
    with pytest.raises(RunExistsError):
        render_to_folder(20, "narrow-d", 0, out, size=(32, 48))
    for bad in ({"count": 0}, {"domain": "nope"}, {"size": (4, 48)}):
        args = {"count": 5, "domain": "narrow-d", "size": (32, 48), **bad}
        with pytest.raises(ConfigError):
            render_to_folder(args["count"], args["domain"], 0, tmp_path / "bad", args["size"])
        assert not (tmp_path / "bad").exists()  # nothing written on bad options


# ----------------------------------------------------------------------------- worlds


def test_cluster_quotas_follow_the_stated_proportions():
    from collections import Counter

    from genlab.gaze.synth.worlds import CLUSTERS

    for domain, n, want in (("app-m", 20, [2, 4, 6, 8]), ("app-e", 80, [44, 20, 12, 4]),
                            ("app-d", 20, [4, 2, 8, 6])):
        subjects = sample_subjects(domain, n, 0)
        counts = Counter(s.cluster for s in subjects)
        assert [counts[k] for k in range(4)] == want, domain
        for s in subjects:
            c = CLUSTERS[s.cluster]
            assert s.iris_family == c.iris_family and s.iris_gain == c.iris_gain
            assert abs(np.degrees(s.kappa[1]) - c.kappa_deg[1]) < 2.5  # 0.5 deg spread
    assert {s.cluster for s in sample_subjects("broad-e", 10, 0)} == {-1}
    batch = render_domain("app-m", 40, seed=0, size=(16, 24))
    by_subject = {s.subject_id: s.cluster for s in sample_subjects("app-m", 20, 0)}
    assert batch.cluster.tolist() == [by_subject[i] for i in batch.subject.tolist()]


def test_iris_gain_scales_the_iris_displacement():
    s = replace(sample_subjects("broad-e", 1, 0)[0], iris_rgb=(0.1, 0.25, 0.95), aperture=1.5,
                glasses=False, kappa=(0.0, 0.0))
    fast = replace(s, iris_gain=1.35)
    gaze = np.radians([[0.0, -15.0], [0.0, 15.0]] * 2).astype(np.float32)
    imgs = render_eyes(gaze, [s, s, fast, fast], np.zeros_like(gaze), np.random.default_rng(0),
                       conditions=CLEAN)
    c = _iris_centroids(imgs)
    ratio = abs(c[2, 0] - c[3, 0]) / abs(c[0, 0] - c[1, 0])
    assert ratio == pytest.approx(np.sin(np.radians(1.35 * 15)) / np.sin(np.radians(15)),
                                  rel=0.05)


def _differing_fields(a, b):
    from dataclasses import asdict

    da, db = asdict(DOMAINS[a]), asdict(DOMAINS[b])
    return {k for k in da if da[k] != db[k]} - {"name", "description", "subject_offset",
                                                 "n_subjects"}


def test_worlds_shift_only_what_they_say():
    for a, b in (("app-e", "app-m"), ("app-e", "app-g"), ("app-g", "app-d")):
        assert _differing_fields(a, b) == {"cluster_probs"}  # same capture and gaze range
    assert _differing_fields("ctrl-s", "ctrl-label") == {"gaze_mean", "gaze_std", "gaze_limit"}
    capture = _differing_fields("ctrl-s", "ctrl-capture")
    assert capture and capture <= {"light_intensity", "ambient", "coloured_light_prob",
                                   "light_colour_std", "light_dir_std", "side_shadow",
                                   "blur_sigma", "resolution_scale", "noise_std",
                                   "jpeg_quality"}
    assert not DOMAINS["ctrl-s"].clusters and len(DOMAINS["app-m"].clusters) == 4
    for a, b in (("ana-e", "ana-m"), ("ana-e", "ana-g"), ("ana-g", "ana-d")):
        assert _differing_fields(a, b) == {"cluster_probs"}
    for k in "egmd":  # the anatomy world is the appearance world with other clusters
        assert _differing_fields(f"app-{k}", f"ana-{k}") == {"clusters"}


def _anatomy_subject(cluster: int, **changes):
    """The first ana-e subject of ``cluster`` with a pure blue iris (for the colour mask)."""
    s = next(s for s in sample_subjects("ana-e", 80, 0) if s.cluster == cluster)
    return replace(s, iris_rgb=(0.1, 0.25, 0.95), glasses=False, lash_density=0.3, **changes)


def _predicted_iris_centre(s, gaze_deg, size=(64, 96)):
    """Hand-computed projected iris centre (x, y) in pixels: the optical axis
    gaze - kappa + (gain - 1) * gaze (frontal head), its unit vector
    (-cos p sin y, -sin p, -cos p cos y), displaced rho * sqrt(1 - s^2) from the eyeball
    centre (W / 2, 0.6 H); rho = 0.19 W eye_size."""
    H, W = size
    p, y = (np.radians(gaze_deg[i]) - s.kappa[i] + (s.iris_gain - 1) * np.radians(gaze_deg[i])
            for i in (0, 1))
    rho = 0.19 * W * s.eye_size
    d = rho * np.sqrt(1 - s.iris_size ** 2)
    return np.array([W / 2 + d * (-np.cos(p) * np.sin(y)), 0.6 * H + d * (-np.sin(p))])


def test_anatomy_world_same_gaze_gives_each_cluster_its_hand_computed_iris_centre():
    # clusters 1 and 2 differ in kappa (their tilt-dependent part included), gain and iris
    # size; the same gaze puts their visible iris centres where the geometry says
    subjects = [_anatomy_subject(1, aperture=1.5), _anatomy_subject(2, aperture=1.5)]
    assert subjects[0].iris_size > 0.55 > 0.45 > subjects[1].iris_size
    for gaze_deg in ((0.0, 20.0), (10.0, -20.0), (-10.0, 0.0)):
        gaze = np.radians([gaze_deg, gaze_deg]).astype(np.float32)
        imgs = render_eyes(gaze, subjects, np.zeros_like(gaze), np.random.default_rng(0),
                           conditions=CLEAN)
        measured = _iris_centroids(imgs)
        want = np.stack([_predicted_iris_centre(s, gaze_deg) for s in subjects])
        offset = want[1] - want[0]
        assert np.abs(offset).max() > 1.5  # the mappings differ by pixels, not by noise
        np.testing.assert_allclose(measured[1] - measured[0], offset, atol=0.35)


def test_anatomy_world_kappa_follows_eye_shape_and_iris_size_and_lid_follow_the_cluster():
    from genlab.gaze.synth.worlds import ANATOMY_CLUSTERS

    subjects = sample_subjects("ana-e", 80, 0)
    tilt = {k: [] for k in range(4)}
    for s in subjects:
        c = ANATOMY_CLUSTERS[s.cluster]
        lo, hi = c.iris_size_range
        assert lo <= s.iris_size <= hi and s.lid_follow == c.lid_follow
        want = np.asarray(c.kappa_deg) + np.asarray(c.kappa_tilt_slope) * (
            s.canthal_tilt_deg - c.tilt_mean_std[0])
        assert np.abs(np.degrees(s.kappa) - want).max() < 2.5  # the 0.5-degree spread only
        tilt[s.cluster].append((s.canthal_tilt_deg, np.degrees(s.kappa[1])))
    r1 = np.corrcoef(np.array(tilt[1]).T)[0, 1]
    r2 = np.corrcoef(np.array(tilt[2]).T)[0, 1]
    assert r1 < -0.8 and r2 > 0.8  # opposite slopes: the same look, opposite offsets
    # the appearance world's clusters have neither (its subjects render as before)
    assert {s.lid_follow for s in sample_subjects("app-e", 80, 0)} == {0.7}


def test_anatomy_world_strong_lid_follow_covers_the_iris_and_shifts_its_visible_centre():
    hooded = _anatomy_subject(1)  # lid follows the eye's pitch by 1.3, aperture ~0.72
    wide = replace(hooded, aperture=1.5, lid_follow=0.7)
    gaze = np.radians([[-12.0, 0.0], [-12.0, 0.0]]).astype(np.float32)
    imgs = render_eyes(gaze, [hooded, wide], np.zeros_like(gaze), np.random.default_rng(0),
                       conditions=CLEAN)
    measured = _iris_centroids(imgs)
    want = _predicted_iris_centre(hooded, (-12.0, 0.0))
    assert abs(measured[1, 1] - want[1]) < 0.35  # the open eye shows the iris where it is
    # the lids cover part of the iris (more of it than the open eye's) and move its visible
    # centre away from the geometric one
    assert abs(measured[0, 1] - want[1]) > 1.0
    blue = lambda im: ((im[..., 2].astype(int) > im[..., 0] + 35)  # noqa: E731
                       & (im[..., 2].astype(int) > im[..., 1] + 10)).sum()
    assert blue(imgs[0]) < 0.6 * blue(imgs[1])
