"""Procedural eye-region renderer: a per-pixel ray-cast eyeball with exact gaze labels.

Our reconstruction (no public renderer is reproduced). Orthographic camera looking
along +z; lengths in eyeball radii ``rho`` (pixels per radius = ``0.19 * W * eye_size``).

* Eyeball: unit sphere at the origin; the visible point under pixel (x, y) is
  ``P = (x, y, -sqrt(1 - x^2 - y^2))`` with normal ``P``; Lambert shading
  ``ambient + intensity * max(0, P.l)`` for the unit direction ``l`` towards the light.
* Optical axis ``o = pitchyaw_to_vector(gaze - kappa + (gain - 1)(gaze - head))``: the
  visual axis (the label) minus the subject's kappa angle; ``gain`` (1 except in the
  appearance-routing world, see synth_traits) scales the eye-in-head rotation.
* Iris: a flat disk of radius ``s = iris_size`` in the plane ``X.o = sqrt(1 - s^2)``
  (it meets the sphere at the limbus). Its projected centre is therefore at
  ``rho * sqrt(1 - s^2) * (o_x, o_y)`` pixels from the eyeball centre -- the truth the
  self-check :func:`genlab.gaze.synth.dataset.iris_centre_check` measures against. Pupil: a
  concentric disk whose size shrinks with light intensity. Corneal refraction is ignored.
* Glint: mirror reflection on the corneal sphere (radius 0.65, centre ``0.45 o``, which
  meets the eyeball at the limbus) at the normal ``h = (l + v)/|l + v|``, ``v = -e_z``.
* Head-attached features (eyelids, brow, glasses) lie on planes at depth ``D`` in front
  of the eyeball centre; head pose (pitch, yaw) shifts them by ``D * f_xy`` (``f`` the
  face's forward vector) and foreshortens them by ``cos(yaw)``, ``cos(pitch)``: a
  parallax cue between eyeball and face.
* Eyelids: parabola-like curves whose opening follows the eye-in-head pitch
  (looking down lowers the upper lid, by the subject's ``lid_follow``) and the subject's
  aperture, sheared by the canthal tilt; lid margin, crease, lashes and a brow are drawn
  on shaded skin.
* Glasses: a superelliptic frame; inside the lens, image coordinates are scaled about
  the lens centre by the spectacle magnification ``m = 1 / (1 - 0.015 P)`` (P in
  diopters; 0.015 m = vertex distance plus thickness term, our simplification), so the
  lens changes where the iris appears for a given gaze.
* Capture: light colour/direction/intensity, a side shadow ramp, lower effective
  resolution (area down-sampling then linear up-sampling), Gaussian blur, Gaussian
  sensor noise and JPEG compression (OpenCV).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np

from genlab.core.errors import ConfigError
from genlab.gaze.geometry import pitchyaw_to_vector
from genlab.gaze.synth.traits import DomainSpec, SubjectTraits

RHO_PER_WIDTH = 0.19  # eyeball radius in pixels per image width
# depth of head-attached planes in eyeball radii; the lids wrap the eyeball, so their
# effective parallax is small, the brow and the glasses sit further forward
D_LID, D_BROW, D_GLASSES = 0.35, 1.3, 2.2
CHUNK = 8  # images rendered together (temporaries stay in cache)

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
        "hair_rgb", "lash_density", "iris_gain", "lid_follow")}
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


def optical_axis(gaze: np.ndarray, head: np.ndarray, T) -> np.ndarray:
    """Pitch-yaw (N, 2) of the eyeball's optical axis: gaze - kappa + (gain - 1)(gaze - head)."""
    gain = T["iris_gain"][:, None]
    return gaze - T["kappa"] + (gain - 1.0) * (gaze - head)


def _smooth_clip(d):
    """Anti-aliased coverage from a signed distance in pixels."""
    return np.clip(d + 0.5, 0.0, 1.0)


class _Frame:
    """Per-chunk geometry: pixel grids in eyeball radii and per-image broadcast columns."""

    def __init__(self, gaze, head, T, C, H, W):
        n = gaze.shape[0]
        self.n, self.H, self.W, self.head = n, H, W, head
        self.col = lambda a: np.asarray(a, np.float32).reshape(n, 1, 1)
        col = self.col
        self.rho = col(RHO_PER_WIDTH * W * T["eye_size"] * C["scale"])
        self.cx = col(W / 2.0 + C["shift"][:, 0])
        self.cy = col(H * 0.6 + C["shift"][:, 1])
        self.xs = (np.arange(W, dtype=np.float32) + 0.5)[None, None, :]
        self.ys = (np.arange(H, dtype=np.float32) + 0.5)[None, :, None]
        self.x0 = (self.xs - self.cx) / self.rho
        self.y0 = (self.ys - self.cy) / self.rho
        face = pitchyaw_to_vector(head.astype(np.float32))  # forward vector of the face
        self.fx, self.fy = col(face[:, 0]), col(face[:, 1])
        self.cyaw, self.cpit = col(np.cos(head[:, 1])), col(np.cos(head[:, 0]))
        light = pitchyaw_to_vector(C["light_py"])
        self.l = [col(light[:, i]) for i in range(3)]
        self.amb, self.inten = col(C["ambient"]), col(C["intensity"])

    def head_coords(self, x, y, depth):
        """Coordinates on a head-attached plane ``depth`` radii in front of the eyeball."""
        return (x - depth * self.fx) / self.cyaw, (y - depth * self.fy) / self.cpit

    def eye_window(self, margin: float = 1.25) -> tuple[slice, slice]:
        """Rows and columns that can show the eyeball of any image in the chunk."""
        r = self.rho.ravel() * margin
        cx, cy = self.cx.ravel(), self.cy.ravel()
        c0 = int(max(0, np.floor((cx - r).min()))), int(min(self.W, np.ceil((cx + r).max())))
        r0 = int(max(0, np.floor((cy - r).min()))), int(min(self.H, np.ceil((cy + r).max())))
        return slice(*r0), slice(*c0)


def _glasses(F: _Frame, T):
    """Lens mask, frame coverage and the lens-remapped coordinates (x, y)."""
    ga, gb = F.head_coords(F.x0, F.y0, D_GLASSES)
    ga, gb = ga - 0.1, gb + 0.2
    sup = (ga / 1.85) ** 4 + (gb / 1.35) ** 4
    has_g = F.col(T["glasses"])
    lens = (sup < 1.0) * has_g
    frame_alpha = has_g * _smooth_clip(np.minimum(sup - 1.0, 1.5 - sup) * F.rho * 0.25)
    m = F.col(1.0 / (1.0 - 0.015 * T["lens_power"]))
    lcx, lcy = D_GLASSES * F.fx + 0.1, D_GLASSES * F.fy - 0.2
    inside = lens > 0
    x = np.where(inside, lcx + (F.x0 - lcx) / m, F.x0)
    y = np.where(inside, lcy + (F.y0 - lcy) / m, F.y0)
    refl = 0.12 * np.exp(-(((ga + 0.7 * gb - 0.6) / 0.35) ** 2)) * lens
    return lens, frame_alpha, refl, x, y


def _eyeball(F: _Frame, T, C, gaze, x, y, rho):
    """Shaded eyeball colour (premultiplied by its coverage), coverage and glint on a window."""
    f32, col = np.float32, F.col
    lx, ly, lz = F.l
    s = x * x + y * y
    z = -np.sqrt(np.maximum(1.0 - s, 0.0))
    cover = _smooth_clip((1.0 - np.sqrt(s)) * rho)
    shade = F.amb + F.inten * np.maximum(x * lx + y * ly + z * lz, 0.0)

    optical = pitchyaw_to_vector(optical_axis(gaze, F.head, T).astype(f32))
    ox, oy, oz = (col(optical[:, i]) for i in range(3))
    si = col(T["iris_size"])
    d = np.sqrt(1.0 - si * si)
    zi = (d - x * ox - y * oy) / oz
    qx, qy, qz = x - d * ox, y - d * oy, zi - d * oz
    r = np.sqrt(qx * qx + qy * qy + qz * qz) / si
    # iris texture angle in a frame of the iris plane
    e1n = np.sqrt(ox * ox + oz * oz)
    e1x, e1z = -oz / e1n, ox / e1n
    e2x, e2y, e2z = oy * e1z, oz * e1x - ox * e1z, -oy * e1x
    phi = np.arctan2(qx * e2x + qy * e2y + qz * e2z, qx * e1x + qz * e1z)
    tp = T["tex"]
    k1, k2 = col(T["tex_k"][:, 0]), col(T["tex_k"][:, 1])
    tex = (1.0 + 0.22 * np.cos(k1 * phi + col(tp[:, 0]) + 5.0 * r)
           + 0.12 * np.cos(k2 * phi + col(tp[:, 1]) - 3.0 * r))
    tex *= 1.0 - 0.25 * np.exp(-((r - 0.45) / 0.08) ** 2)  # collarette
    tex *= 1.0 - 0.65 * np.clip((r - 0.8) / 0.2, 0.0, 1.0) ** 2  # limbal ring
    inner = np.clip(1.0 - r / 0.5, 0.0, 1.0)[..., None]
    iris = T["iris_rgb"][:, None, None, :] * (tex[..., None] * (1.0 - 0.3 * inner))
    iris += 0.3 * inner * np.array([0.35, 0.25, 0.1], f32)
    iris_px = si * rho
    a_iris = _smooth_clip((1.0 - r) * iris_px)
    pupil = col(0.42 - 0.12 * C["intensity"])
    a_pupil = _smooth_clip((pupil - r) * iris_px)
    s2 = (s * s)[..., None]
    sclera = np.array([0.93, 0.9, 0.86], f32) + np.array([-0.23, -0.31, -0.3], f32) * s2
    ball = sclera + (iris - sclera) * a_iris[..., None]
    ball = ball * ((1.0 - 0.98 * a_pupil) * shade * cover)[..., None]

    # glint: mirror reflection on the corneal sphere (centre 0.45 o, radius 0.65)
    hx, hy, hz = lx, ly, lz - 1.0
    hn = np.sqrt(hx * hx + hy * hy + hz * hz)
    gx = 0.45 * ox + 0.65 * hx / hn
    gy = 0.45 * oy + 0.65 * hy / hn
    visible = ((hx * ox + hy * oy + hz * oz) / hn > np.cos(np.radians(40.0))).astype(f32)
    width2 = 2 * np.maximum(0.045 * rho, 0.6) ** 2
    glint = visible * F.inten * 1.4 * np.exp(-((x - gx) ** 2 + (y - gy) ** 2) * rho * rho / width2)
    return ball, cover, glint


def _eyelids(F: _Frame, T, gaze, head, x, y):
    """Head-attached lid geometry: opening coverage and the quantities skin shading needs."""
    col, rho = F.col, F.rho
    a, b = F.head_coords(x, y, D_LID)
    pe = col(T["iris_gain"] * (gaze[:, 0] - head[:, 0]))  # eye-in-head pitch of the eyeball
    ap = col(T["aperture"])
    hu = np.clip(ap * (0.55 + col(T["lid_follow"]) * np.sin(pe)), 0.08, 1.2)
    hl = np.clip(ap * 0.5 * (1.0 - 0.3 * np.sin(pe)), 0.15, 0.9)
    u = a / 1.2
    base = np.clip(1.0 - u * u, 0.0, None)
    bt = b - a * col(np.tan(np.radians(T["canthal_tilt_deg"])))
    yu = -hu * base**0.7 * (1.0 + 0.12 * u)
    yl = hl * base**0.9 * (1.0 - 0.1 * u)
    du = (bt - yu) * rho
    dl = (yl - bt) * rho
    canthus = (1.0 - np.abs(u)) * 1.2 * rho  # distance to the nearer eye corner (pixels)
    opening = _smooth_clip(np.minimum(np.minimum(du, dl), canthus))
    return dict(a=a, b=b, ap=ap, base=base, bt=bt, yu=yu, yl=yl, du=du, dl=dl, opening=opening)


def _skin(F: _Frame, T, lid, x, y):
    """Shaded skin with lid crease and margin, lashes and the brow."""
    col, rho = F.col, F.rho
    lx, ly, lz = F.l
    a, b, bt, base, du, dl = lid["a"], lid["b"], lid["bt"], lid["base"], lid["du"], lid["dl"]
    tp = T["tex"]
    nsx, nsy = 0.25 * a, 0.25 * (b + 0.3)
    nsn = np.sqrt(nsx * nsx + nsy * nsy + 1.0)
    skin_shade = F.amb + F.inten * np.maximum((nsx * lx + nsy * ly - lz) / nsn, 0.0)
    shade = skin_shade * (1.0 - 0.22 * np.exp(-(a * a / 2.0 + (b + 0.1) ** 2 / 0.7)))  # socket
    inside_lids = np.clip(base * 8.0, 0.0, 1.0)  # fades the lid lines out at the canthi
    crease_y = -(0.55 * lid["ap"] + 0.4) * base**0.6
    shade *= 1.0 - 0.2 * inside_lids * np.exp(-(((bt - crease_y) * rho) / (0.06 * rho + 0.8)) ** 2)
    shade *= 1.0 + 0.03 * np.cos(7.0 * a + 4.0 * b + col(tp[:, 2])) + 0.02 * np.cos(
        3.0 * a - 8.0 * b + col(tp[:, 3]))
    shade *= 1.0 - 0.45 * inside_lids * np.exp(-((du + 0.05 * rho) / (0.05 * rho + 0.5)) ** 2)
    lash_band = np.clip(1.0 + (bt - lid["yu"]) / 0.25, 0.0, 1.0) * (du < 0) * (base > 0.05)
    lash = col(T["lash_density"]) * lash_band**1.5 * (
        0.5 + 0.5 * np.cos(45.0 * a + 9.0 * (bt - lid["yu"]) + col(tp[:, 4])))
    low_band = np.clip(1.0 - (bt - lid["yl"]) / 0.12, 0.0, 1.0) * (dl < 0) * (base > 0.1)
    lash = np.maximum(lash, 0.35 * col(T["lash_density"]) * low_band)
    skin = T["skin_rgb"][:, None, None, :] * (shade * (1.0 - 0.8 * lash))[..., None]

    ab, bb = F.head_coords(x, y, D_BROW)
    yb = -col(T["brow_height"]) - col(T["brow_arch"]) * np.clip(1 - ((ab - 0.1) / 1.8) ** 2, 0, 1)
    tb = col(T["brow_thickness"]) * np.sqrt(np.clip(1 - ((ab + 0.2) / 2.0) ** 2, 0, 1))
    hair = 0.8 + 0.2 * np.cos(31.0 * ab + 17.0 * bb + col(tp[:, 5]))
    brow = (_smooth_clip((tb / 2 - np.abs(bb - yb)) * rho) * (tb > 0.02) * hair)[..., None]
    hair_rgb = T["hair_rgb"][:, None, None, :] * skin_shade[..., None]
    return skin + (hair_rgb - skin) * brow


def _render_chunk(gaze, head, T, C, H, W):
    """Float RGB images (n, H, W, 3) in [0, 1] before the camera effects."""
    F = _Frame(gaze, head, T, C, H, W)
    lens, frame_alpha, refl, x, y = _glasses(F, T)
    lid = _eyelids(F, T, gaze, head, x, y)

    caruncle = (np.array([0.85, 0.6, 0.6], np.float32) * 0.6) * T["skin_rgb"][:, None, None, :]
    eye = np.broadcast_to(caruncle, (F.n, H, W, 3)).copy()
    glint = np.zeros((F.n, H, W), np.float32)
    rows, cols = F.eye_window()
    ball, cover, g = _eyeball(F, T, C, gaze, x[:, rows, cols], y[:, rows, cols], F.rho)
    eye[:, rows, cols] = ball + eye[:, rows, cols] * (1.0 - cover)[..., None]
    glint[:, rows, cols] = g
    du = lid["du"]
    lid_shadow = 1.0 - 0.5 * np.exp(-np.maximum(du, 0.0) / (0.18 * F.rho))
    op = lid["opening"]
    eye = eye * (lid_shadow * op)[..., None] + (glint * op)[..., None]

    img = _skin(F, T, lid, x, y) * (1.0 - op)[..., None] + eye
    img = img * (1.0 - 0.06 * lens[..., None]) + (refl * F.inten)[..., None]
    frame = T["frame_rgb"][:, None, None, :] * (F.amb + 0.8 * F.inten)[..., None]
    img = img + (frame - img) * frame_alpha[..., None]

    side = F.col(C["side"])
    ramp = 1.0 - np.abs(side) * (0.5 + 0.5 * np.sign(side) * (F.xs / W * 2.0 - 1.0))
    img = img * (C["light_rgb"][:, None, None, :] * ramp[..., None])
    return np.clip(img, 0.0, 1.0)


def _camera_effects(img: np.ndarray, C: dict, rng: np.random.Generator) -> np.ndarray:
    """Resolution loss, blur, sensor noise and JPEG: float [0, 1] -> uint8 RGB images."""
    n, H, W, _ = img.shape
    im = img * np.float32(255.0)
    for k in range(n):
        res = float(C["res"][k])
        if res < 0.98:
            small = cv2.resize(im[k], (max(2, round(W * res)), max(2, round(H * res))),
                               interpolation=cv2.INTER_AREA)
            im[k] = cv2.resize(small, (W, H), interpolation=cv2.INTER_LINEAR)
        sigma = float(C["blur"][k])
        if sigma > 0.05:
            im[k] = cv2.GaussianBlur(im[k], (0, 0), sigma)
    noise = C["noise"]
    if np.any(noise > 0):
        im += rng.standard_normal(im.shape, dtype=np.float32) * noise.reshape(n, 1, 1, 1)
    out = np.clip(im + 0.5, 0, 255).astype(np.uint8)
    for k in range(n):
        q = int(C["jpeg"][k])
        if q < 100:
            ok, buf = cv2.imencode(".jpg", out[k, :, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, q])
            out[k] = cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]
    return out


def render_eyes(gaze: np.ndarray, traits: Sequence[SubjectTraits], head_pose: np.ndarray,
                rng: np.random.Generator, size: tuple[int, int] = (64, 96),
                conditions: DomainSpec | None = None, workers: int | None = None,
                on_chunk: Callable[[int], None] | None = None) -> np.ndarray:
    """Render eye images (N, H, W, 3) uint8 RGB for visual-axis gaze and head pose (N, 2) radians.

    ``conditions`` supplies the capture distribution (lighting, blur, noise, JPEG);
    None means clean studio conditions. Deterministic given ``rng``'s state, whatever the
    number of ``workers`` (threads; default :func:`default_workers`). ``on_chunk(n)`` is
    called after each block of ``n`` images (e.g. a progress bar's tick).
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
    starts = list(range(0, n, CHUNK))
    seeds = rng.integers(0, 2**63 - 1, len(starts))  # one noise stream per chunk
    out = np.empty((n, H, W, 3), np.uint8)

    def work(k: int) -> None:
        sl = slice(starts[k], min(n, starts[k] + CHUNK))
        Tc = {key: v[sl] for key, v in T.items()}
        Cc = {key: v[sl] for key, v in cap.items()}
        img = _render_chunk(gaze[sl], head[sl], Tc, Cc, H, W)
        out[sl] = _camera_effects(img, Cc, np.random.default_rng(int(seeds[k])))
        if on_chunk is not None:
            on_chunk(sl.stop - sl.start)

    workers = default_workers() if workers is None else int(workers)
    if workers <= 1 or len(starts) == 1:
        for k in range(len(starts)):
            work(k)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(work, range(len(starts))))
    return out


def default_workers() -> int:
    """Render threads by default: 2 where the machine has them (numpy/OpenCV drop the GIL)."""
    return max(1, min(2, os.cpu_count() or 1))
