"""One check for both cell spaces: a fused supernet's step equals its per-edge twin's."""

import torch
import torch.nn.functional as F


def assert_same_step(ours, ref, check_grads, *, classes: int = 5) -> tuple:
    """On the same float64 input and drop-path draws: the training logits, every gradient
    (``check_grads(ours, ref)`` after one backward each) and the evaluation logits (the BN
    running statistics after the step) agree; returns the input and the fused training
    logits."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 1, 8, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, classes, (8,), generator=g)
    torch.manual_seed(7)  # the same drop-path masks in both layouts
    lo = ours(x)
    torch.manual_seed(7)
    lr = ref(x)
    torch.testing.assert_close(lo, lr, atol=1e-10, rtol=1e-9)
    F.cross_entropy(lo, y).backward()
    F.cross_entropy(lr, y).backward()
    check_grads(ours, ref)
    ours.eval()
    ref.eval()
    torch.testing.assert_close(ours(x), ref(x), atol=1e-10, rtol=1e-9)
    return x, lo
