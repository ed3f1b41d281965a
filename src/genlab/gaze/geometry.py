"""Gaze geometry: pitch-yaw <-> unit vectors, angular error, and data normalisation.

Conventions (camera coordinates: x right, y down, z forward into the scene; radians):

* A gaze (or face) direction with pitch p and yaw y is the unit vector
  ``g = (-cos p sin y, -sin p, -cos p cos y)``; (0, 0) looks straight into the camera,
  positive pitch looks up, positive yaw looks to the camera's left (the subject's right).
  Inverse: ``p = asin(-g_y)``, ``y = atan2(-g_x, -g_z)`` (yaw 0 straight up/down). This is
  the convention of ETH-XGaze and GazeHub (Zhang et al. 2020; Cheng et al. 2021,
  "Appearance-based gaze estimation with deep learning: a review and benchmark").
* Angular error between two directions = ``arccos(clamp(a.b / (|a||b|), -1, 1))`` in
  degrees. We evaluate it as ``atan2(|a x b|, a.b)``, which is the same angle but exact
  near 0 and 180 degrees (the arccos form loses ~0.02 degrees to float32 rounding there;
  this one leaves < 1e-5 degrees),
  and its torch gradient is finite everywhere (identical vectors included). A zero
  vector has no direction: we define its error to any direction as 90 degrees.
* Data normalisation (Zhang, Sugano & Bulling 2018, "Revisiting data normalization for
  appearance-based gaze estimation", Sec. 3): a virtual camera with intrinsics
  ``C_n = [[f_n, 0, w/2], [0, f_n, h/2], [0, 0, 1]]`` is placed at distance ``d_n`` from
  the face centre ``e_r``, looking at it, with its x-axis in the plane of the head's
  x-axis. Its rotation ``R`` has rows ``r_x, r_y, r_z`` with ``r_z = e_r / |e_r|``,
  ``r_y = r_z x h_x / |.|``, ``r_x = r_y x r_z``; ``S = diag(1, 1, d_n / |e_r|)``. The
  image is warped by ``W = C_n S R C^-1``; the head rotation becomes ``R H``; the gaze
  direction is rotated by ``R`` only (the scaling ``S`` must not touch it, Eq. 6 of the
  paper, which is the paper's fix of the earlier method).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import torch

from genlab.core.errors import ConfigError, DataError

__all__ = [
    "pitchyaw_to_vector",
    "vector_to_pitchyaw",
    "angular_error_deg",
    "NormalizedSample",
    "normalize_sample",
    "head_rotation_matrix",
]


def _is_torch(x) -> bool:
    return isinstance(x, torch.Tensor)


def _check_last(x, size: int, name: str) -> None:
    if x.shape[-1:] != (size,):
        raise ConfigError(f"{name} must have shape (..., {size}), got {tuple(x.shape)}")


def pitchyaw_to_vector(py):
    """Unit gaze vectors (..., 3) from (pitch, yaw) angles (..., 2) in radians."""
    if not _is_torch(py):
        py = np.asarray(py, dtype=np.result_type(np.asarray(py).dtype, np.float32))
    _check_last(py, 2, "pitch-yaw")
    lib = torch if _is_torch(py) else np
    p, y = py[..., 0], py[..., 1]
    cp = lib.cos(p)
    return lib.stack([-cp * lib.sin(y), -lib.sin(p), -cp * lib.cos(y)], -1)


def vector_to_pitchyaw(v):
    """(pitch, yaw) angles (..., 2) in radians from gaze vectors (..., 3) of any length."""
    if not _is_torch(v):
        v = np.asarray(v, dtype=np.result_type(np.asarray(v).dtype, np.float32))
    _check_last(v, 3, "gaze vector")
    if _is_torch(v):
        n = torch.linalg.vector_norm(v, dim=-1, keepdim=True).clamp_min(1e-12)
        u = v / n
        pitch = torch.asin((-u[..., 1]).clamp(-1.0, 1.0))
        yaw = torch.atan2(-u[..., 0] + 0.0, -u[..., 2] + 0.0)  # +0.0: yaw 0 at the poles
        return torch.stack([pitch, yaw], -1)
    n = np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
    u = v / n
    pitch = np.arcsin(np.clip(-u[..., 1], -1.0, 1.0))
    yaw = np.arctan2(-u[..., 0] + 0.0, -u[..., 2] + 0.0)  # +0.0: yaw 0 at the poles
    return np.stack([pitch, yaw], -1)


def _as_vectors(x):
    if x.shape[-1] == 2:
        return pitchyaw_to_vector(x)
    if x.shape[-1] == 3:
        return x
    raise ConfigError(
        f"angular_error_deg expects (..., 2) pitch-yaw or (..., 3) vectors, got {tuple(x.shape)}"
    )


def angular_error_deg(a, b):
    """Angle in degrees between two directions given both as pitch-yaw (..., 2) or vectors (..., 3).

    Zero vectors are defined to be 90 degrees from everything; never returns NaN.
    """
    if _is_torch(a) != _is_torch(b):
        raise ConfigError("angular_error_deg: pass both numpy arrays or both torch tensors")
    if not _is_torch(a):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
    if a.shape[-1] != b.shape[-1]:
        raise ConfigError(
            f"angular_error_deg: both inputs must be pitch-yaw or both vectors, got shapes "
            f"{tuple(a.shape)} and {tuple(b.shape)}"
        )
    va, vb = _as_vectors(a), _as_vectors(b)
    if _is_torch(va):
        return _angle_torch(va, vb)
    na = np.linalg.norm(va, axis=-1)
    nb = np.linalg.norm(vb, axis=-1)
    ua = va / np.maximum(na, 1e-12)[..., None]
    ub = vb / np.maximum(nb, 1e-12)[..., None]
    cross = np.linalg.norm(np.cross(ua, ub), axis=-1)
    dot = np.sum(ua * ub, axis=-1)
    ang = np.degrees(np.arctan2(cross, dot))
    return np.where((na < 1e-12) | (nb < 1e-12), 90.0, ang)


def _angle_torch(va: torch.Tensor, vb: torch.Tensor) -> torch.Tensor:
    """atan2(|a x b|, a.b) with gradients that stay finite where |a x b| = 0."""
    va, vb = torch.broadcast_tensors(va, vb)
    na = torch.linalg.vector_norm(va, dim=-1)
    nb = torch.linalg.vector_norm(vb, dim=-1)
    zero = (na < 1e-12) | (nb < 1e-12)
    ua = va / na.clamp_min(1e-12).unsqueeze(-1)
    ub = vb / nb.clamp_min(1e-12).unsqueeze(-1)
    cross = torch.linalg.cross(ua, ub, dim=-1)
    c2 = (cross * cross).sum(-1)
    # sqrt has an infinite slope at 0: take it only where c2 > 0 (double-where trick).
    pos = c2 > 1e-30
    sin = torch.where(pos, torch.sqrt(torch.where(pos, c2, torch.ones_like(c2))),
                      torch.zeros_like(c2))
    dot = (ua * ub).sum(-1)
    ang = torch.rad2deg(torch.atan2(sin, dot))
    return torch.where(zero, torch.full_like(ang, 90.0), ang)


# --------------------------------------------------------------------------- normalisation
@dataclass
class NormalizedSample:
    """Result of :func:`normalize_sample`: the warped image and the matrices that made it."""

    image: np.ndarray  # (h, w, C) warped image
    R: np.ndarray  # (3, 3) rotation of the virtual camera
    S: np.ndarray  # (3, 3) scaling diag(1, 1, d_n / |e_r|)
    W: np.ndarray  # (3, 3) perspective warp C_n S R C^-1
    gaze_pitchyaw: np.ndarray | None  # (2,) gaze in the normalised camera, or None
    head_pose_pitchyaw: np.ndarray  # (2,) facing direction -(R H)[:, 2] as pitch-yaw


def head_rotation_matrix(head_rotation) -> np.ndarray:
    """A 3x3 rotation matrix from a 3x3 matrix or a Rodrigues vector (3,) / (3, 1)."""
    h = np.asarray(head_rotation, dtype=np.float64)
    if h.shape == (3, 3):
        return h
    if h.size == 3:
        return cv2.Rodrigues(h.reshape(3, 1))[0]
    raise ConfigError(f"head_rotation must be a 3x3 matrix or a Rodrigues vector (3,), "
                      f"got shape {h.shape}")


def normalize_sample(image, camera_matrix, head_rotation, face_center, gaze_target=None,
                     focal_norm: float = 960.0, distance_norm: float = 600.0,
                     size: tuple[int, int] = (224, 224)) -> NormalizedSample:
    """Warp a face image into the normalised camera of Zhang et al. (2018) and rotate its labels.

    ``size`` is (height, width) of the output. ``face_center`` and ``gaze_target`` are 3D
    points in the original camera's coordinates (same unit as ``distance_norm``, e.g. mm).
    The head pose returned is the pitch-yaw of the face's forward direction ``-(R H) e_z``,
    which is (0, 0) for a head frame aligned with the camera (``H = I``).
    """
    h_out, w_out = int(size[0]), int(size[1])
    if h_out <= 0 or w_out <= 0:
        raise ConfigError(f"size must be positive (height, width), got {size}")
    C = np.asarray(camera_matrix, dtype=np.float64)
    if C.shape != (3, 3):
        raise ConfigError(f"camera_matrix must be 3x3, got shape {C.shape}")
    H = head_rotation_matrix(head_rotation)
    e = np.asarray(face_center, dtype=np.float64).reshape(-1)
    if e.shape != (3,):
        raise ConfigError(f"face_center must be a 3D point, got shape {e.shape}")
    dist = float(np.linalg.norm(e))
    if dist <= 0:
        raise ConfigError("face_center must not be the camera centre")

    forward = e / dist
    down = np.cross(forward, H[:, 0])
    if np.linalg.norm(down) < 1e-9:
        raise ConfigError("head x-axis is parallel to the viewing direction: undefined rotation")
    down /= np.linalg.norm(down)
    right = np.cross(down, forward)
    right /= np.linalg.norm(right)
    R = np.stack([right, down, forward])  # rows
    S = np.diag([1.0, 1.0, distance_norm / dist])
    C_n = np.array([[focal_norm, 0.0, w_out / 2.0], [0.0, focal_norm, h_out / 2.0],
                    [0.0, 0.0, 1.0]])
    W = C_n @ S @ R @ np.linalg.inv(C)

    img = np.asarray(image)
    if img.ndim not in (2, 3):
        raise DataError(f"image must be (H, W) or (H, W, C), got shape {img.shape}")
    warped = cv2.warpPerspective(img, W, (w_out, h_out))

    head_norm = R @ H
    head_py = vector_to_pitchyaw(-head_norm[:, 2])
    gaze_py = None
    if gaze_target is not None:
        t = np.asarray(gaze_target, dtype=np.float64).reshape(-1)
        if t.shape != (3,):
            raise ConfigError(f"gaze_target must be a 3D point, got shape {t.shape}")
        gaze_py = vector_to_pitchyaw(R @ (t - e))
    return NormalizedSample(warped, R, S, W, gaze_py, head_py)
