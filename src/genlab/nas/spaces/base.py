"""The search-space protocol and the registry of spaces.

A space is everything search, retraining, benchmarks, diagnostics and regularisers need to
know about one family of architectures:

- ``alpha_specs()``: the named alpha tensors of its supernets (ordered), each with its row
  labels (edges or blocks) and the candidate op of every column of every row;
- ``build_supernet(num_classes, in_channels, channels, cells, per_edge)``: the weight-sharing
  supernet (the space's upstream size when ``channels``/``cells`` are None). Every supernet has
  ``alphas()`` (ordered dict name -> nn.Parameter), ``arch_parameters()``,
  ``weight_parameters()`` (no alphas) and ``forward(x, probe=None)`` (genlab.nas.supernet.probe);
- ``derive(alphas)``: the discrete genotype by the space's own rule; ``parse(text)`` and
  ``format(genotype)`` round-trip the space's genotype text;
- ``op_counts(genotype)``: parameter-free and skip choices in the primary cell;
  ``choices(genotype)``: the comparable decisions (for agreement across seeds);
- ``build_network(genotype, num_classes, ...)``: the discrete network to retrain, and
  ``retrain``, the space's training recipe (scaled by flags for CPU proxies);
- ``proxy``: the digits-proxy defaults of a search (input size, width, depth, steps);
- ``reference``: the derived network whose parameters and multiply-adds its papers report
  (a ``ReferenceNetwork``; None where a table gives the cell's figures), and
  ``reference_size(genotype)``, those two of a genotype;
- ``feature_layout(genotype, ...)``: the discrete network as a detection backbone's stages
  (a ``FeatureLayout``; None for a space without one; genlab.nas.spaces.backbone).

Spaces register themselves where they are defined (``register_space``); ``get_space``
imports every module of this package once, so a new space is a new file here and nothing
else changes (a sub-package registers its spaces in its ``__init__``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from genlab.core.errors import ConfigError, SpecError
from genlab.core.registry import Registry
from genlab.nas.supernet.model_cost import count_macs, parameter_counts


@dataclass(frozen=True)
class AlphaSpec:
    """Rows (edge or block names) of one alpha tensor and the op name of every column."""

    rows: tuple[str, ...]
    ops: tuple[tuple[str, ...], ...]  # ops[r][k]: the op of column k on row r

    def __post_init__(self):
        widths = {len(o) for o in self.ops}
        if len(self.ops) != len(self.rows) or len(widths) != 1:
            raise ConfigError(f"alpha spec needs one op list per row, all of one length; got "
                              f"{len(self.rows)} rows and op lists of lengths {sorted(widths)}")

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.ops[0])

    @property
    def max_entropy(self) -> float:
        """log K: the entropy of a uniform row."""
        return math.log(self.shape[1])


@dataclass(frozen=True)
class ProxyDefaults:
    """Digits-proxy defaults of a search in this space (our choice, see docs/ber.md)."""

    size: int
    channels: int
    cells: int | None
    steps: int
    options: dict[str, Any] = field(default_factory=dict)  # more supernet options (e.g. stem)


@dataclass(frozen=True)
class RetrainRecipe:
    """How a derived architecture is retrained; flags scale every entry for CPU proxies."""

    channels: int
    cells: int | None
    epochs: int = 30
    lr: float = 0.05
    momentum: float = 0.9
    nesterov: bool = True
    weight_decay: float = 5e-4
    grad_clip: float = 0.0
    auxiliary_weight: float = 0.0  # 0: the network has no auxiliary head
    drop_path: float = 0.0  # final drop-path probability (linear ramp from 0)
    cutout: bool = False  # cutout of half the image side (16 px at 32x32) in training
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReferenceNetwork:
    """The derived network its papers report the size of (parameters, multiply-adds): the
    task's class count and input side, the width and depth (None: the space's
    ``build_network`` defaults) and more ``build_network`` options."""

    num_classes: int
    size: int
    channels: int | None = None
    cells: int | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FeatureTap:
    """One stage feature a discrete network offers: the output of step ``step`` of its
    ``FeatureLayout.run``, with its channels, its reduction (input size / feature size) and
    the name of the module that computes it (timm's FeatureInfo ``module``)."""

    step: int
    channels: int
    reduction: int
    module: str


@dataclass(frozen=True)
class FeatureLayout:
    """A discrete network seen as a backbone (genlab.nas.spaces.backbone): ``run(m, x)``
    yields the output of every step in order, reading only the modules ``keep(last)`` names
    (the network's own children, lists cut after step ``last``) as attributes of ``m``;
    ``taps`` are the features on offer, ``default`` the indices into them of a backbone's
    default outputs, ``heads`` the children that are never part of a backbone."""

    network: nn.Module
    taps: tuple[FeatureTap, ...]
    default: tuple[int, ...]
    heads: tuple[str, ...]
    keep: Callable[[int], dict[str, nn.Module]]
    run: Callable[[nn.Module, torch.Tensor], Iterator[torch.Tensor]]


class SearchSpace(ABC):
    """One search space (see the module docstring for the protocol)."""

    name: str
    description: str
    proxy: ProxyDefaults
    retrain: RetrainRecipe
    table: str | None = None  # name of the tabular benchmark that judges its genotypes
    table_env: str | None = None  # environment variable naming that table's file
    reference: ReferenceNetwork | None = None  # the network whose size its papers report

    @abstractmethod
    def alpha_specs(self) -> dict[str, AlphaSpec]:
        """Named alpha tensors of the supernet, in order."""

    @abstractmethod
    def build_supernet(self, num_classes: int = 10, in_channels: int = 3,
                       channels: int | None = None, cells: int | None = None,
                       per_edge: bool = False) -> nn.Module:
        """The search supernet (the upstream size for None); ``per_edge``: textbook layout."""

    @abstractmethod
    def derive(self, alphas: Mapping[str, torch.Tensor]) -> Any:
        """The genotype that the space's rule derives from the named alphas."""

    @abstractmethod
    def parse(self, text: str) -> Any:
        """The genotype written in ``text``; SpecError naming the bad token."""

    @abstractmethod
    def format(self, genotype: Any) -> str:
        """The genotype's text (``parse(format(g)) == g``)."""

    @abstractmethod
    def op_counts(self, genotype: Any) -> dict[str, int]:
        """{'param_free_ops': ..., 'skip_ops': ...} in the primary cell (normal cell)."""

    @abstractmethod
    def choices(self, genotype: Any) -> tuple:
        """The genotype's decisions as a flat tuple of comparable items."""

    @abstractmethod
    def build_network(self, genotype: Any, num_classes: int, in_channels: int = 3,
                      channels: int | None = None, cells: int | None = None,
                      **options) -> nn.Module:
        """The discrete network of ``genotype`` (or its text) for retraining."""

    def reference_size(self, genotype: Any) -> dict[str, float] | None:
        """{'params_m', 'macs_m'}: parameters (no auxiliary head) and multiply-adds of one
        image, in millions, of ``genotype``'s reference network; None without one."""
        ref = self.reference
        if ref is None:
            return None
        net = self.build_network(genotype, ref.num_classes, channels=ref.channels,
                                 cells=ref.cells, **ref.options)
        return {"params_m": parameter_counts(net)[1] / 1e6,
                "macs_m": count_macs(net, ref.size) / 1e6}

    def check_size_options(self, channels: int | None, cells: int | None) -> None:
        """ConfigError for a size option this space does not have (default: it has both)."""
        return None

    def feature_layout(self, genotype: Any, channels: int | None = None,
                       cells: int | None = None, in_channels: int = 3,
                       **options) -> FeatureLayout | None:
        """The discrete network of ``genotype`` as a backbone's stages; None: this space
        offers no backbone (the default)."""
        return None

    def load_table(self, path: str):
        """The tabular benchmark at ``path`` that judges this space's genotypes."""
        raise ConfigError(f"space {self.name} has no accuracy table")

    # -- shared helpers ---------------------------------------------------------
    def ensure_genotype(self, genotype: Any) -> Any:
        """A parsed genotype from a genotype or its text."""
        return self.parse(genotype) if isinstance(genotype, str) else genotype

    def check_alphas(self, alphas: Mapping[str, torch.Tensor]) -> None:
        """SpecError unless ``alphas`` has exactly this space's names and shapes."""
        specs = self.alpha_specs()
        if list(alphas) != list(specs):
            raise SpecError(f"space {self.name} expects alphas {list(specs)}, got {list(alphas)}")
        for name, spec in specs.items():
            if tuple(alphas[name].shape) != spec.shape:
                raise SpecError(f"alpha {name!r} of space {self.name} must have shape "
                                f"{spec.shape}, got {tuple(alphas[name].shape)}")

    def unsupported(self, **options) -> None:
        """ConfigError naming the first option that is set although this space lacks it."""
        for key, value in options.items():
            if value is not None:
                raise ConfigError(f"space {self.name} has no {key.replace('_', '-')} option "
                                  f"(got {value!r})")


class AlphaSupernet(nn.Module):
    """Base of the supernets: ``arch_parameters`` (the alphas, in ``alphas()`` order, then any
    ``extra_arch_parameters`` such as PC-DARTS' edge betas) and ``weight_parameters`` (every
    other parameter, in module order).

    The mixing weights of a forward come from ``mixing_weights()``: the relaxation that a
    search method sets (``relaxation(name, alpha, training)``; None: softmax, DARTS), unless
    ``mixing_override`` holds the weights to use as they are (SDARTS' perturbed weights in
    the weight step, genlab.nas.methods).

    ``checkpoint_cells`` (SearchConfig.checkpoint_cells): each cell's forward, in training
    with gradients on, keeps only its inputs and is run again in the backward
    (torch.utils.checkpoint, non-reentrant): the cells' activations are not held for the
    backward, at the cost of a second forward of every cell. The random draws inside a cell
    (drop-path masks, noise) replay from the saved generator state, and the rerun updates
    copies of the cell's buffers (BN running statistics), so the step is the plain one."""

    relaxation = None  # a genlab.nas.methods relaxation; None: softmax
    mixing_override: dict | None = None
    checkpoint_cells = False

    def run_cell(self, cell: nn.Module, fn: Callable, *args, rerun: bool = True):
        """``fn(*args)``, the forward of ``cell`` (a module of this supernet), under per-cell
        checkpointing when ``checkpoint_cells`` is on, in training, with gradients on;
        ``rerun`` False: plainly (a forward with side effects that must not repeat, such as
        reporting its ops to a probe)."""
        if not (rerun and self.checkpoint_cells and self.training and torch.is_grad_enabled()):
            return fn(*args)
        return checkpoint(fn, *args, use_reentrant=False,
                          context_fn=lambda: (nullcontext(), _BuffersKept(cell)))

    def alphas(self) -> dict[str, nn.Parameter]:
        raise NotImplementedError

    def extra_arch_parameters(self) -> list[nn.Parameter]:
        """Architecture parameters beside the alphas (none by default)."""
        return []

    def arch_parameters(self) -> list[nn.Parameter]:
        return list(self.alphas().values()) + self.extra_arch_parameters()

    def edge_scales(self) -> dict[str, torch.Tensor] | None:
        """Per-row factors of the derivation's edge strengths (PC-DARTS' normalised betas);
        None: the space's rule on the alphas alone."""
        return None

    def mixing_weights(self) -> dict[str, torch.Tensor]:
        """The weights of every row's candidates in this forward, per alpha name."""
        if self.mixing_override is not None:
            return self.mixing_override
        if self.relaxation is None:
            return {name: torch.softmax(a, dim=-1) for name, a in self.alphas().items()}
        return {name: self.relaxation(name, a, self.training) for name, a in self.alphas().items()}

    def weight_parameters(self) -> list[nn.Parameter]:
        """Every parameter except the alphas."""
        alpha_ids = {id(a) for a in self.arch_parameters()}
        return [p for p in self.parameters() if id(p) not in alpha_ids]


class _BuffersKept:
    """The rerun of a checkpointed cell updates copies of the cell's buffers, thrown away after
    it: the BN running statistics are updated once per forward, as without checkpointing, and
    the tensors themselves are never written to (a write would invalidate them where a graph
    saved them, as a double backward does). Re-entrant: a graph kept for a second backward
    reruns the cell again."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.kept: list = []

    def __enter__(self):
        self.kept = [(m, name, b) for m in self.module.modules()
                     for name, b in m.named_buffers(recurse=False)]
        for m, name, b in self.kept:
            setattr(m, name, b.clone())

    def __exit__(self, *exc):
        for m, name, b in self.kept:
            setattr(m, name, b)
        self.kept = []


SPACES: Registry[SearchSpace] = Registry("search space")


def register_space(space: SearchSpace) -> SearchSpace:
    """Add ``space`` to the registry under ``space.name`` (called where the space is defined)."""
    return SPACES.register(space.name, space)


