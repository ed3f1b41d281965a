"""The backbone is torchvision's ResNet-18 (width 64, imagenet stem) and loads its state dicts."""

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from genlab.core.errors import CheckpointError
from genlab.gaze.models.backbones import IMAGENET_MEAN, IMAGENET_STD, ResNetBackbone
from tests.gaze.conftest import torchvision_resnet18_state


def reference_features(state: dict, x: torch.Tensor) -> torch.Tensor:
    """ResNet-18 features (before fc) computed functionally from the state dict."""
    def bn(h, p):
        return F.batch_norm(h, state[f"{p}.running_mean"], state[f"{p}.running_var"],
                            state[f"{p}.weight"], state[f"{p}.bias"], False, 0.0, 1e-5)

    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    h = F.conv2d((x - mean) / std, state["conv1.weight"], stride=2, padding=3)
    h = F.max_pool2d(torch.relu(bn(h, "bn1")), 3, 2, 1)
    for i in range(1, 5):
        for b in range(2):
            p = f"layer{i}.{b}"
            stride = 2 if (b == 0 and i > 1) else 1
            out = torch.relu(bn(F.conv2d(h, state[f"{p}.conv1.weight"], stride=stride,
                                         padding=1), f"{p}.bn1"))
            out = bn(F.conv2d(out, state[f"{p}.conv2.weight"], padding=1), f"{p}.bn2")
            short = h
            if f"{p}.downsample.0.weight" in state:
                short = bn(F.conv2d(h, state[f"{p}.downsample.0.weight"], stride=stride),
                           f"{p}.downsample.1")
            h = torch.relu(out + short)
    return h.mean(dim=(2, 3))


def test_torchvision_layout_state_dict_loads_and_computes_resnet18(tmp_path):
    state = torchvision_resnet18_state()
    assert len(state) == 122  # torchvision's resnet18 state dict has 122 entries
    path = tmp_path / "resnet18.pth"
    torch.save(state, path)
    net = ResNetBackbone(64, stem="imagenet", input_norm="imagenet")
    loaded = net.load_pretrained(path)
    assert set(loaded) == set(state) - {"fc.weight", "fc.bias"}
    for k, v in net.state_dict().items():
        assert torch.equal(v, state[k]), k
    x = torch.rand(2, 3, 64, 48)
    with torch.no_grad():
        got = net.eval()(x)
        want = reference_features(state, x)
    assert got.shape == (2, 512)
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)


def test_wrapped_and_prefixed_state_dicts_load(tmp_path):
    state = torchvision_resnet18_state(seed=1)
    path = tmp_path / "wrapped.pth"
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}}, path)
    net = ResNetBackbone(64, stem="imagenet", input_norm="imagenet")
    net.load_pretrained(path)
    assert torch.equal(net.layer3[0].downsample[0].weight, state["layer3.0.downsample.0.weight"])


def test_bad_pretrained_files_name_file_key_and_shape(tmp_path):
    net = ResNetBackbone(64, stem="imagenet")
    with pytest.raises(CheckpointError, match="no such"):
        net.load_pretrained(tmp_path / "absent.pth")
    (tmp_path / "junk.pth").write_bytes(b"not a torch file")
    with pytest.raises(CheckpointError, match="junk.pth"):
        net.load_pretrained(tmp_path / "junk.pth")
    state = torchvision_resnet18_state()
    del state["layer2.0.downsample.0.weight"]
    torch.save(state, tmp_path / "missing.pth")
    with pytest.raises(CheckpointError, match="layer2.0.downsample.0.weight"):
        net.load_pretrained(tmp_path / "missing.pth")
    torch.save(torchvision_resnet18_state(width=64), tmp_path / "r18.pth")
    small = ResNetBackbone(16)  # the default small stem and width
    with pytest.raises(CheckpointError, match=r"conv1.weight has shape \(64, 3, 7, 7\)"):
        small.load_pretrained(tmp_path / "r18.pth")
    torch.save([1, 2, 3], tmp_path / "list.pth")
    with pytest.raises(CheckpointError, match="state dict"):
        net.load_pretrained(tmp_path / "list.pth")


def test_width_64_imagenet_stem_is_torchvision_resnet18_without_fc(tmp_path):
    import torchvision

    ref = torchvision.models.resnet18(weights=None).eval()
    net = ResNetBackbone(64, stem="imagenet", input_norm="imagenet").eval()
    ref_state = {k: v for k, v in ref.state_dict().items() if not k.startswith("fc.")}
    assert list(net.state_dict()) == list(ref_state)
    assert all(net.state_dict()[k].shape == v.shape for k, v in ref_state.items())
    path = tmp_path / "resnet18.pth"
    torch.save(ref.state_dict(), path)  # a torchvision state dict, fc.* included
    assert set(net.load_pretrained(path)) == set(ref_state)
    for k, v in net.state_dict().items():
        assert torch.equal(v, ref_state[k]), k
    ref.fc = torch.nn.Identity()
    x = torch.rand(2, 3, 64, 48)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    with torch.no_grad():
        got = net(x)
        want = ref((x - mean) / std)
    assert got.shape == want.shape == (2, 512)
    assert torch.allclose(got, want, atol=1e-6, rtol=1e-5)


def test_importing_gaze_and_the_cli_does_not_import_torchvision():
    code = ("import sys, genlab.gaze, genlab.cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torchvision'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
