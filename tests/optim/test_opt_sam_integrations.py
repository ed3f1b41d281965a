"""SAM with AMP (GradScaler) and DistributedDataParallel: the documented recipes run and agree."""

import torch
import torch.distributed as dist
from torch import nn

from genlab.optim import SAM, disable_sync


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(32, 6, generator=g), torch.randint(0, 3, (32,), generator=g)


def _fp32_update():
    net = _net()
    x, y = _batch()
    w0 = torch.cat([p.detach().flatten() for p in net.parameters()])
    opt = SAM(net.parameters(), rho=0.05, lr=0.1)

    def closure():
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        return loss

    opt.step(closure)
    return torch.cat([p.detach().flatten() for p in net.parameters()]) - w0


def test_amp_gradscaler_recipe_matches_fp32_direction():
    net = _net()
    x, y = _batch()
    w0 = torch.cat([p.detach().flatten() for p in net.parameters()])
    opt = SAM(net.parameters(), rho=0.05, lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    # the recipe of docs/optimizers.md
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(net(x), y)
    scaler.scale(loss).backward()
    opt.first_step(zero_grad=True)          # direction is invariant to the loss scale
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss2 = nn.functional.cross_entropy(net(x), y)
    scaler.scale(loss2).backward()
    opt.restore()                           # w back before the (possibly skipped) step
    scaler.step(opt)                        # unscales, skips on inf, else opt.step()
    scaler.update()
    update = torch.cat([p.detach().flatten() for p in net.parameters()]) - w0
    ref = _fp32_update()
    cos = torch.nn.functional.cosine_similarity(update, ref, dim=0)
    assert cos > 0.99
    assert update.norm() / ref.norm() > 0.95 and update.norm() / ref.norm() < 1.05


def test_non_finite_first_gradient_gives_no_perturbation():
    net = _net()
    w0 = [p.detach().clone() for p in net.parameters()]
    opt = SAM(net.parameters(), rho=0.05, lr=0.1)
    for p in net.parameters():
        p.grad = torch.full_like(p, float("inf"))
    opt.first_step()
    for p, w in zip(net.parameters(), w0, strict=True):
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=0)
    opt.restore()


def test_ddp_single_process_matches_plain(tmp_path):
    x, y = _batch()
    dist.init_process_group("gloo", rank=0, world_size=1,
                            init_method=f"file://{tmp_path / 'rendezvous'}")
    try:
        net = _net()
        ddp = nn.parallel.DistributedDataParallel(net)
        assert disable_sync(ddp) is not None and disable_sync(net).__class__.__name__ == (
            "nullcontext")
        opt = SAM(ddp.parameters(), rho=0.05, lr=0.1, model=ddp)
        calls = []
        original = ddp.no_sync

        def counting_no_sync():
            calls.append(1)
            return original()

        ddp.no_sync = counting_no_sync

        def closure():
            loss = nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            return loss

        w0 = torch.cat([p.detach().flatten() for p in net.parameters()])
        opt.step(closure)
        update = torch.cat([p.detach().flatten() for p in net.parameters()]) - w0
    finally:
        dist.destroy_process_group()
    assert calls == [1]                      # only the first pass skipped the all-reduce
    torch.testing.assert_close(update, _fp32_update(), rtol=1e-5, atol=1e-7)
