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

The methods' supernet options (genlab.nas.supernet.cells.EdgeOptions; the per-edge
``MixedOp`` is their definition, ``per_edge_cell`` builds it) are computed in the same
layout, except GDAS' sampled edges (``sampled``: AutoDL's ``forward_gdas``, the other ops'
weights added as scalars; per-edge cells):

- DARTS-' auxiliary skip ``beta * x`` (``aux_skip``; identity on every edge, all of stride 1):
  beta joins the weight of the edge's skip_connect term (one term, w + beta), or is a term of
  its own when the ops have no skip_connect or under partial channels;
- R-DARTS' drop-path (``drop_path``): one per-sample mask per edge, drawn at the start of the
  cell in edge order as the per-edge cell draws them (genlab.nas.supernet.cells.drop_masks), and the
  per-sample factor of every term of that edge in the node sum (``NodeSum``'s scale; the
  pool's 1 / count map times the mask); nothing is drawn at probability 0 or in evaluation;
- PC-DARTS' partial channels (``partial_channels`` K; DrNAS' 201-space partial-channel cell: no
  bypass pooling, NB201 cells keep the resolution, convs without bias): every op runs on the
  first C/K channels of its source, split off once per source (the stacked convs, BN and
  window sums at C/K channels per out-edge); the bypassed channels are summed per node beside
  the ops' sum, and ``partial_merge``'s channel shuffle is applied once per node to the two
  sums (``shuffle_join``; a fixed permutation commutes with the sum);
- edge normalisation (``edge_norm``, ours: betas (6,) softmaxed over each node's inputs):
  the edge weights times the normalised beta (conv ops: in the BN scale), beta on the bypassed
  channels and the auxiliary skip.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError, require_positive, require_positive_ints
from genlab.core.parallel.data_parallel import batch_norm
from genlab.nas.spaces.base import AlphaSupernet
from genlab.nas.spaces.nb201.genotype import (
    NB201_EDGES,
    NB201_NODES,
    NB201_OPS,
    Genotype,
    derive_genotype,
)
from genlab.nas.supernet.cells import (
    CellTopology,
    EdgeKnobs,
    EdgeOptions,
    OpReporter,
    PerEdgeCell,
    drop_masks,
    edge_name,
    node_softmax,
)
from genlab.nas.supernet.nodesum import ChannelSplit, NodeSum, NodeTerms, shuffle_join
from genlab.nas.supernet.ops import (
    CONV_KERNELS,
    Head,
    ReLUConvBN,
    ResidualBlock,
    Stem,
    make_op,
    stage_channels,
)
from genlab.nas.supernet.probe import CellTrace, Probe

NB201_TOPOLOGY = CellTopology(num_inputs=1, num_nodes=NB201_NODES, concat=False)


def edge_index(target: int, source: int) -> int:
    """Row of edge (target <- source) in NB201_EDGES."""
    return target * (target - 1) // 2 + source


@dataclass
class _Pass:
    """What every node of one fused-cell forward reads."""

    bn_scales: dict  # (conv name, source) -> the BN scales (None: unscaled outputs wanted)
    scalars: tuple  # the (6, K) weights flattened into 0-dim tensors
    k: int  # ops per edge
    aux: tuple | None  # DARTS-' beta per edge, None without the auxiliary skip
    edge: tuple | None  # the edge betas (PC-DARTS), None without
    masks: list | None  # drop-path factor per edge, None when off
    inv_counts: torch.Tensor | None  # 1 / the 3x3 windows' pixel counts (average pooling)
    report: OpReporter | None
    conv_names: list  # the conv ops of the cell, in CONV_KERNELS order
    pool: bool  # whether the cell has average pooling


class SearchCell(nn.Module):
    """NB201 search cell; forward(x, weights) with weights the (6, K) softmax of arch params;
    ``options``/``knobs``: the methods' supernet options and their moving values
    (genlab.nas.supernet.cells), shared with the supernet (module docstring)."""

    def __init__(self, channels: int, ops: Sequence[str] = NB201_OPS,
                 track_running_stats: bool = True, bn_momentum: float = 0.1,
                 bn_eps: float = 1e-5, options: EdgeOptions | None = None,
                 knobs: EdgeKnobs | None = None):
        super().__init__()
        options = options or EdgeOptions()
        if options.sampled:
            raise ConfigError("the fused NB201 cell runs every op; sampled edges (GDAS) use the "
                              "per-edge cell")
        if channels % options.partial_channels:
            raise ConfigError(f"partial channels {options.partial_channels} must divide the "
                              f"channels ({channels})")
        self.options = options
        self.knobs = knobs or EdgeKnobs()
        self.channels = channels
        self.parts = options.partial_channels
        self.width = channels // self.parts  # the ops' width (PC-DARTS: C / K)
        self.ops = tuple(ops)
        self.col = {name: k for k, name in enumerate(self.ops)}
        # DARTS-' beta joins the weight of every edge's skip_connect (one term, w + beta)
        self.aux_folded = options.aux_skip and self.parts == 1 and "skip_connect" in self.col
        self.track_running_stats = track_running_stats
        self.bn_momentum = bn_momentum
        self.bn_eps = bn_eps
        width = self.width
        self.convs = nn.ParameterDict()
        for j in range(NB201_NODES):
            fan_out = (NB201_NODES - j) * width
            for name, k in CONV_KERNELS.items():
                if name not in self.col:
                    continue
                w = torch.empty(fan_out, width, k, k)
                for s in range(NB201_NODES - j):  # same init as one nn.Conv2d per edge
                    nn.init.kaiming_uniform_(w[s * width:(s + 1) * width], a=5 ** 0.5)
                self.convs[f"{name}_from{j}"] = nn.Parameter(w)
                if track_running_stats:
                    self.register_buffer(f"{name}_from{j}_mean", torch.zeros(fan_out))
                    self.register_buffer(f"{name}_from{j}_var", torch.ones(fan_out))
        self.register_buffer("pool_kernel", torch.ones(width, 1, 3, 3), persistent=False)
        # rows of the (6, K) weights for the out-edges of each source node, in slot order
        for j in range(NB201_NODES):
            rows = [edge_index(i, j) for i in range(j + 1, NB201_NODES + 1)]
            self.register_buffer(f"rows_from{j}", torch.tensor(rows), persistent=False)

    def edge_weight(self, edge: str, op: str) -> torch.Tensor:
        """View of the conv kernel of ``op`` on ``edge`` (e.g. '2<-0') inside the stacked one."""
        target, source = (int(v) for v in edge.split("<-"))
        slot = target - source - 1
        c = self.width
        return self.convs[f"{op}_from{source}"][slot * c:(slot + 1) * c]

    def prepare(self, weights: torch.Tensor, edge_weights: torch.Tensor | None = None) -> dict:
        """Per-forward views of the (6, K) weights: BN scales per source node, scalars per edge;
        ``edge_weights`` (6,): PC-DARTS' normalised betas, factors of the edges' outputs.

        Cells with the same channel count can share one result (the supernet does), which saves
        many tiny ops and autograd nodes per step.
        """
        if edge_weights is not None:
            weights = weights * edge_weights[:, None]
        c = self.width
        scales = {}
        for j in range(NB201_NODES):
            rows = getattr(self, f"rows_from{j}")
            for name in CONV_KERNELS:
                if name in self.col:
                    scales[name, j] = weights[rows, self.col[name]].repeat_interleave(c)
        aux = None  # DARTS-' beta per edge (times the edge's normalised beta)
        if self.options.aux_skip:
            beta = self.knobs.aux_scale
            aux = (weights.new_full((len(NB201_EDGES),), beta) if edge_weights is None
                   else beta * edge_weights).unbind()
        return {"scales": scales, "scalars": weights.reshape(-1).unbind(), "k": weights.shape[1],
                "aux": aux, "edge": None if edge_weights is None else edge_weights.unbind()}

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
        return F.conv2d(h, self.pool_kernel.to(h.dtype), padding=1, groups=self.width)

    @staticmethod
    def _inverse_counts(h: torch.Tensor) -> torch.Tensor:
        """1 / (number of in-image pixels of each 3x3 window), shape (1, 1, H, W)."""
        ones = h.new_ones(1, 1, *h.shape[-2:])
        return 1.0 / (9.0 * F.avg_pool2d(ones, 3, 1, 1, count_include_pad=True))

    def forward(self, x: torch.Tensor, weights: torch.Tensor, prepared: dict | None = None,
                report: OpReporter | None = None) -> list[torch.Tensor]:
        """The intermediate nodes 1..3 (node 3 is the output); ``prepared`` = self.prepare(weights,
        edge_weights), shareable by same-width cells; ``report(row, col, out)`` receives
        unscaled op outputs."""
        step = self._pass(x, weights, prepared, report)
        nodes = [x]
        sources = []  # per source node: the ops' input, per conv op the outputs of its
        # out-edges, the window sums, the bypassed channels (PC-DARTS)
        for i in range(1, NB201_NODES + 1):
            sources.append(self._source(nodes[i - 1], i - 1, step))
            nodes.append(self._node(i, nodes, sources, step))
        return nodes[1:]

    def _pass(self, x: torch.Tensor, weights: torch.Tensor, prepared: dict | None,
              report: OpReporter | None) -> _Pass:
        """What every node of one forward reads (the drop-path masks drawn here, first)."""
        if prepared is None:
            prepared = self.prepare(weights)
        bn_scales = prepared["scales"]
        if report is not None:  # unscaled outputs wanted: BN without scale, weights applied after
            bn_scales = {key: None for key in bn_scales}
        masks = None  # R-DARTS' drop-path: per edge, a per-sample factor of all its terms
        if self.options.drop_path and self.training:
            masks = drop_masks(len(NB201_EDGES), x.shape[0], self.knobs.drop_prob, weights)
        pool = "avg_pool_3x3" in self.col
        inv_counts = None
        if pool:
            if "inv_counts" not in prepared or prepared["inv_counts"].shape[-2:] != x.shape[-2:]:
                prepared["inv_counts"] = self._inverse_counts(x)
            inv_counts = prepared["inv_counts"]
        return _Pass(bn_scales, prepared["scalars"], prepared["k"], prepared["aux"],
                     prepared["edge"], masks, inv_counts, report,
                     [n for n in CONV_KERNELS if n in self.col], pool)

    def _source(self, h: torch.Tensor, j: int, step: _Pass) -> tuple:
        """Source node ``j``'s ops' input, its convs' outputs (split per out-edge), its window
        sums and its bypassed channels (PC-DARTS)."""
        c = self.width
        xs, rest = (h, None) if self.parts == 1 else ChannelSplit.apply(h, c)
        r = F.relu(xs) if step.conv_names else None
        convs = [self._conv_bn(r, n, j, step.bn_scales[n, j]).split(c, dim=1)
                 for n in step.conv_names]
        sums = self._pool_sums(xs) if step.pool else None
        return xs, convs, sums, rest

    def _node(self, i: int, nodes: list, sources: list, step: _Pass) -> torch.Tensor:
        """Node ``i``: the sum of its in-edges' terms."""
        ops, bypass, extra = NodeTerms(), NodeTerms(), NodeTerms()
        for j in range(i):
            self._edge_terms(i, j, nodes[j], sources[j], step, (ops, bypass, extra))
        node = ops.total() if ops.plain or ops.weighted else torch.zeros_like(sources[0][0])
        if self.parts > 1:  # partial_merge's shuffle, once for the node's two sums
            node = shuffle_join(node, bypass.total(), self.parts)
            if extra.weighted:
                extra.plain.insert(0, node)
                node = extra.total()
        return node

    def _edge_terms(self, i: int, j: int, node_j: torch.Tensor, source_j: tuple, step: _Pass,
                    terms: tuple) -> None:
        """Add edge ``i <- j``'s terms to node ``i``'s sums (``terms``: the ops', the bypassed
        channels', the auxiliary skips' under partial channels)."""
        ops, bypass, extra = terms
        col, k, scalars, aux = self.col, step.k, step.scalars, step.aux
        e = edge_index(i, j)
        slot = i - j - 1
        mask = None if step.masks is None else step.masks[e]
        xs_j, convs_j, sums_j, rest_j = source_j
        if step.report is not None:
            self._report_edge(step.report, e, xs_j, [p[slot] for p in convs_j], sums_j,
                              step.inv_counts)
        for name, outs in zip(step.conv_names, convs_j, strict=True):
            ops.add(outs[slot], None if step.report is None else scalars[e * k + col[name]],
                    mask)
        if "skip_connect" in col:
            w = scalars[e * k + col["skip_connect"]]
            ops.add(xs_j, w + aux[e] if self.aux_folded else w, mask)
        if step.pool:
            ops.add(sums_j, scalars[e * k + col["avg_pool_3x3"]],
                    step.inv_counts if mask is None else step.inv_counts * mask)
        if aux is not None and not self.aux_folded:  # the identity on the whole node
            (ops if self.parts == 1 else extra).add(node_j, aux[e], mask)
        if self.parts > 1:
            bypass.add(rest_j, None if step.edge is None else step.edge[e], mask)

    def _report_edge(self, report: OpReporter, row: int, source: torch.Tensor, convs: list,
                     sums: torch.Tensor | None, inv_counts: torch.Tensor | None) -> None:
        """Unscaled output of every op on edge ``row`` (None for `none`); ``source``: the ops'
        input (PC-DARTS: its first C/K channels)."""
        conv_names = [n for n in CONV_KERNELS if n in self.col]
        outputs = dict(zip(conv_names, convs, strict=True))
        outputs["skip_connect"] = source
        if sums is not None:
            outputs["avg_pool_3x3"] = sums * inv_counts
        for k, name in enumerate(self.ops):
            report(row, k, None if name == "none" else outputs[name].detach())


class NB201SuperNet(AlphaSupernet):
    """NAS-Bench-201 macro skeleton with search cells sharing one (6, K) alpha named "cell".

    ``per_edge=False`` (default) uses the fused ``SearchCell`` (with every supernet option but
    GDAS' ``sampled``, which is always per edge); ``per_edge=True`` the textbook per-edge cell
    of genlab.nas.supernet.cells (the reference the fused cell is tested against).
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
        per_edge = per_edge or self.options.sampled is not None
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
                self.cells.append(SearchCell(c, ops, track_running_stats,
                                             options=self.options, knobs=self.knobs))
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
        """Logits; ``probe`` (genlab.nas.supernet.probe) receives every search cell's nodes."""
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
                    prepared[cell.channels] = cell.prepare(
                        weights, None if scales is None else scales["cell"])
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
        """Take every weight of the per-edge supernet ``ref`` (same sizes, ops and options)."""
        if self.per_edge or not ref.per_edge:
            raise ConfigError("load_per_edge copies a per-edge supernet into a fused one")
        if self.ops != ref.ops or self.edge_norm != ref.edge_norm:
            raise ConfigError("load_per_edge needs a supernet of the same ops and edge betas")
        for mine, theirs in zip(self.arch_parameters(), ref.arch_parameters(), strict=True):
            mine.copy_(theirs)
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
