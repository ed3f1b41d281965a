"""The classifiers `optim train` builds (and so the studies): MLP, CNN (with BatchNorm), a
patch Transformer and a ResNet.

All are built by name from plain values through the ``CLASSIFIERS`` registry
(:func:`build_model`), so a run's config.json rebuilds them.
The Transformer (ours, ViT-style, Dosovitskiy et al. 2021) cuts the image into
``patch`` x ``patch`` patches (an 8 x 8 digit and patch 2 give 16 tokens), embeds them
linearly, adds learned position embeddings, applies ``depth`` pre-norm blocks of
multi-head self-attention and an MLP, and classifies the mean token. Attention is written
out (no fused kernels) so torch.func transforms (vmap, jvp) go through it.
The ResNet is the CIFAR ResNet of He et al. 2016 with basic blocks (3x3 stem, four stages
of ``depth`` blocks at width, 2x, 4x, 8x channels, strides 1, 2, 2, 2): width 64 and
depth 2 is ResNet-18 (11.2M parameters for 10 classes). Every parameter lives in a layer
(Linear, Conv2d, BatchNorm, LayerNorm, PositionEmbedding), as the per-layer per-sample
gradients (genlab.optim.measures.ghost) need, and every model's classifier is its ``head`` (what
fine-tuning replaces, see ``HEAD``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError, require_positive
from genlab.core.registry import Registry
from genlab.optim.measures.ghost_rules import additive_factors, register_rule


class MLP(nn.Module):
    def __init__(self, in_features: int, width: int, depth: int, num_classes: int):
        super().__init__()
        layers, d = [], in_features
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.net = nn.Sequential(*layers)
        self.head = nn.Linear(d, num_classes)

    def forward(self, x):
        return self.head(self.net(x.flatten(1)))


class CNN(nn.Module):
    """``depth`` 3x3 conv-BN-ReLU blocks (a 2x2 max-pool after the first), mean-pool, linear."""

    def __init__(self, in_channels: int, width: int, depth: int, num_classes: int):
        super().__init__()
        blocks, c = [], in_channels
        for i in range(depth):
            blocks += [nn.Conv2d(c, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                       nn.ReLU()]
            if i == 0:
                blocks.append(nn.MaxPool2d(2))
            c = width
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PositionEmbedding(nn.Module):
    """x + a learned (1, tokens, width) table."""

    def __init__(self, tokens: int, width: int):
        super().__init__()
        self.weight = nn.Parameter(0.02 * torch.randn(1, tokens, width))

    def forward(self, x):
        return x + self.weight


register_rule(PositionEmbedding, additive_factors)


class PatchTransformer(nn.Module):
    def __init__(self, in_channels: int, image_size: int, width: int, depth: int,
                 num_classes: int, patch: int = 2, heads: int = 2):
        super().__init__()
        if image_size % patch or width % heads:
            raise ConfigError(f"transformer: image size {image_size} must be divisible by the "
                              f"patch {patch} and width {width} by the heads {heads}")
        self.patch = patch
        tokens = (image_size // patch) ** 2
        self.embed = nn.Linear(in_channels * patch * patch, width)
        self.pos = PositionEmbedding(tokens, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        p = F.unfold(x, self.patch, stride=self.patch).transpose(1, 2)  # (b, tokens, c*p*p)
        h = self.blocks(self.pos(self.embed(p)))
        return self.head(self.norm(h).mean(1))


class BasicBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus the (projected when the shape changes) input, ReLU."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                          nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, in_channels: int, width: int, depth: int, num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        stages, c = [], width
        for i, mult in enumerate((1, 2, 4, 8)):
            for j in range(depth):
                stride = 2 if (i > 0 and j == 0) else 1
                stages.append(BasicBlock(c, width * mult, stride))
                c = width * mult
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(c, num_classes)

    def forward(self, x):
        return self.head(self.stages(self.stem(x)).mean(dim=(2, 3)))


HEAD = "head"  # the classifier's name in every model's state_dict (``head.weight``, ...)

#: name -> builder(in_channels, image_size, width, depth, num_classes)
CLASSIFIERS: Registry[Callable[..., nn.Module]] = Registry("classifier architecture")
CLASSIFIERS.register("mlp", lambda c, s, w, d, k: MLP(c * s * s, w, d, k))
CLASSIFIERS.register("cnn", lambda c, s, w, d, k: CNN(c, w, d, k))
CLASSIFIERS.register("transformer", lambda c, s, w, d, k: PatchTransformer(c, s, w, d, k))
CLASSIFIERS.register("resnet", lambda c, s, w, d, k: ResNet(c, w, d, k))
ARCHS = CLASSIFIERS.names()


def build_model(arch: str, width: int, depth: int, *, in_channels: int = 1, image_size: int = 8,
                num_classes: int = 10) -> nn.Module:
    """A classifier by name (see CLASSIFIERS) with ``depth`` hidden layers/blocks per stage."""
    builder = CLASSIFIERS.get(arch)
    require_positive("width", width)
    require_positive("depth", depth)
    return builder(in_channels, image_size, width, depth, num_classes)
