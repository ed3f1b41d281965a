"""The NAS-Bench-201 weight-sharing supernet, computed per source node rather than per edge.

DARTS mixed op (Liu et al., ICLR-19, eq. 2) on every edge of the NB201 cell:
    node_i = sum_{j<i} sum_k w_{i<-j,k} op_k(node_j),   w_e = softmax(alpha_e).
The textbook implementation applies every op of every edge separately. Here the work is
regrouped without changing the result (checked against a per-edge implementation in tests and in
benchmarks/nas_step.py):
- ops that read node j are computed once for all of node j's out-edges: one ReLU, one 1x1 conv
  and one 3x3 conv whose output channels stack the edges' kernels, one avg-pool;
- BatchNorm without affine parameters is per channel, so one BN over the stacked channels equals
  the per-edge BNs; the softmax weight of each edge becomes that BN's per-channel scale, so
  w * BN(conv(x)) costs nothing extra and its gradient w.r.t. w comes from the BN backward;
- `none` contributes zero and is skipped; the softmax is computed once per forward.
The conv biases of the reference (present there because its BN is not affine) are omitted: a
per-channel constant before a batch-statistics BN cancels exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError, require_positive, require_positive_ints
from genlab.nas.genotype import Genotype, derive_genotype
from genlab.nas.ops import CONV_KERNELS, Head, ResidualBlock, Stem, stage_channels
from genlab.nas.spaces import NB201_EDGES, NB201_NODES, NB201_OPS, edge_name


def edge_index(target: int, source: int) -> int:
    """Row of edge (target <- source) in NB201_EDGES."""
    return target * (target - 1) // 2 + source


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sum(a * b) without materialising the product when both share a dense layout."""
    if torch.is_grad_enabled():  # the backward is itself differentiated (create_graph)
        return (a * b).sum()
    if a.shape == b.shape and a.stride() == b.stride():
        if a.is_contiguous():
            return torch.dot(a.reshape(-1), b.reshape(-1))
        try:  # layout queries other than the default are not implemented under vmap
            channels_last = a.dim() == 4 and a.is_contiguous(memory_format=torch.channels_last)
        except RuntimeError:
            channels_last = False
        if channels_last:
            return torch.dot(a.permute(0, 2, 3, 1).reshape(-1), b.permute(0, 2, 3, 1).reshape(-1))
    return (a * b).sum()


class NodeSum(torch.autograd.Function):
    """node = sum(plain) + sum_k w_k * scale_k * t_k, accumulated in place into one tensor.

    ``w_k`` are 0-dim tensors (edge weights), ``scale_k`` constant maps or None. The backward
    gives dL/dw_k = <g * scale_k, t_k> by a dot product instead of autograd's mul + sum, and
    dL/dt_k = w_k * scale_k * g.
    """

    @staticmethod
    def forward(ctx, n_plain: int, scales: tuple, *tensors: torch.Tensor) -> torch.Tensor:
        plain, rest = tensors[:n_plain], tensors[n_plain:]
        ts, ws = rest[0::2], rest[1::2]
        coefs = [w if sc is None else w * sc for w, sc in zip(ws, scales, strict=True)]
        if n_plain >= 2:
            out = torch.add(plain[0], plain[1])
        elif n_plain == 1:
            out = plain[0].clone()
        else:
            out = ts[0] * coefs[0]
        for p in plain[2:]:
            out.add_(p)
        for t, c in zip(ts[1:] if n_plain == 0 else ts, coefs[1:] if n_plain == 0 else coefs,
                        strict=True):
            out.addcmul_(t, c)
        ctx.n_plain, ctx.scales = n_plain, scales
        ctx.save_for_backward(*ts, *ws)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        n = ctx.n_plain
        saved = ctx.saved_tensors
        k = len(saved) // 2
        ts, ws = saved[:k], saved[k:]
        needs = ctx.needs_input_grad[2:]
        grads = [grad if needs[i] else None for i in range(n)]
        for idx, (t, w, sc) in enumerate(zip(ts, ws, ctx.scales, strict=True)):
            need_t, need_w = needs[n + 2 * idx], needs[n + 2 * idx + 1]
            g = grad if sc is None else grad * sc
            g_w = _dot(g, t) if need_w else None
            g_t = None
            if need_t:
                # out of place when the backward itself is differentiated (create_graph)
                in_place = sc is not None and not torch.is_grad_enabled()
                g_t = g.mul_(w) if in_place else g * w
            grads += [g_t, g_w]
        return (None, None, *grads)


class SearchCell(nn.Module):
    """NB201 search cell; forward(x, weights) with weights the (6, K) softmax of arch params."""

    def __init__(self, channels: int, ops: Sequence[str] = NB201_OPS,
                 track_running_stats: bool = True, bn_momentum: float = 0.1,
                 bn_eps: float = 1e-5):
        super().__init__()
        self.channels = channels
        self.ops = tuple(ops)
        self.col = {name: k for k, name in enumerate(self.ops)}
        self.track_running_stats = track_running_stats
        self.bn_momentum = bn_momentum
        self.bn_eps = bn_eps
        self.convs = nn.ParameterDict()
        for j in range(NB201_NODES):
            fan_out = (NB201_NODES - j) * channels
            for name, k in CONV_KERNELS.items():
                if name not in self.col:
                    continue
                w = torch.empty(fan_out, channels, k, k)
                for s in range(NB201_NODES - j):  # same init as one nn.Conv2d per edge
                    nn.init.kaiming_uniform_(w[s * channels:(s + 1) * channels], a=5 ** 0.5)
                self.convs[f"{name}_from{j}"] = nn.Parameter(w)
                if track_running_stats:
                    self.register_buffer(f"{name}_from{j}_mean", torch.zeros(fan_out))
                    self.register_buffer(f"{name}_from{j}_var", torch.ones(fan_out))
        self.register_buffer("pool_kernel", torch.ones(channels, 1, 3, 3), persistent=False)
        # rows of the (6, K) weights for the out-edges of each source node, in slot order
        for j in range(NB201_NODES):
            rows = [edge_index(i, j) for i in range(j + 1, NB201_NODES + 1)]
            self.register_buffer(f"rows_from{j}", torch.tensor(rows), persistent=False)

    def edge_weight(self, edge: str, op: str) -> torch.Tensor:
        """View of the conv kernel of ``op`` on ``edge`` (e.g. '2<-0') inside the stacked one."""
        target, source = (int(v) for v in edge.split("<-"))
        slot = target - source - 1
        c = self.channels
        return self.convs[f"{op}_from{source}"][slot * c:(slot + 1) * c]

    def prepare(self, weights: torch.Tensor) -> dict:
        """Per-forward views of the (6, K) weights: BN scales per source node, scalars per edge.

        Cells with the same channel count can share one result (the supernet does), which saves
        many tiny ops and autograd nodes per step.
        """
        c = self.channels
        scales = {}
        for j in range(NB201_NODES):
            rows = getattr(self, f"rows_from{j}")
            for name in CONV_KERNELS:
                if name in self.col:
                    scales[name, j] = weights[rows, self.col[name]].repeat_interleave(c)
        return {"scales": scales, "scalars": weights.reshape(-1).unbind(), "k": weights.shape[1]}

    def _conv_bn(self, r: torch.Tensor, name: str, j: int, scale: torch.Tensor) -> torch.Tensor:
        """Stacked conv of node j for all its out-edges, then BN scaled per edge by ``scale``."""
        key = f"{name}_from{j}"
        k = CONV_KERNELS[name]
        y = F.conv2d(r, self.convs[key], padding=k // 2)
        use_batch = self.training or not self.track_running_stats
        mean = getattr(self, f"{key}_mean") if self.track_running_stats else None
        var = getattr(self, f"{key}_var") if self.track_running_stats else None
        return F.batch_norm(y, mean, var, scale, None, use_batch, self.bn_momentum, self.bn_eps)

    def _pool_sums(self, h: torch.Tensor) -> torch.Tensor:
        """3x3 window sums at stride 1 (zero padding), as a depthwise conv: faster than pooling."""
        return F.conv2d(h, self.pool_kernel.to(h.dtype), padding=1, groups=self.channels)

    @staticmethod
    def _inverse_counts(h: torch.Tensor) -> torch.Tensor:
        """1 / (number of in-image pixels of each 3x3 window), shape (1, 1, H, W)."""
        ones = h.new_ones(1, 1, *h.shape[-2:])
        return 1.0 / (9.0 * F.avg_pool2d(ones, 3, 1, 1, count_include_pad=True))

    def forward(self, x: torch.Tensor, weights: torch.Tensor,
                prepared: dict | None = None) -> torch.Tensor:
        """Cell output; ``prepared`` = self.prepare(weights), shareable by same-width cells."""
        if prepared is None:
            prepared = self.prepare(weights)
        bn_scales, scalars, k = prepared["scales"], prepared["scalars"], prepared["k"]
        c = self.channels
        col = self.col
        conv_names = [n for n in CONV_KERNELS if n in col]
        pool = "avg_pool_3x3" in col
        inv_counts = None
        if pool:
            if "inv_counts" not in prepared or prepared["inv_counts"].shape[-2:] != x.shape[-2:]:
                prepared["inv_counts"] = self._inverse_counts(x)
            inv_counts = prepared["inv_counts"]
        nodes = [x]
        sources = []  # per source node: (per conv op: outputs of its out-edges), window sums
        for i in range(1, NB201_NODES + 1):
            h = nodes[i - 1]
            r = F.relu(h) if conv_names else None
            convs = [self._conv_bn(r, n, i - 1, bn_scales[n, i - 1]).split(c, dim=1)
                     for n in conv_names]
            sums = self._pool_sums(h) if pool else None
            sources.append((convs, sums))
            plain, weighted, scales = [], [], []
            for j in range(i):
                e = edge_index(i, j)
                slot = i - j - 1
                convs_j, sums_j = sources[j]
                plain.extend(parts[slot] for parts in convs_j)
                if "skip_connect" in col:
                    weighted += [nodes[j], scalars[e * k + col["skip_connect"]]]
                    scales.append(None)
                if pool:
                    weighted += [sums_j, scalars[e * k + col["avg_pool_3x3"]]]
                    scales.append(inv_counts)
            if plain or weighted:
                acc = NodeSum.apply(len(plain), tuple(scales), *plain, *weighted)
            else:  # only `none` in the space
                acc = torch.zeros_like(x)
            nodes.append(acc)
        return nodes[-1]


class NB201SuperNet(nn.Module):
    """NAS-Bench-201 macro skeleton with SearchCells sharing one (6, K) arch-parameter matrix."""

    def __init__(self, C: int = 16, N: int = 5, num_classes: int = 10, in_channels: int = 3,
                 ops: Sequence[str] = NB201_OPS, init_scale: float = 1e-3,
                 track_running_stats: bool = True, channels_last: bool = True):
        super().__init__()
        require_positive_ints(C=C, N=N, num_classes=num_classes, in_channels=in_channels)
        require_positive("init_scale", init_scale, allow_zero=True)
        ops = tuple(ops)
        unknown = [o for o in ops if o not in NB201_OPS]
        if unknown or not ops or len(set(ops)) != len(ops):
            raise ConfigError(f"supernet ops must be distinct names from {', '.join(NB201_OPS)}; "
                              f"got {', '.join(ops) or 'nothing'}")
        self.C, self.N, self.ops = C, N, ops
        self.channels_last = channels_last
        self.stem = Stem(in_channels, C)
        self.cells = nn.ModuleList()
        c_prev = C
        for c, is_res in stage_channels(C, N):
            if is_res:
                self.cells.append(ResidualBlock(c_prev, c, 2))
            else:
                self.cells.append(SearchCell(c, ops, track_running_stats))
            c_prev = c
        self.head = Head(c_prev, num_classes)
        self.arch_params = nn.Parameter(init_scale * torch.randn(len(NB201_EDGES), len(ops)))

    def arch_parameters(self) -> list[nn.Parameter]:
        """[arch_params]: the (6, K) logits alpha, rows NB201_EDGES, columns ``ops``."""
        return [self.arch_params]

    def weight_parameters(self) -> list[nn.Parameter]:
        """Every parameter except the arch params."""
        return [p for n, p in self.named_parameters() if n != "arch_params"]

    def search_cells(self) -> list[SearchCell]:
        """The 3N search cells in forward order."""
        return [m for m in self.cells if isinstance(m, SearchCell)]

    def arch_weights(self) -> torch.Tensor:
        """softmax(alpha) per edge, shape (6, K)."""
        return torch.softmax(self.arch_params, dim=-1)

    def forward(self, x: torch.Tensor, return_cells: bool = False):
        """Logits, or (logits, [(cell_input, cell_output) per search cell])."""
        weights = self.arch_weights()
        h = self.stem(x)
        if self.channels_last:  # after the stem: a 1-channel input is already "channels last"
            h = h.contiguous(memory_format=torch.channels_last)
        pairs = []
        prepared = {}  # per channel count: weights laid out for the cells of that width
        for cell in self.cells:
            if isinstance(cell, SearchCell):
                if cell.channels not in prepared:
                    prepared[cell.channels] = cell.prepare(weights)
                out = cell(h, weights, prepared[cell.channels])
                if return_cells:
                    pairs.append((h, out))
                h = out
            else:
                h = cell(h)
        logits = self.head(h)
        return (logits, pairs) if return_cells else logits

    def genotype(self) -> Genotype:
        """Argmax per edge over all ops (AutoDL convention)."""
        return derive_genotype(self.arch_params, self.ops)

    def edge_weight(self, cell: int, edge: str, op: str) -> torch.Tensor:
        """Conv kernel of ``op`` on ``edge`` in search cell number ``cell`` (a view)."""
        if edge not in NB201_EDGES or op not in CONV_KERNELS:
            raise ConfigError(f"no conv kernel for edge {edge!r}, op {op!r}")
        return self.search_cells()[cell].edge_weight(edge, op)


__all__ = ["NB201SuperNet", "SearchCell", "edge_index", "edge_name"]
