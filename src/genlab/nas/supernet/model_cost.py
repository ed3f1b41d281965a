"""The size of a network: its parameters and its multiply-adds.

- ``parameter_counts(model)``: (trained, inference): every trainable parameter, and those
  outside a child module named ``auxiliary`` (an auxiliary head trains but is not deployed,
  so the size a paper reports leaves it out);
- ``count_macs(model, size)``: multiply-adds of one ``size`` x ``size`` RGB image in eval
  mode (an auxiliary head is idle then), counted by forward hooks on Conv2d and Linear
  layers: a conv costs (output elements) x (input channels / groups) x kernel area, a linear
  layer (output elements) x (input features); BatchNorm, activations, pooling and additions
  are not counted (the "multi-adds" convention of the NAS papers). FLOPs are about twice that.
"""

from __future__ import annotations

import torch
from torch import nn


def parameter_counts(model: nn.Module) -> tuple[int, int]:
    """(trainable parameters, those outside the auxiliary head)."""
    params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    trained = sum(p.numel() for _, p in params)
    inference = sum(p.numel() for name, p in params if "auxiliary" not in name)
    return trained, inference


def count_macs(model: nn.Module, size: int, in_channels: int = 3) -> int:
    """Multiply-adds of one forward pass of a ``size`` x ``size`` image in eval mode."""
    total = [0]

    def conv_hook(module: nn.Conv2d, inputs, output):
        kh, kw = module.kernel_size
        per_output = (module.in_channels // module.groups) * kh * kw
        total[0] += output.numel() // output.shape[0] * per_output

    def linear_hook(module: nn.Linear, inputs, output):
        total[0] += output.numel() // output.shape[0] * module.in_features

    hooks = []
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            hooks.append(module.register_forward_hook(conv_hook))
        elif isinstance(module, nn.Linear):
            hooks.append(module.register_forward_hook(linear_hook))
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    try:
        with torch.no_grad():
            model(torch.zeros(1, in_channels, size, size, device=device))
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    return total[0]
