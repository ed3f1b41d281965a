"""The accelerator plumbing of core, on CPU where it can be, on CUDA when there is one.

bf16 and fp16 autocast run on CPU too (torch supports both), so precision, loss scaling
and their checkpoints are tested here; CUDA-only checks skip cleanly without a GPU.
"""

import pytest
import torch
from torch import nn

from genlab.core.amp import make_precision
from genlab.core.data import Batches, Split, load_digits_data
from genlab.core.devices import module_device, resolve_device
from genlab.core.errors import ConfigError
from genlab.core.runs import RunDir
from genlab.core.seeding import (
    capture_rng_state,
    generator_for,
    make_generator,
    restore_rng_state,
)
from genlab.core.trainer import Trainer

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _conv_trainer(seed=0, **kw):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return Trainer(model, opt, nn.CrossEntropyLoss(), seed=0, progress_bar=False, **kw)


@pytest.fixture(scope="module")
def batches():
    data = load_digits_data()
    return Batches(Split(data.train.images[:256], data.train.labels[:256]), 32, seed=0)


def _final_loss(trainer, batches, epochs=3):
    return trainer.fit(batches.epoch, epochs).history[-1]["train_loss"]


def test_bf16_and_fp16_train_like_float32(batches):
    fp32 = _final_loss(_conv_trainer(), batches)
    for amp in ("bf16", "fp16"):
        low = _final_loss(_conv_trainer(amp=amp), batches)
        assert low == pytest.approx(fp32, rel=0.05), (amp, low, fp32)
    assert _conv_trainer(amp="fp16").precision.scaler is not None
    assert _conv_trainer(amp="bf16").precision.scaler is None


def test_autocast_reaches_the_forward_pass():
    t = _conv_trainer(amp="bf16")
    seen = {}
    t.model[0].register_forward_hook(lambda m, i, o: seen.update(dtype=o.dtype))
    t.step(torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 3]))
    assert seen["dtype"] == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in t.model.parameters())  # master weights


def test_fp16_scaler_state_is_checkpointed_and_resume_is_exact(tmp_path, batches):
    full = _conv_trainer(amp="fp16")
    full.fit(batches.epoch, 3, run=RunDir(tmp_path / "a", {"x": 1}))
    part = _conv_trainer(amp="fp16")
    part.fit(batches.epoch, 1, run=RunDir(tmp_path / "b", {"x": 1}))
    run = RunDir(tmp_path / "b", {"x": 1}, resume=True)
    assert run.resumed_state["amp"]["scale"] == part.precision.scaler.get_scale()
    resumed = _conv_trainer(seed=3, amp="fp16")
    resumed.fit(batches.epoch, 3, run=run)
    for p, q in zip(full.model.state_dict().values(), resumed.model.state_dict().values(),
                    strict=True):
        assert torch.equal(p, q)
    assert resumed.precision.scaler.get_scale() == full.precision.scaler.get_scale()


def test_fp16_skips_a_step_whose_gradients_overflow():
    t = _conv_trainer(amp="fp16")
    before = [p.detach().clone() for p in t.model.parameters()]
    t.loss_fn = lambda out, y: nn.functional.cross_entropy(out, y) * 1e30  # inf once scaled
    t.step(torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 3]))
    assert all(torch.equal(a, p) for a, p in zip(before, t.model.parameters(), strict=True))
    assert t.precision.scaler.get_scale() == 65536.0 * 0.5  # backed off


def test_bad_precision_options():
    with pytest.raises(ConfigError, match="unknown amp 'int8'"):
        make_precision("int8")

    class NeedsClosure(torch.optim.SGD):
        requires_closure = True

    model = nn.Linear(2, 1)
    p = make_precision("fp16")
    with pytest.raises(ConfigError, match="fp16 cannot drive NeedsClosure"):
        p.step(NeedsClosure(model.parameters(), lr=0.1), lambda: model(torch.ones(1, 2)).sum())


def test_channels_last_same_training_and_layout(batches):
    plain = _conv_trainer()
    plain.fit(batches.epoch, 2)
    nhwc = _conv_trainer(channels_last=True)
    seen = {}
    nhwc.model[0].register_forward_pre_hook(
        lambda m, i: seen.update(nhwc=i[0].is_contiguous(memory_format=torch.channels_last)))
    nhwc.fit(batches.epoch, 2)
    assert seen["nhwc"]
    assert nhwc.model[0].weight.is_contiguous(memory_format=torch.channels_last)
    for p, q in zip(plain.model.parameters(), nhwc.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-5)


def test_generators_follow_a_device_and_streams_are_stable():
    a = torch.rand(5, generator=make_generator(3, 1, 2))
    b = torch.rand(5, generator=make_generator(3, 1, 2, device="cpu"))
    c = torch.rand(5, generator=generator_for(torch.zeros(1), 3, 1, 2))
    assert torch.equal(a, b) and torch.equal(a, c)
    assert not torch.equal(a, torch.rand(5, generator=make_generator(3, 1, 3)))
    assert module_device(nn.Linear(2, 2)) == torch.device("cpu")
    assert module_device(nn.ReLU(), default="cpu") == torch.device("cpu")


def test_rng_state_with_cuda_entries_restores_on_a_cpu_machine(tmp_path):
    state = capture_rng_state()
    state["cuda"] = [torch.zeros(16, dtype=torch.uint8)]  # as written on a GPU machine
    path = tmp_path / "s.pt"
    torch.save(state, path)
    loaded = torch.load(path, weights_only=True)
    expected = torch.rand(3)
    restore_rng_state(loaded)
    if not torch.cuda.is_available():
        assert torch.equal(torch.rand(3), expected)


def test_cuda_device_is_refused_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ConfigError, match="no CUDA device"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")


@cuda
def test_cuda_rng_state_round_trip_and_device_generator():
    torch.cuda.init()
    state = capture_rng_state()
    assert "cuda" in state and len(state["cuda"]) == torch.cuda.device_count()
    expected = torch.rand(4, device="cuda")
    restore_rng_state(state)
    assert torch.equal(torch.rand(4, device="cuda"), expected)
    g = make_generator(1, 2, device="cuda")
    probs = torch.tensor([0.1, 0.9], device="cuda")
    assert torch.multinomial(probs, 1, generator=g).device.type == "cuda"


@cuda
def test_cuda_training_matches_cpu_on_a_small_case(batches):
    cpu = _final_loss(_conv_trainer(), batches, epochs=2)
    gpu = _final_loss(_conv_trainer(device="cuda"), batches, epochs=2)
    assert gpu == pytest.approx(cpu, rel=1e-3)
