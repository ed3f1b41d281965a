"""The MobileNet-like space (ProxylessNAS layout, Cai et al. ICLR-19; mit-han-lab/proxylessnas).

Layout (width multiplier 1, ImageNet): Conv3x3(3->32, stride 2)+BN+ReLU6; a fixed 3x3 MBConv1
(32->16, no shortcut); 6 stages of (width, blocks, first stride) = (24,4,2), (40,4,2), (80,4,2),
(96,4,1), (192,4,2), (320,1,1): 21 searchable blocks; Conv1x1(->1280)+BN+ReLU6; global
average pool; Linear. The first block of each stage (a "transition": its width or stride
changes) chooses among 6 MBConvs, kernel {3, 5, 7} x expansion {3, 6}; the other 15 blocks
("skippable") also offer `zero`, skipping the block. MBConv(k, e): Conv1x1(->e*C_in)+BN+ReLU6
(absent when e = 1), depthwise k x k (stride)+BN+ReLU6, Conv1x1(->C_out)+BN; a skippable
block adds its input (shortcut). BN eps 1e-3 as upstream. Widths are
make_divisible(w * C / 32, 8) for a first width C (``channels``); the last conv keeps 1280
channels unless C > 32. ``stem="cifar"`` gives the first conv stride 1 (CIFAR-sized inputs).

Search (DARTS-style, as the DARTS-robustness papers use this space): every searchable block is
a weighted sum over its choices, sum_k softmax(alpha)_k block_k(x), with the shortcut of the
skippable blocks (so `zero` contributes the identity) and candidate BNs without affine
parameters; alphas "skippable" (15, 7; columns the 6 MBConvs then zero) and "transition"
(6, 6). Block structure is fixed by position, also at widths where a transition block happens
to keep its shape. Derivation: argmax per block. Genotype: the 21 choices in block order.

The methods' supernet options, our extension of them to this space (docs/nas_methods.md):
``partial_channels=K`` (PC-DARTS): a skippable block's mixture (shortcut included) runs on
its first C/K channels (MBConvs built at C/K), the rest bypassed, concatenated and
channel-shuffled with K groups; transition blocks change width and stay whole.
``aux_skip`` (DARTS-): a skippable block adds beta x x (its input) on top of its own shortcut,
so at beta = 0 the plain supernet; transition blocks have no identity and add nothing.
``sampled`` (GDAS): in training only the drawn block runs, the other choices' weights added
as scalars (NB201's ``forward_gdas``); ``drop_path`` (R-DARTS): drop-path on a skippable
block's mixed residual branch (never on the shortcut, nor on transition blocks, whose output
is the only path). Edge normalisation is the identity here: a block has one input, and a
softmax over one beta is 1 (so ``edge_norm`` is accepted and adds no parameter).

Backbone taps (``mobilenet_feature_layout``, genlab.nas.spaces.backbone): the fixed first
block's map and the end of every stage before a stride-2 stage and of the last one: widths
16, 24, 40, 96, 320 at strides 2, 4, 8, 16, 32 (ImageNet stem); the last three by default.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from genlab.core.errors import ConfigError, SpecError, require_positive_ints
from genlab.nas.spaces.base import AlphaSupernet, FeatureLayout, FeatureTap
from genlab.nas.supernet.cells import EdgeKnobs, channel_shuffle, drop_path, others_sum
from genlab.nas.supernet.probe import CellTrace, Probe

MB_OPS = ("3x3_MBConv3", "3x3_MBConv6", "5x5_MBConv3", "5x5_MBConv6", "7x7_MBConv3",
          "7x7_MBConv6")
ZERO = "zero"
SKIPPABLE_OPS = MB_OPS + (ZERO,)
STAGES = ((24, 4, 2), (40, 4, 2), (80, 4, 2), (96, 4, 1), (192, 4, 2), (320, 1, 1))
NUM_BLOCKS = sum(n for _, n, _ in STAGES)
BN_EPS = 1e-3
STEMS = {"imagenet": 2, "cifar": 1}


def make_divisible(v: float, divisor: int = 8) -> int:
    """Round to a multiple of ``divisor``, never below 90% of ``v`` (ProxylessNAS, MobileNetV2)."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def op_shape(name: str) -> tuple[int, int]:
    """(kernel, expansion) of an MBConv name such as '5x5_MBConv6'."""
    return int(name[0]), int(name[-1])


@dataclass(frozen=True)
class Block:
    """One searchable block: its widths, stride and whether it may be skipped."""

    index: int
    c_in: int
    c_out: int
    stride: int
    skippable: bool

    @property
    def ops(self) -> tuple[str, ...]:
        return SKIPPABLE_OPS if self.skippable else MB_OPS


def layout(channels: int = 32) -> tuple[int, int, list[Block]]:
    """(first-conv width, first-block width, the 21 searchable blocks) for a first width."""
    mult = channels / 32
    first = make_divisible(32 * mult)
    c16 = c = make_divisible(16 * mult)
    blocks = []
    for width, n, stride in STAGES:
        out = make_divisible(width * mult)
        for i in range(n):
            blocks.append(Block(len(blocks), c, out, stride if i == 0 else 1, skippable=i > 0))
            c = out
    return first, c16, blocks


def last_channels(channels: int) -> int:
    return make_divisible(1280 * channels / 32) if channels > 32 else 1280


class MBConv(nn.Module):
    """Inverted residual conv of one choice (no shortcut here: the block adds it)."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, expand: int,
                 affine: bool = True):
        super().__init__()
        mid = round(c_in * expand)
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(c_in, mid, 1, bias=False),
                       nn.BatchNorm2d(mid, eps=BN_EPS, affine=affine), nn.ReLU6(inplace=True)]
        layers += [nn.Conv2d(mid, mid, kernel, stride, kernel // 2, groups=mid, bias=False),
                   nn.BatchNorm2d(mid, eps=BN_EPS, affine=affine), nn.ReLU6(inplace=True),
                   nn.Conv2d(mid, c_out, 1, bias=False),
                   nn.BatchNorm2d(c_out, eps=BN_EPS, affine=affine)]
        self.op = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


def build_mb_op(name: str, c_in: int, c_out: int, stride: int, affine: bool) -> nn.Module:
    """The op registry of this space: factories (C_in, C_out, stride, affine)."""
    if name not in MB_OPS:
        raise ConfigError(f"unknown MobileNet op {name!r}; expected one of: {', '.join(MB_OPS)}")
    k, e = op_shape(name)
    return MBConv(c_in, c_out, k, stride, e, affine)


class _Skeleton(nn.Module):
    """Stem, fixed first block, feature mix and classifier around the searchable blocks."""

    def _build_skeleton(self, channels: int, num_classes: int, in_channels: int,
                        stem: str) -> list[Block]:
        if stem not in STEMS:
            raise ConfigError(f"unknown stem {stem!r}; expected one of: {', '.join(STEMS)}")
        require_positive_ints(channels=channels, num_classes=num_classes,
                              in_channels=in_channels)
        first, c16, blocks = layout(channels)
        self.first_conv = nn.Sequential(
            nn.Conv2d(in_channels, first, 3, STEMS[stem], 1, bias=False),
            nn.BatchNorm2d(first, eps=BN_EPS), nn.ReLU6(inplace=True))
        self.first_block = MBConv(first, c16, 3, 1, 1)
        last = last_channels(channels)
        self.feature_mix = nn.Sequential(nn.Conv2d(blocks[-1].c_out, last, 1, bias=False),
                                         nn.BatchNorm2d(last, eps=BN_EPS), nn.ReLU6(inplace=True))
        self.classifier = nn.Linear(last, num_classes)
        return blocks

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.feature_mix(h).mean(dim=(2, 3)))


class MobileNetSuperNet(_Skeleton, AlphaSupernet):
    """The DARTS-style supernet of the space (module docstring)."""

    def __init__(self, channels: int = 32, num_classes: int = 10, in_channels: int = 3,
                 stem: str = "imagenet", init_scale: float = 1e-3, partial_channels: int = 1,
                 aux_skip: bool = False, sampled: bool = False, drop_path: bool = False):
        super().__init__()
        require_positive_ints(partial_channels=partial_channels)
        self.blocks_spec = self._build_skeleton(channels, num_classes, in_channels, stem)
        k = partial_channels
        bad = [b.c_in for b in self.blocks_spec if b.skippable and b.c_in % k]
        if bad:
            raise ConfigError(f"partial channels {k} must divide the widths of the skippable "
                              f"blocks (got {bad[0]})")
        self.partial_channels, self.aux_skip = k, bool(aux_skip)
        self.sampled, self.drop_path = bool(sampled), bool(drop_path)
        self.knobs = EdgeKnobs()
        self.blocks = nn.ModuleList(
            nn.ModuleList(build_mb_op(op, b.c_in // (k if b.skippable else 1),
                                      b.c_out // (k if b.skippable else 1), b.stride,
                                      affine=False)
                          for op in MB_OPS) for b in self.blocks_spec)
        skippable = [b for b in self.blocks_spec if b.skippable]
        self.alphas_skippable = nn.Parameter(
            init_scale * torch.randn(len(skippable), len(SKIPPABLE_OPS)))
        self.alphas_transition = nn.Parameter(
            init_scale * torch.randn(NUM_BLOCKS - len(skippable), len(MB_OPS)))

    def alphas(self) -> dict[str, nn.Parameter]:
        return {"skippable": self.alphas_skippable, "transition": self.alphas_transition}

    def set_knobs(self, aux_scale: float | None = None, drop_prob: float | None = None) -> None:
        """DARTS-' beta and R-DARTS' drop-path probability of this step."""
        self.knobs.set(aux_scale, drop_prob)

    def _block(self, h: torch.Tensor, ops, w: torch.Tensor, skippable: bool, report):
        """One searchable block with the supernet's options (module docstring)."""
        if not skippable:
            return self._mix(h, ops, w, False, report)
        k = self.partial_channels
        part = h[:, :h.shape[1] // k] if k > 1 else h
        out = self._mix(part, ops, w, True, report)
        if k > 1:
            out = channel_shuffle(torch.cat([out, h[:, h.shape[1] // k:]], dim=1), k)
        if self.aux_skip:
            out = out + h * self.knobs.aux_scale
        return out

    def _mix(self, x: torch.Tensor, ops, w: torch.Tensor, skippable: bool, report):
        if self.sampled and self.training:  # GDAS: only the drawn choice runs
            i = int(w.argmax())
            out = x if i == len(ops) else ops[i](x) + (x if skippable else 0)
            if report is not None:
                report(i, out.detach())
            return w[i] * out + others_sum(w, i)
        if not (skippable and self.drop_path and self.training):
            return mixed_block(x, ops, w, skippable, report)
        branch = mixed_block(x, ops, w, False, report)  # sum_{k < 6} w_k op_k(x)
        return x + drop_path(branch, self.knobs.drop_prob)

    def forward(self, x: torch.Tensor, probe: Probe | None = None) -> torch.Tensor:
        weights = self.mixing_weights()
        h = self.first_block(self.first_conv(x))
        rows = {"skippable": 0, "transition": 0}
        for block, ops in zip(self.blocks_spec, self.blocks, strict=True):
            name = "skippable" if block.skippable else "transition"
            row = rows[name]
            rows[name] += 1
            w = weights[name][row]
            report = None
            if probe is not None and probe.wants_ops:
                report = functools.partial(probe.op, name, block.index, row)
            out = self.run_cell(ops, self._block, h, ops, w, block.skippable, report,
                                rerun=report is None)
            if probe is not None:
                probe.node(CellTrace(name, block.index, (h,), (out,), out))
            h = out
        return self._head(h)


def mixed_block(x: torch.Tensor, ops: Sequence[nn.Module], w: torch.Tensor, skippable: bool,
                report=None) -> torch.Tensor:
    """sum_k w_k block_k(x); skippable: block_k = op_k(x) + x and zero = x, so the sum is
    x + sum_{k < 6} w_k op_k(x) (the weights sum to 1)."""
    outs = [op(x) for op in ops]
    if report is not None:
        for k, out in enumerate(outs):
            report(k, (out + x if skippable else out).detach())
        if skippable:
            report(len(outs), x.detach())
    mixed = sum(wk * out for wk, out in zip(w, outs, strict=False))
    return x + mixed if skippable else mixed


# -- genotype -----------------------------------------------------------------------------
@dataclass(frozen=True)
class MobileNetGenotype:
    """The choice of each of the 21 searchable blocks, in block order."""

    blocks: tuple[str, ...]

    def to_string(self) -> str:
        return ",".join(self.blocks)

    __str__ = to_string


def parse_mobilenet_genotype(text: str) -> MobileNetGenotype:
    """Comma-separated choices ('3x3_MBConv6,zero,...'; brackets and quotes are ignored)."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError("empty MobileNet genotype; expected 21 comma-separated choices such as "
                        "'3x3_MBConv3,zero,5x5_MBConv6,...'")
    tokens = [t.strip().strip("'\"") for t in text.strip().strip("[]()").split(",")]
    if tokens and tokens[-1] == "":
        tokens = tokens[:-1]
    _, _, blocks = layout()
    if len(tokens) != NUM_BLOCKS:
        raise SpecError(f"MobileNet genotype {text!r} has {len(tokens)} choice(s); expected "
                        f"{NUM_BLOCKS}, one per searchable block")
    for block, token in zip(blocks, tokens, strict=True):
        if token not in block.ops:
            kind = "skippable" if block.skippable else "width-changing (no zero)"
            raise SpecError(f"choice {token!r} of block {block.index} ({kind}) is not in the "
                            f"MobileNet space; expected one of: {', '.join(block.ops)}")
    return MobileNetGenotype(tuple(tokens))


def derive_mobilenet_genotype(alphas: dict[str, torch.Tensor]) -> MobileNetGenotype:
    """Argmax per block over all its choices (ProxylessNAS)."""
    best = {name: a.detach().float().argmax(dim=-1).tolist() for name, a in alphas.items()}
    rows = {"skippable": iter(best["skippable"]), "transition": iter(best["transition"])}
    choices = []
    for block in layout()[2]:
        k = next(rows["skippable" if block.skippable else "transition"])
        choices.append(block.ops[k])
    return MobileNetGenotype(tuple(choices))


class MobileNetNetwork(_Skeleton):
    """The discrete network of a genotype: chosen MBConvs, skipped `zero` blocks."""

    def __init__(self, genotype: MobileNetGenotype, num_classes: int, channels: int = 32,
                 in_channels: int = 3, stem: str = "imagenet"):
        super().__init__()
        self.genotype = genotype
        self.blocks_spec = self._build_skeleton(channels, num_classes, in_channels, stem)
        self.blocks = nn.ModuleList(
            nn.Identity() if op == ZERO else build_mb_op(op, b.c_in, b.c_out, b.stride, True)
            for b, op in zip(self.blocks_spec, genotype.blocks, strict=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.first_block(self.first_conv(x))
        for block, op in zip(self.blocks_spec, self.blocks, strict=True):
            if isinstance(op, nn.Identity):
                continue
            out = op(h)
            h = out + h if block.skippable else out
        return self._head(h)


def mobilenet_feature_layout(net: MobileNetNetwork) -> FeatureLayout:
    """A MobileNet-like network as a backbone (module docstring): step 0 is the first
    block's output, step i + 1 block i's (its shortcut added)."""
    specs = net.blocks_spec
    stride = net.first_conv[0].stride[0]
    taps = [FeatureTap(0, net.first_block.op[-1].num_features, stride, "first_block")]
    for i, block in enumerate(specs):
        stride *= block.stride
        if i == len(specs) - 1 or specs[i + 1].stride > 1:
            taps.append(FeatureTap(i + 1, block.c_out, stride, f"blocks.{i}"))

    def keep(last: int) -> dict[str, nn.Module]:
        return {"first_conv": net.first_conv, "first_block": net.first_block,
                **({"blocks": net.blocks[:last]} if last else {})}

    return FeatureLayout(net, tuple(taps), tuple(range(len(taps) - 3, len(taps))),
                         ("feature_mix", "classifier"), keep,
                         functools.partial(_mobilenet_steps,
                                           skippable=tuple(b.skippable for b in specs)))


def _mobilenet_steps(m: nn.Module, x: torch.Tensor, skippable: tuple[bool, ...]):
    """The first block's map, then the output of every kept block (the network's forward)."""
    h = m.first_block(m.first_conv(x))
    yield h
    for op, skip in zip(getattr(m, "blocks", ()), skippable, strict=False):
        if not isinstance(op, nn.Identity):
            out = op(h)
            h = out + h if skip else out
        yield h
