"""Gaze geometry against hand-computed values, and normalisation on hand-solvable setups."""

import math

import numpy as np
import pytest
import torch

from genlab.core.errors import ConfigError
from genlab.gaze.geometry import (
    angular_error_deg,
    head_rotation_matrix,
    normalize_sample,
    pitchyaw_to_vector,
    vector_to_pitchyaw,
)

H = math.pi / 2


@pytest.mark.parametrize(
    "py, vec",
    [
        ((0.0, 0.0), (0.0, 0.0, -1.0)),  # straight into the camera
        ((H, 0.0), (0.0, -1.0, 0.0)),  # up is -y
        ((-H, 0.0), (0.0, 1.0, 0.0)),
        ((0.0, H), (-1.0, 0.0, 0.0)),  # +yaw is camera's left
        ((0.0, -H), (1.0, 0.0, 0.0)),
        ((0.0, math.pi), (0.0, 0.0, 1.0)),
        ((math.pi / 6, math.pi / 4), (-math.sqrt(3) / 2 * math.sqrt(0.5), -0.5,
                                      -math.sqrt(3) / 2 * math.sqrt(0.5))),
    ],
)
def test_pitchyaw_to_vector_hand_values(py, vec):
    np.testing.assert_allclose(pitchyaw_to_vector(np.array(py)), vec, atol=1e-12)
    t = pitchyaw_to_vector(torch.tensor(py, dtype=torch.float64))
    assert isinstance(t, torch.Tensor)
    np.testing.assert_allclose(t.numpy(), vec, atol=1e-12)


def test_vector_to_pitchyaw_hand_values_and_normalises():
    np.testing.assert_allclose(vector_to_pitchyaw(np.array([0.0, 0.0, -5.0])), [0, 0], atol=1e-12)
    np.testing.assert_allclose(vector_to_pitchyaw(np.array([0.0, -2.0, 0.0])), [H, 0], atol=1e-12)
    np.testing.assert_allclose(vector_to_pitchyaw(np.array([-3.0, 0.0, 0.0])), [0, H], atol=1e-12)
    # (-1, -1, -1)/sqrt3: pitch = asin(1/sqrt3), yaw = atan2(1, 1) = 45 deg
    np.testing.assert_allclose(vector_to_pitchyaw(np.array([-1.0, -1.0, -1.0])),
                               [math.asin(1 / math.sqrt(3)), math.pi / 4], atol=1e-12)


def test_round_trips_random():
    rng = np.random.default_rng(0)
    py = np.stack([rng.uniform(-1.5, 1.5, 500), rng.uniform(-3.1, 3.1, 500)], -1)
    np.testing.assert_allclose(vector_to_pitchyaw(pitchyaw_to_vector(py)), py, atol=1e-9)
    v = rng.normal(size=(500, 3))
    u = v / np.linalg.norm(v, axis=-1, keepdims=True)
    np.testing.assert_allclose(pitchyaw_to_vector(vector_to_pitchyaw(v)), u, atol=1e-9)
    t = torch.from_numpy(py)
    torch.testing.assert_close(vector_to_pitchyaw(pitchyaw_to_vector(t)), t)


def test_angular_error_known_pairs():
    a = np.array([[0.0, 0.0, -1.0], [0.0, 0.0, -1.0], [0.0, 0.0, -1.0], [1.0, 2.0, 3.0]])
    b = np.array([[0.0, 0.0, -7.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0], [1.0, 2.0, 3.0]])
    np.testing.assert_allclose(angular_error_deg(a, b), [0.0, 90.0, 180.0, 0.0], atol=1e-9)
    # pitch-yaw pairs: yaw difference at pitch 0 is the angle; 30 deg pitch vs 0
    pa = np.radians([[0.0, 10.0], [30.0, 0.0]])
    pb = np.radians([[0.0, -15.0], [0.0, 0.0]])
    np.testing.assert_allclose(angular_error_deg(pa, pb), [25.0, 30.0], atol=1e-9)
    # brute-force arccos on random pairs
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(200, 3)), rng.normal(size=(200, 3))
    cos = (x * y).sum(-1) / np.linalg.norm(x, axis=-1) / np.linalg.norm(y, axis=-1)
    np.testing.assert_allclose(angular_error_deg(x, y), np.degrees(np.arccos(cos)), atol=1e-6)


def test_angular_error_identical_is_zero_and_zero_vector_defined():
    v = torch.tensor([[0.3, -0.2, -0.9]], dtype=torch.float32)
    assert 0.0 <= angular_error_deg(v, v.clone()).item() < 1e-4  # arccos form: ~0.02
    py = torch.tensor([[0.1, 0.2]])
    assert angular_error_deg(py, py.clone()).item() == pytest.approx(0.0, abs=1e-5)
    z = np.zeros((1, 3))
    out = angular_error_deg(z, np.array([[0.0, 0.0, -1.0]]))
    assert out[0] == 90.0
    tz = angular_error_deg(torch.zeros(1, 3), torch.zeros(1, 3))
    assert tz.item() == 90.0


def test_angular_error_gradient_finite_at_identical_and_opposite():
    a = torch.tensor([[0.1, 0.2], [0.0, 0.0]], requires_grad=True)
    b = torch.tensor([[0.1, 0.2], [0.0, math.pi]])
    angular_error_deg(a, b).sum().backward()
    assert torch.isfinite(a.grad).all()
    v = torch.tensor([[0.0, 0.0, -1.0]], requires_grad=True)
    angular_error_deg(v, torch.tensor([[0.0, 0.0, -1.0]])).sum().backward()
    assert torch.isfinite(v.grad).all()
    # away from the singularity the gradient matches finite differences
    w = torch.tensor([[0.2, -0.1, -0.9]], dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[0.0, 0.3, -1.0]], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: angular_error_deg(x, target), (w,))


def test_angular_error_rejects_mixed_shapes():
    with pytest.raises(ConfigError):
        angular_error_deg(np.zeros((2, 2)), np.zeros((2, 3)))


def _camera(f=960.0, w=224, h=224):
    return np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1.0]])


def test_normalize_straight_ahead_is_identity():
    img = np.random.default_rng(0).integers(0, 255, (224, 224, 3), dtype=np.uint8)
    out = normalize_sample(img, _camera(), np.eye(3), [0, 0, 600.0], gaze_target=[0, 0, 0.0])
    np.testing.assert_allclose(out.R, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(out.S, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(out.W, np.eye(3), atol=1e-12)
    np.testing.assert_array_equal(out.image, img)
    np.testing.assert_allclose(out.gaze_pitchyaw, [0, 0], atol=1e-12)
    np.testing.assert_allclose(out.head_pose_pitchyaw, [0, 0], atol=1e-12)


def test_normalize_far_face_scales_z_and_zooms():
    img = np.zeros((224, 224), np.uint8)
    img[102:122, 102:122] = 255  # 20 px square at the centre
    out = normalize_sample(img, _camera(), np.eye(3), [0, 0, 1200.0], gaze_target=[0, -600, 0.0])
    np.testing.assert_allclose(out.S, np.diag([1, 1, 0.5]), atol=1e-12)
    np.testing.assert_allclose(out.R, np.eye(3), atol=1e-12)
    # halving the distance doubles the apparent size: the square is ~40 px wide
    assert abs(int((out.image[112] > 127).sum()) - 40) <= 2
    # gaze rotated by R only (= I here), not scaled: target 600 up and 1200 back -> atan(0.5)
    np.testing.assert_allclose(out.gaze_pitchyaw, [math.atan2(600, 1200), 0.0], atol=1e-12)


def test_normalize_off_axis_face_rotates_camera_and_gaze():
    # face 600 to the right at depth 600: virtual camera turned 45 degrees about y
    e = np.array([600.0, 0.0, 600.0])
    out = normalize_sample(np.zeros((100, 100, 3), np.uint8), _camera(), np.eye(3), e,
                           gaze_target=[0.0, 0.0, 0.0])
    c = math.sqrt(0.5)
    R_hand = np.array([[c, 0, -c], [0, 1, 0], [c, 0, c]])
    np.testing.assert_allclose(out.R, R_hand, atol=1e-12)
    np.testing.assert_allclose(out.S, np.diag([1, 1, 600 / np.linalg.norm(e)]), atol=1e-12)
    # the subject looks back at the camera: in the normalised camera that is (0, 0)
    np.testing.assert_allclose(out.gaze_pitchyaw, [0, 0], atol=1e-12)
    # a frontal head (H = I) seen from 45 degrees off axis has yaw -45 deg after normalisation
    np.testing.assert_allclose(out.head_pose_pitchyaw, [0, -math.pi / 4], atol=1e-12)


def test_normalize_head_roll_sets_camera_x_axis_and_rvec_equals_matrix():
    a = 0.3
    Rz = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
    out = normalize_sample(np.zeros((50, 50), np.uint8), _camera(), Rz, [0, 0, 600.0])
    np.testing.assert_allclose(out.R, Rz.T, atol=1e-12)  # camera rolls with the head
    assert out.gaze_pitchyaw is None
    out2 = normalize_sample(np.zeros((50, 50), np.uint8), _camera(), [0, 0, a], [0, 0, 600.0])
    np.testing.assert_allclose(out2.R, out.R, atol=1e-12)
    np.testing.assert_allclose(head_rotation_matrix([0, 0, a]), Rz, atol=1e-12)
