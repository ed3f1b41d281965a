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

The methods' supernet options (genlab.nas.cells) use the per-edge cell: ``partial_channels``
(DrNAS' 201-space partial-channel cell: no bypass pooling, NB201 cells keep the resolution),
``edge_norm`` (ours: betas (6,) softmaxed over each node's inputs), ``aux_skip`` (identity on
every edge), ``sampled`` (GDAS: AutoDL's ``forward_gdas``, the other ops' weights added as
scalars), ``drop_path`` (on every edge's output).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError, require_positive, require_positive_ints
from genlab.core.parallel.data_parallel import batch_norm
from genlab.nas.cells import (
    CellTopology,
    EdgeKnobs,
    EdgeOptions,
    OpReporter,
    PerEdgeCell,
    edge_name,
    node_softmax,
)
from genlab.nas.nodesum import NodeSum
from genlab.nas.ops import (
    CONV_KERNELS,
    Head,
    ReLUConvBN,
    ResidualBlock,
    Stem,
    make_op,
    stage_channels,
)
from genlab.nas.probe import CellTrace, Probe
from genlab.nas.spaces.base import AlphaSupernet
from genlab.nas.spaces.nb201.genotype import (
    NB201_EDGES,
    NB201_NODES,
    NB201_OPS,
    Genotype,
    derive_genotype,
)

NB201_TOPOLOGY = CellTopology(num_inputs=1, num_nodes=NB201_NODES, concat=False)


def edge_index(target: int, source: int) -> int:
    """Row of edge (target <- source) in NB201_EDGES."""
    return target * (target - 1) // 2 + source


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
        return batch_norm(y, mean, var, scale, None, use_batch, self.bn_momentum, self.bn_eps)

    def _pool_sums(self, h: torch.Tensor) -> torch.Tensor:
        """3x3 window sums at stride 1 (zero padding), as a depthwise conv: faster than pooling."""
        return F.conv2d(h, self.pool_kernel.to(h.dtype), padding=1, groups=self.channels)

    @staticmethod
    def _inverse_counts(h: torch.Tensor) -> torch.Tensor:
        """1 / (number of in-image pixels of each 3x3 window), shape (1, 1, H, W)."""
        ones = h.new_ones(1, 1, *h.shape[-2:])
        return 1.0 / (9.0 * F.avg_pool2d(ones, 3, 1, 1, count_include_pad=True))

    def forward(self, x: torch.Tensor, weights: torch.Tensor, prepared: dict | None = None,
                report: OpReporter | None = None) -> list[torch.Tensor]:
        """The intermediate nodes 1..3 (node 3 is the output); ``prepared`` = self.prepare(weights),
        shareable by same-width cells; ``report(row, col, out)`` receives unscaled op outputs."""
        if prepared is None:
            prepared = self.prepare(weights)
        bn_scales, scalars, k = prepared["scales"], prepared["scalars"], prepared["k"]
        if report is not None:  # unscaled outputs wanted: BN without scale, weights applied after
            bn_scales = {key: None for key in bn_scales}
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
                if report is None:
                    plain.extend(parts[slot] for parts in convs_j)
                else:
                    self._report_edge(report, e, nodes[j], [p[slot] for p in convs_j], sums_j,
                                      inv_counts)
                    for name, parts in zip(conv_names, convs_j, strict=True):
                        weighted += [parts[slot], scalars[e * k + col[name]]]
                        scales.append(None)
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
        return nodes[1:]

    def _report_edge(self, report: OpReporter, row: int, source: torch.Tensor, convs: list,
                     sums: torch.Tensor | None, inv_counts: torch.Tensor | None) -> None:
        """Unscaled output of every op on edge ``row`` (None for `none`)."""
        conv_names = [n for n in CONV_KERNELS if n in self.col]
        outputs = dict(zip(conv_names, convs, strict=True))
        outputs["skip_connect"] = source
        if sums is not None:
            outputs["avg_pool_3x3"] = sums * inv_counts
        for k, name in enumerate(self.ops):
            report(row, k, None if name == "none" else outputs[name].detach())


class NB201SuperNet(AlphaSupernet):
    """NAS-Bench-201 macro skeleton with search cells sharing one (6, K) alpha named "cell".

    ``per_edge=False`` (default) uses the fused ``SearchCell``; ``per_edge=True`` the textbook
    per-edge cell of genlab.nas.cells (the reference the fused cell is tested against).
    """

    def __init__(self, C: int = 16, N: int = 5, num_classes: int = 10, in_channels: int = 3,
                 ops: Sequence[str] = NB201_OPS, init_scale: float = 1e-3,
                 track_running_stats: bool = True, channels_last: bool = True,
                 per_edge: bool = False, partial_channels: int = 1, edge_norm: bool = False,
                 aux_skip: bool = False, sampled: bool = False, drop_path: bool = False):
        super().__init__()
        require_positive_ints(C=C, N=N, num_classes=num_classes, in_channels=in_channels,
                              partial_channels=partial_channels)
        if C % partial_channels:
            raise ConfigError(f"partial channels {partial_channels} must divide the channels "
                              f"({C})")
        self.options = EdgeOptions(partial_channels, bool(aux_skip),
                                   "scalars" if sampled else None, bool(drop_path))
        self.edge_norm = bool(edge_norm)
        self.knobs = EdgeKnobs()
        per_edge = per_edge or self.edge_norm or self.options != EdgeOptions()
        require_positive("init_scale", init_scale, allow_zero=True)
        ops = tuple(ops)
        unknown = [o for o in ops if o not in NB201_OPS]
        if unknown or not ops or len(set(ops)) != len(ops):
            raise ConfigError(f"supernet ops must be distinct names from {', '.join(NB201_OPS)}; "
                              f"got {', '.join(ops) or 'nothing'}")
        self.C, self.N, self.ops = C, N, ops
        self.channels_last = channels_last and not per_edge
        self.per_edge = per_edge
        self.stem = Stem(in_channels, C)
        self.cells = nn.ModuleList()
        c_prev = C
        for c, is_res in stage_channels(C, N):
            if is_res:
                self.cells.append(ResidualBlock(c_prev, c, 2))
            elif per_edge:
                self.cells.append(per_edge_cell(c, ops, track_running_stats, self.options,
                                                self.knobs))
            else:
                self.cells.append(SearchCell(c, ops, track_running_stats))
            c_prev = c
        self.head = Head(c_prev, num_classes)
        self.arch_params = nn.Parameter(init_scale * torch.randn(len(NB201_EDGES), len(ops)))
        if self.edge_norm:
            self.betas = nn.Parameter(init_scale * torch.randn(len(NB201_EDGES)))

    def set_knobs(self, aux_scale: float | None = None, drop_prob: float | None = None) -> None:
        """DARTS-' beta and R-DARTS' drop-path probability of this step."""
        self.knobs.set(aux_scale, drop_prob)

    def extra_arch_parameters(self) -> list[nn.Parameter]:
        return [self.betas] if self.edge_norm else []

    def edge_scales(self) -> dict[str, torch.Tensor] | None:
        """{"cell": the node-normalised betas (6,)} under edge normalisation, else None."""
        return {"cell": node_softmax(self.betas, NB201_TOPOLOGY)} if self.edge_norm else None

    def alphas(self) -> dict[str, nn.Parameter]:
        """{"cell": the (6, K) logits alpha}: rows NB201_EDGES, columns ``ops``."""
        return {"cell": self.arch_params}

    def search_cells(self) -> list[nn.Module]:
        """The 3N search cells in forward order."""
        return [m for m in self.cells if not isinstance(m, ResidualBlock)]

    def arch_weights(self) -> torch.Tensor:
        """softmax(alpha) per edge, shape (6, K)."""
        return torch.softmax(self.arch_params, dim=-1)

    def forward(self, x: torch.Tensor, probe: Probe | None = None) -> torch.Tensor:
        """Logits; ``probe`` (genlab.nas.probe) receives every search cell's nodes."""
        weights = self.mixing_weights()["cell"]
        scales = self.edge_scales()
        h = self.stem(x)
        if self.channels_last:  # after the stem: a 1-channel input is already "channels last"
            h = h.contiguous(memory_format=torch.channels_last)
        prepared = {}  # per channel count: weights laid out for the cells of that width
        index = 0
        for cell in self.cells:
            if isinstance(cell, ResidualBlock):
                h = self.run_cell(cell, cell, h)
                continue
            report = None
            if probe is not None and probe.wants_ops:
                report = functools.partial(probe.op, "cell", index)
            if self.per_edge:
                nodes = self.run_cell(cell, cell, [h], weights, report,
                                      None if scales is None else scales["cell"],
                                      rerun=report is None)
            else:
                if cell.channels not in prepared:
                    prepared[cell.channels] = cell.prepare(weights)
                nodes = self.run_cell(cell, cell, h, weights, prepared[cell.channels], report,
                                      rerun=report is None)
            if probe is not None:
                probe.node(CellTrace("cell", index, (h,), tuple(nodes), nodes[-1]))
            h = nodes[-1]
            index += 1
        return self.head(h)

    def genotype(self) -> Genotype:
        """Argmax per edge over all ops (AutoDL convention)."""
        return derive_genotype(self.arch_params, self.ops)

    def edge_weight(self, cell: int, edge: str, op: str) -> torch.Tensor:
        """Conv kernel of ``op`` on ``edge`` in search cell number ``cell`` (a view)."""
        if edge not in NB201_EDGES or op not in CONV_KERNELS:
            raise ConfigError(f"no conv kernel for edge {edge!r}, op {op!r}")
        found = self.search_cells()[cell]
        if self.per_edge:
            return found.edges[edge].ops[self.ops.index(op)].op[1].weight
        return found.edge_weight(edge, op)

    @torch.no_grad()
    def load_per_edge(self, ref: NB201SuperNet) -> None:
        """Take every weight of the per-edge supernet ``ref`` (same sizes and ops)."""
        if self.per_edge or not ref.per_edge:
            raise ConfigError("load_per_edge copies a per-edge supernet into a fused one")
        self.arch_params.copy_(ref.arch_params)
        self.stem.load_state_dict(ref.stem.state_dict())
        self.head.load_state_dict(ref.head.state_dict())
        for mine, theirs in zip(self.cells, ref.cells, strict=True):
            if isinstance(mine, ResidualBlock):
                mine.load_state_dict(theirs.state_dict())
        for k in range(len(self.search_cells())):
            for edge in NB201_EDGES:
                for name in CONV_KERNELS:
                    if name in self.ops:
                        self.edge_weight(k, edge, name).copy_(ref.edge_weight(k, edge, name))


def per_edge_cell(channels: int, ops: Sequence[str], track_running_stats: bool = True,
                  options: EdgeOptions | None = None, knobs: EdgeKnobs | None = None
                  ) -> PerEdgeCell:
    """The textbook NB201 search cell: one MixedOp per edge, ops without affine BN; under
    partial channels at C/K channels and, as DrNAS' partial-channel cell, convs without bias
    (a bias before a batch-statistics BN cancels); the auxiliary skip is the identity."""
    options = options or EdgeOptions()
    k = options.partial_channels
    width = channels // k

    def build(name: str, stride: int) -> nn.Module:
        if k > 1 and name in CONV_KERNELS:
            return ReLUConvBN(width, width, CONV_KERNELS[name], 1, affine=False,
                              track_running_stats=track_running_stats, bias=False)
        return make_op(name, width, affine=False, track_running_stats=track_running_stats)

    return PerEdgeCell(NB201_TOPOLOGY, [ops] * len(NB201_EDGES), build, options=options,
                       aux_builder=lambda stride: nn.Identity(), knobs=knobs)


__all__ = ["NB201SuperNet", "NodeSum", "SearchCell", "edge_index", "edge_name", "per_edge_cell"]
