"""Searched networks as detection backbones, in timm's ``features_only`` convention.

``build_backbone(space, genotype, out_indices=None, channels=None, cells=None, in_channels=3,
weights=None, options=None)`` builds the space's discrete network with its own builder, keeps
its stem and stages up to the last requested tap (never its classifier or auxiliary head) and
returns a ``Backbone``: ``forward(x)`` gives the list of stage features in ``out_indices``
order, ``feature_info`` their channels and reductions (``channels()``, ``reduction()``,
``module_name()``, ``out_indices``; a list of ``{'num_chs', 'reduction', 'module'}`` dicts
underneath, as timm's FeatureInfo), so ``feature_info.channels()`` is what torchvision's
``FeaturePyramidNetwork(in_channels_list=...)`` takes.

Each space says how its network yields stages (``SearchSpace.feature_layout``, a
``FeatureLayout``; spaces.base): the DARTS family (darts, darts-7op, s1-s4) the ImageNet
evaluation network (C=48, 14 cells; taps stem0 at stride 4, cells 3, 8, 13 at strides 8, 16,
32, the default), mobilenet the ProxylessNAS layout (taps 16, 24, 40, 96, 320 channels at
strides 2-32; default the last three), nb201 its three stages (strides 1, 2, 4). The modules
keep the network's names, so a backbone's state-dict keys are the network's.

Weights: ``Backbone.load_network_state(state)`` (or ``weights=``) takes the whole network's
state dict, a checkpoint dict holding it (``genlab nas train``'s checkpoint.pt: the entry its
model record names), a checkpoint file or a run folder; the head keys (and those of stages
after the last tap) are dropped, every other key must match (CheckpointError naming it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import nn

from genlab.core.errors import CheckpointError, ConfigError
from genlab.nas.spaces import get_space, space_names
from genlab.nas.spaces.base import FeatureLayout, SearchSpace


class FeatureInfo:
    """Channels, reduction and module of every tap a network offers, and the taps a backbone
    returns (``out_indices``); the accessors answer for ``out_indices`` unless given ``idx``
    (an index or a list of indices into all taps), as timm's FeatureInfo."""

    def __init__(self, info: Sequence[dict], out_indices: Sequence[int]):
        self.info = [dict(d) for d in info]
        self.out_indices = tuple(out_indices)

    def get(self, key: str, idx: int | Sequence[int] | None = None):
        if idx is None:
            return [self.info[i][key] for i in self.out_indices]
        if isinstance(idx, (list, tuple)):
            return [self.info[i][key] for i in idx]
        return self.info[idx][key]

    def channels(self, idx: int | Sequence[int] | None = None):
        return self.get("num_chs", idx)

    def reduction(self, idx: int | Sequence[int] | None = None):
        return self.get("reduction", idx)

    def module_name(self, idx: int | Sequence[int] | None = None):
        return self.get("module", idx)

    def get_dicts(self, idx: Sequence[int] | None = None) -> list[dict]:
        return [dict(self.info[i]) for i in (self.out_indices if idx is None else idx)]

    def __getitem__(self, item: int) -> dict:
        return self.info[item]

    def __len__(self) -> int:
        return len(self.info)

    def __repr__(self) -> str:
        return f"FeatureInfo({self.get_dicts()}, out_indices={self.out_indices})"


def check_out_indices(out_indices, count: int) -> tuple[int, ...]:
    """``out_indices`` as a tuple: non-empty, increasing integers in range(count)."""
    if isinstance(out_indices, int) or not isinstance(out_indices, Sequence):
        raise ConfigError(f"out_indices must be a sequence of tap indices, got {out_indices!r}")
    out = tuple(out_indices)
    bad = [i for i in out if isinstance(i, bool) or not isinstance(i, int)
           or not 0 <= i < count]
    if not out or bad:
        raise ConfigError(f"out_indices {out!r}: each must be a tap index in 0..{count - 1} "
                          f"(this network offers {count} taps)")
    if any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise ConfigError(f"out_indices {out!r} must be increasing, without repeats")
    return out


class Backbone(nn.Module):
    """A discrete network's stem and stages up to its last requested tap (module docstring)."""

    def __init__(self, layout: FeatureLayout, out_indices: Sequence[int] | None = None):
        super().__init__()
        out = check_out_indices(layout.default if out_indices is None else out_indices,
                                len(layout.taps))
        self._steps = tuple(layout.taps[i].step for i in out)
        for name, module in layout.keep(self._steps[-1]).items():
            self.add_module(name, module)
        self._run = layout.run
        self._heads = tuple(layout.heads)
        self.feature_info = FeatureInfo(
            [{"num_chs": t.channels, "reduction": t.reduction, "module": t.module}
             for t in layout.taps], out)
        # keys of the whole network a backbone leaves out (stages after the last tap)
        self._dropped = frozenset(set(layout.network.state_dict()) - set(self.state_dict()))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The features of the ``out_indices`` taps, in that order."""
        features: list[torch.Tensor] = []
        for step, h in enumerate(self._run(self, x)):
            if step == self._steps[len(features)]:
                features.append(h)
                if len(features) == len(self._steps):
                    return features
        raise RuntimeError(f"the network's steps ended before step {self._steps[len(features)]}")

    def _left_out(self, key: str) -> bool:
        return key in self._dropped or key.split(".", 1)[0] in self._heads

    def load_network_state(self, state: Mapping[str, torch.Tensor],
                           source: str = "state dict") -> Backbone:
        """Load the whole network's ``state`` (or a checkpoint dict holding it): head keys
        and those after the last tap dropped, strict on the rest (CheckpointError naming a
        missing or unexpected key, or a shape that does not fit)."""
        state = network_state(state, source)
        kept = {k: v for k, v in state.items() if not self._left_out(k)}
        own = self.state_dict()
        missing = [k for k in own if k not in kept]
        unexpected = [k for k in kept if k not in own]
        if missing or unexpected:
            parts = ([f"missing backbone key(s) {', '.join(missing[:4])}"] if missing else []) + (
                [f"unexpected key(s) {', '.join(unexpected[:4])}"] if unexpected else [])
            raise CheckpointError(f"{source}: does not fit the backbone: " + "; ".join(parts))
        wrong = [k for k in own if tuple(own[k].shape) != tuple(kept[k].shape)]
        if wrong:
            raise CheckpointError(f"{source}: {wrong[0]} has shape {tuple(kept[wrong[0]].shape)}"
                                  f", the backbone's {tuple(own[wrong[0]].shape)}")
        self.load_state_dict(kept, strict=True)
        return self


def network_state(state, source: str = "state dict") -> dict:
    """The network's state dict from a state dict or a training checkpoint dict."""
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{source}: expected a state dict, got {type(state).__name__}")
    record = state.get("model_record")
    key = record.get("state_key", "model") if isinstance(record, Mapping) else "model"
    inner = state.get(key)
    if isinstance(inner, Mapping):
        return dict(inner)
    return dict(state)


def read_weights(weights) -> tuple[dict, str]:
    """(state, source) of ``weights``: a state/checkpoint dict, a checkpoint file or a run
    folder (its checkpoint.pt, verified as genlab.load does)."""
    if isinstance(weights, Mapping):
        return dict(weights), "state dict"
    from genlab.core.storage.checkpoints import load_checkpoint
    from genlab.loading import checkpoint_path

    file = checkpoint_path(Path(weights))
    return load_checkpoint(file), str(file)


def build_backbone(space: str | SearchSpace, genotype, out_indices: Sequence[int] | None = None,
                   channels: int | None = None, cells: int | None = None, in_channels: int = 3,
                   weights=None, options: dict | None = None) -> Backbone:
    """The backbone of ``genotype`` (its text or parsed) in ``space`` (module docstring);
    ``options`` go to the space's network builder (e.g. ``{"stem": "cifar"}``)."""
    space = get_space(space) if isinstance(space, str) else space
    layout = space.feature_layout(genotype, channels=channels, cells=cells,
                                  in_channels=in_channels, **(options or {}))
    if layout is None:
        have = [n for n in sorted(space_names())
                if type(get_space(n)).feature_layout is not SearchSpace.feature_layout]
        raise ConfigError(f"space {space.name} offers no backbone; spaces with one: "
                          f"{', '.join(have)}")
    backbone = Backbone(layout, out_indices)
    if weights is not None:
        backbone.load_network_state(*read_weights(weights))
    return backbone


__all__ = ["Backbone", "FeatureInfo", "build_backbone", "check_out_indices", "network_state"]
