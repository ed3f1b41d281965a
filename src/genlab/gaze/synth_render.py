"""Procedural eye-region renderer: a per-pixel ray-cast eyeball with exact gaze labels.

Our reconstruction (no public renderer is reproduced). Orthographic camera looking
along +z; lengths in eyeball radii ``rho`` (pixels per radius = ``0.19 * W * eye_size``).

* Eyeball: unit sphere at the origin; the visible point under pixel (x, y) is
  ``P = (x, y, -sqrt(1 - x^2 - y^2))`` with normal ``P``; Lambert shading
  ``ambient + intensity * max(0, P.l)`` for the unit direction ``l`` towards the light.
* Optical axis ``o = pitchyaw_to_vector(gaze - kappa)``: the visual axis (the label)
  minus the subject's kappa angle.
* Iris: a flat disk of radius ``s = iris_size`` in the plane ``X.o = sqrt(1 - s^2)``
  (it meets the sphere at the limbus). Its projected centre is therefore at
  ``rho * sqrt(1 - s^2) * (o_x, o_y)`` pixels from the eyeball centre -- the truth the
  self-check :func:`genlab.gaze.synth.iris_centre_check` measures against. Pupil: a
  concentric disk whose size shrinks with light intensity. Corneal refraction is ignored.
* Glint: mirror reflection on the corneal sphere (radius 0.65, centre ``0.45 o``, which
  meets the eyeball at the limbus) at the normal ``h = (l + v)/|l + v|``, ``v = -e_z``.
* Head-attached features (eyelids, brow, glasses) lie on planes at depth ``D`` in front
  of the eyeball centre; head pose (pitch, yaw) shifts them by ``D * f_xy`` (``f`` the
  face's forward vector) and foreshortens them by ``cos(yaw)``, ``cos(pitch)``: a
  parallax cue between eyeball and face.
* Eyelids: parabola-like curves whose opening follows the eye-in-head pitch
  (looking down lowers the upper lid) and the subject's aperture, sheared by the
  canthal tilt; lid margin, crease, lashes and a brow are drawn on shaded skin.
* Glasses: a superelliptic frame; inside the lens, image coordinates are scaled about
  the lens centre by the spectacle magnification ``m = 1 / (1 - 0.015 P)`` (P in
  diopters; 0.015 m = vertex distance plus thickness term, our simplification), so the
  lens changes where the iris appears for a given gaze.
* Capture: light colour/direction/intensity, a side shadow ramp, lower effective
  resolution (area down-sampling then linear up-sampling), Gaussian blur, Gaussian
  sensor noise and JPEG compression (OpenCV).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from genlab.core.errors import ConfigError
from genlab.gaze.geometry import pitchyaw_to_vector
from genlab.gaze.synth_domains import DomainSpec, SubjectTraits

RHO_PER_WIDTH = 0.19  # eyeball radius in pixels per image width
D_LID, D_BROW, D_GLASSES = 0.8, 1.3, 2.2  # depth of head-attached planes (eyeball radii)
CHUNK = 32  # images rendered together (keeps temporaries in cache)

CLEAN = DomainSpec(
    name="clean", description="studio conditions for self-checks: frontal light, no noise",
    subject_offset=900_000, n_subjects=1, skin_tone_beta=(2.0, 2.0), iris_probs={"blue": 1.0},
    glasses_prob=0.0, lens_power_range=(0.0, 0.0), aperture_mean_std=(1.0, 0.0),
    tilt_mean_std=(0.0, 0.0), gaze_kind="normal", gaze_mean=(0.0, 0.0), gaze_std=(0.0, 0.0),
    gaze_limit=(0.0, 0.0), head_std=(0.0, 0.0), head_limit=(0.0, 0.0),
    light_intensity=(0.9, 0.9), ambient=(0.4, 0.4), coloured_light_prob=0.0,
    light_colour_std=0.0, light_dir_std=0.0, side_shadow=(0.0, 0.0), blur_sigma=(0.0, 0.0),
    resolution_scale=(1.0, 1.0), noise_std=(0.0, 0.0), jpeg_quality=(100, 100),
    scale_jitter=0.0, shift_jitter=0.0,
)


def _traits_arrays(traits: Sequence[SubjectTraits]) -> dict[str, np.ndarray]:
    """Per-image trait arrays (N,) or (N, k) gathered from the subjects."""
    get = lambda name: np.array([getattr(t, name) for t in traits], dtype=np.float32)  # noqa: E731
    out = {name: get(name) for name in (
        "skin_rgb", "iris_rgb", "aperture", "canthal_tilt_deg", "eye_size", "iris_size",
        "kappa", "lens_power", "frame_rgb", "brow_height", "brow_thickness", "brow_arch",
        "hair_rgb", "lash_density")}
    out["glasses"] = np.array([t.glasses for t in traits], dtype=bool)
    seeds = np.array([t.texture_seed for t in traits], dtype=np.int64)
    tex_rng = [np.random.default_rng(int(s)) for s in seeds]
    out["tex"] = np.array([r.uniform(0.0, 2 * np.pi, 6) for r in tex_rng], dtype=np.float32)
    out["tex_k"] = np.array([r.integers(14, 40, 2) for r in tex_rng], dtype=np.float32)
    return out


def _capture(spec: DomainSpec, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per-image capture parameters drawn from a domain (all in one fixed order)."""
    u = lambda lo_hi: rng.uniform(lo_hi[0], lo_hi[1], n).astype(np.float32)  # noqa: E731
    cap = {
        "intensity": u(spec.light_intensity),
        "ambient": u(spec.ambient),
        "light_py": np.radians(rng.normal(size=(n, 2)) * spec.light_dir_std
                               + np.array([10.0, 0.0])).astype(np.float32),
        "side": u(spec.side_shadow) * rng.choice([-1.0, 1.0], n).astype(np.float32),
        "blur": u(spec.blur_sigma),
        "res": u(spec.resolution_scale),
        "noise": u(spec.noise_std),
        "jpeg": rng.integers(spec.jpeg_quality[0], spec.jpeg_quality[1] + 1, n),
        "scale": (1.0 + rng.uniform(-1, 1, n) * spec.scale_jitter).astype(np.float32),
        "shift": (rng.uniform(-1, 1, (n, 2)) * spec.shift_jitter).astype(np.float32),
    }
    colour = 1.0 + rng.normal(size=(n, 3)) * spec.light_colour_std
    tints = np.array([[1.15, 0.95, 0.7], [0.75, 0.9, 1.2], [0.85, 1.1, 0.8], [1.1, 0.8, 1.0]])
    coloured = rng.random(n) < spec.coloured_light_prob
    tint = tints[rng.integers(0, len(tints), n)]
    colour = np.where(coloured[:, None], colour * tint, colour)
    cap["light_rgb"] = np.clip(colour, 0.4, 1.6).astype(np.float32)
    return cap


def _smooth_clip(d):
    """Anti-aliased coverage from a signed distance in pixels."""
    return np.clip(d + 0.5, 0.0, 1.0)


def _render_chunk(gaze, head, T, C, H, W, cap_light):
    """Float RGB images (n, H, W, 3) in [0, 1] before the camera effects."""
    n = gaze.shape[0]
    col = lambda a: a.reshape(n, 1, 1)  # noqa: E731
    f32 = np.float32
    rho = col(RHO_PER_WIDTH * W * T["eye_size"] * C["scale"])
    cx = col(W / 2.0 + C["shift"][:, 0])
    cy = col(H * 0.6 + C["shift"][:, 1])
    xs = (np.arange(W, dtype=f32) + 0.5)[None, None, :]
    ys = (np.arange(H, dtype=f32) + 0.5)[None, :, None]
    x0 = (xs - cx) / rho
    y0 = (ys - cy) / rho

    face = pitchyaw_to_vector(head.astype(f32))  # forward vector of the face
    fx, fy = col(face[:, 0]), col(face[:, 1])
    cyaw, cpit = col(np.cos(head[:, 1])), col(np.cos(head[:, 0]))

    # glasses: frame ring (from true coordinates) and lens magnification (remaps x, y)
    ga = (x0 - D_GLASSES * fx) / cyaw - 0.1
    gb = (y0 - D_GLASSES * fy) / cpit + 0.2
    sup = (ga / 1.85) ** 4 + (gb / 1.35) ** 4
    has_g = col(T["glasses"].astype(f32))
    lens = (sup < 1.0) * has_g
    frame_alpha = has_g * _smooth_clip((np.minimum(sup - 1.0, 1.5 - sup)) * rho * 0.25)
    m = col(1.0 / (1.0 - 0.015 * T["lens_power"]))
    lcx, lcy = D_GLASSES * fx + 0.1, D_GLASSES * fy - 0.2
    x = np.where(lens > 0, lcx + (x0 - lcx) / m, x0)
    y = np.where(lens > 0, lcy + (y0 - lcy) / m, y0)

    light = pitchyaw_to_vector(cap_light["light_py"])
    lx, ly, lz = (col(light[:, i]) for i in range(3))
    amb, inten = col(cap_light["ambient"]), col(cap_light["intensity"])

    # ---- eyeball
    s = x * x + y * y
    z = -np.sqrt(np.maximum(1.0 - s, 0.0))
    on_ball = _smooth_clip((1.0 - np.sqrt(s)) * rho)
    ndl = np.maximum(x * lx + y * ly + z * lz, 0.0)
    ball_shade = amb + inten * ndl

    optical = pitchyaw_to_vector((gaze - T["kappa"]).astype(f32))
    ox, oy, oz = (col(optical[:, i]) for i in range(3))
    si = col(T["iris_size"])
    d = np.sqrt(1.0 - si * si)
    zi = (d - x * ox - y * oy) / oz
    qx, qy, qz = x - d * ox, y - d * oy, zi - d * oz
    r = np.sqrt(qx * qx + qy * qy + qz * qz) / si
    # local frame of the iris plane for the texture angle
    e1n = np.sqrt(ox * ox + oz * oz)
    e1x, e1z = -oz / e1n, ox / e1n
    e2x, e2y, e2z = oy * e1z, oz * e1x - ox * e1z, -oy * e1x
    phi = np.arctan2(qx * e2x + qy * e2y + qz * e2z, qx * e1x + qz * e1z)
    tp = T["tex"]
    k1, k2 = col(T["tex_k"][:, 0]), col(T["tex_k"][:, 1])
    tex = (1.0 + 0.22 * np.cos(k1 * phi + col(tp[:, 0]) + 5.0 * r)
           + 0.12 * np.cos(k2 * phi + col(tp[:, 1]) - 3.0 * r))
    collar = 1.0 - 0.25 * np.exp(-((r - 0.45) / 0.08) ** 2)
    limb = 1.0 - 0.65 * np.clip((r - 0.8) / 0.2, 0.0, 1.0) ** 2
    iris_shade = (tex * collar * limb)[..., None]
    iris_rgb = T["iris_rgb"][:, None, None, :] * iris_shade
    inner = np.clip(1.0 - r / 0.5, 0.0, 1.0)[..., None]
    iris_rgb = iris_rgb * (1.0 - 0.3 * inner) + 0.3 * inner * np.array([0.35, 0.25, 0.1], f32)
    iris_px = si * rho
    a_iris = _smooth_clip((1.0 - r) * iris_px)[..., None]
    pupil = col(0.42 - 0.12 * cap_light["intensity"])
    a_pupil = _smooth_clip((pupil - r) * iris_px)[..., None]
    sclera = np.array([0.93, 0.9, 0.86], f32) * (1.0 - 0.3 * s * s)[..., None]
    sclera = sclera + np.array([0.05, -0.04, -0.04], f32) * (s * s)[..., None]
    ball = sclera * (1 - a_iris) + iris_rgb * a_iris
    ball = ball * (1 - a_pupil) + 0.02 * a_pupil
    ball = ball * ball_shade[..., None]

    # glint on the corneal sphere
    hx, hy, hz = lx, ly, lz - 1.0
    hn = np.sqrt(hx * hx + hy * hy + hz * hz)
    gx = 0.45 * ox + 0.65 * hx / hn
    gy = 0.45 * oy + 0.65 * hy / hn
    cos_h = (hx * ox + hy * oy + hz * oz) / hn
    glint_vis = (cos_h > np.cos(np.radians(40.0))).astype(f32)
    gd2 = ((x - gx) ** 2 + (y - gy) ** 2) * rho * rho
    glint = glint_vis * inten * 1.4 * np.exp(-gd2 / (2 * np.maximum(0.045 * rho, 0.6) ** 2))

    # ---- eyelids in head-attached coordinates
    a = (x - D_LID * fx) / cyaw
    b = (y - D_LID * fy) / cpit
    pe = col(gaze[:, 0] - head[:, 0])
    ap = col(T["aperture"])
    hu = np.clip(ap * (0.55 + 0.7 * np.sin(pe)), 0.08, 1.2)
    hl = np.clip(ap * 0.5 * (1.0 - 0.3 * np.sin(pe)), 0.15, 0.9)
    u = a / 1.2
    base = np.clip(1.0 - u * u, 0.0, None)
    bt = b - a * col(np.tan(np.radians(T["canthal_tilt_deg"])))
    yu = -hu * base**0.7 * (1.0 + 0.12 * u)
    yl = hl * base**0.9 * (1.0 - 0.1 * u)
    du = (bt - yu) * rho
    dl = (yl - bt) * rho
    opening = _smooth_clip(np.minimum(du, dl))
    lid_shadow = 1.0 - 0.5 * np.exp(-np.maximum(du, 0.0) / (0.18 * rho))

    caruncle = np.array([0.85, 0.6, 0.6], f32) * T["skin_rgb"][:, None, None, :]
    eye = ball * on_ball[..., None] + caruncle * (1.0 - on_ball[..., None]) * 0.6
    eye = eye * lid_shadow[..., None] + glint[..., None] * opening[..., None]

    # ---- skin, crease, lashes, brow
    nsx, nsy = 0.25 * a, 0.25 * (b + 0.3)
    nsn = np.sqrt(nsx * nsx + nsy * nsy + 1.0)
    skin_shade = amb + inten * np.maximum((nsx * lx + nsy * ly - lz) / nsn, 0.0)
    socket = 1.0 - 0.22 * np.exp(-(a * a / 2.0 + (b + 0.1) ** 2 / 0.7))
    crease_y = -(0.55 * ap + 0.4) * base**0.6
    inside_lids = np.clip(base * 8.0, 0.0, 1.0)  # fades the lid lines out at the canthi
    crease = 1.0 - 0.2 * inside_lids * np.exp(-(((bt - crease_y) * rho) / (0.06 * rho + 0.8)) ** 2)
    skin_tex = 1.0 + 0.05 * np.cos(9.0 * a + col(tp[:, 2])) * np.cos(7.0 * b + col(tp[:, 3]))
    margin = 1.0 - 0.45 * inside_lids * np.exp(-((du + 0.05 * rho) / (0.05 * rho + 0.5)) ** 2)
    lash_band = np.clip(1.0 + (bt - yu) / 0.25, 0.0, 1.0) * (du < 0) * (base > 0.05)
    lash = col(T["lash_density"]) * lash_band**1.5 * (
        0.5 + 0.5 * np.cos(45.0 * a + 9.0 * (bt - yu) + col(tp[:, 4])))
    low_band = np.clip(1.0 - (bt - yl) / 0.12, 0.0, 1.0) * (dl < 0) * (base > 0.1)
    lash = np.maximum(lash, 0.35 * col(T["lash_density"]) * low_band)
    shade = skin_shade * socket * crease * skin_tex * margin * (1.0 - 0.8 * lash)
    skin = T["skin_rgb"][:, None, None, :] * shade[..., None]

    ab = (x - D_BROW * fx) / cyaw
    bb = (y - D_BROW * fy) / cpit
    yb = -col(T["brow_height"]) - col(T["brow_arch"]) * np.clip(1 - ((ab - 0.1) / 1.8) ** 2, 0, 1)
    tb = col(T["brow_thickness"]) * np.sqrt(np.clip(1 - ((ab + 0.2) / 2.0) ** 2, 0, 1))
    hair = 0.8 + 0.1 * np.cos(31.0 * ab + 17.0 * bb + col(tp[:, 5])) + 0.1 * np.cos(
        23.0 * ab - 11.0 * bb + col(tp[:, 2]))
    brow = _smooth_clip((tb / 2 - np.abs(bb - yb)) * rho) * hair
    hair_rgb = T["hair_rgb"][:, None, None, :] * skin_shade[..., None]
    skin = skin * (1 - brow[..., None]) + hair_rgb * brow[..., None]

    op = opening[..., None]
    img = skin * (1 - op) + eye * op

    # ---- glasses: lens tint and reflection, then the frame on top
    refl = 0.12 * np.exp(-(((ga + 0.7 * gb - 0.6) / 0.35) ** 2)) * lens
    img = img * (1 - 0.06 * lens[..., None]) + (refl * inten)[..., None]
    frame = T["frame_rgb"][:, None, None, :] * (amb + 0.8 * inten)[..., None]
    img = img * (1 - frame_alpha[..., None]) + frame * frame_alpha[..., None]

    # ---- light colour and side shadow
    ramp = 1.0 - np.abs(col(cap_light["side"])) * (
        0.5 + 0.5 * np.sign(col(cap_light["side"])) * (xs / W * 2.0 - 1.0))
    img = img * cap_light["light_rgb"][:, None, None, :] * ramp[..., None]
    return np.clip(img, 0.0, 1.0)


def _camera_effects(img: np.ndarray, cap: dict, idx: np.ndarray,
                    rng: np.random.Generator) -> np.ndarray:
    """Resolution loss, blur, sensor noise and JPEG on uint8 RGB images (in place order)."""
    n, H, W, _ = img.shape
    out = np.empty((n, H, W, 3), np.uint8)
    noise = rng.normal(size=(n, H, W, 3)).astype(np.float32)
    for k in range(n):
        i = idx[k]
        im = img[k]
        res = float(cap["res"][i])
        if res < 0.98:
            small = cv2.resize(im, (max(2, round(W * res)), max(2, round(H * res))),
                               interpolation=cv2.INTER_AREA)
            im = cv2.resize(small, (W, H), interpolation=cv2.INTER_LINEAR)
        sigma = float(cap["blur"][i])
        if sigma > 0.05:
            im = cv2.GaussianBlur(im, (0, 0), sigma)
        im = im * 255.0 + noise[k] * cap["noise"][i]
        im8 = np.clip(im + 0.5, 0, 255).astype(np.uint8)
        q = int(cap["jpeg"][i])
        if q < 100:
            ok, buf = cv2.imencode(".jpg", im8[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, q])
            im8 = cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]
        out[k] = im8
    return out


def render_eyes(gaze: np.ndarray, traits: Sequence[SubjectTraits], head_pose: np.ndarray,
                rng: np.random.Generator, size: tuple[int, int] = (64, 96),
                conditions: DomainSpec | None = None) -> np.ndarray:
    """Render eye images (N, H, W, 3) uint8 RGB for visual-axis gaze and head pose (N, 2) radians.

    ``conditions`` supplies the capture distribution (lighting, blur, noise, JPEG);
    None means clean studio conditions. Deterministic given ``rng``'s state.
    """
    gaze = np.asarray(gaze, dtype=np.float32)
    head = np.asarray(head_pose, dtype=np.float32)
    n = gaze.shape[0] if gaze.ndim == 2 else -1
    if gaze.shape != (n, 2) or head.shape != (n, 2) or len(traits) != n:
        raise ConfigError(f"render_eyes: gaze and head_pose must be (N, 2) and traits of length "
                          f"N; got {gaze.shape}, {head.shape}, {len(traits)}")
    H, W = int(size[0]), int(size[1])
    if H < 8 or W < 8:
        raise ConfigError(f"render size must be at least 8x8 (height, width), got {size}")
    if np.any(np.abs(gaze) >= np.pi / 2) or np.any(np.abs(head) >= np.pi / 2):
        raise ConfigError("render_eyes: gaze and head pose angles must lie in (-90, 90) degrees")
    spec = conditions or CLEAN
    T = _traits_arrays(traits)
    cap = _capture(spec, n, rng)
    out = np.empty((n, H, W, 3), np.uint8)
    for start in range(0, n, CHUNK):
        sl = slice(start, min(n, start + CHUNK))
        Tc = {k: v[sl] for k, v in T.items()}
        Cc = {k: v[sl] for k, v in cap.items()}
        img = _render_chunk(gaze[sl], head[sl], Tc, Cc, H, W, Cc)
        out[sl] = _camera_effects(img.astype(np.float32), cap, np.arange(sl.start, sl.stop), rng)
    return out
