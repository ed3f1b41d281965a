"""The fused DARTS-space search cell: the per-edge mixed ops regrouped by source state.

Same function as the per-edge cell (genlab.nas.supernet.cells.PerEdgeCell with the ops of
genlab.nas.spaces.darts.supernet.search_op; checked in tests and in benchmarks/nas_step.py),
computed with fewer, larger kernels:

- every op that reads state s is computed once for all out-edges of s that offer it: one ReLU
  per source; FactorizedReduce's two 1x1 convs of the out-edges stacked into one each
  (edge-major channels); the sep/dil convs stay per edge at full width (stacked, they were
  slower on CPU; docs/nas_performance.md);
- a pool followed by BN(affine=False) gives the same tensor on every out-edge (the BN's batch
  statistics, and so its running statistics, are those of one input): it is computed once per
  source, with one set of running statistics;
- the softmax weight of an edge's conv op becomes the per-channel scale of its last BN, so
  w * BN(x) costs nothing extra; pools, skip and noise enter the node sums with scalar weights,
  accumulated in place (genlab.nas.supernet.nodesum.NodeSum);
- `none` (zero) is skipped; its weight still enters the softmax.

RobustDARTS spaces offer different ops on different edges: each (source, op) group holds only
the out-edges that offer the op.

The methods' supernet options (genlab.nas.supernet.cells.EdgeOptions; the per-edge
``MixedOp`` is their definition) are computed in the same layout, except GDAS' sampled edges
(per-edge cells):

- DARTS-' auxiliary skip ``beta * aux(x)``: on stride-1 edges an identity whose weight beta
  joins the edge's skip_connect weight (one term, w + beta) or enters as a term of its own;
  on stride-2 edges FactorizedReduce modules of their own, stacked per source like the skip's,
  beta as their BN scale;
- R-DARTS' drop-path: one per-sample mask per edge, drawn in edge order as the per-edge cell
  draws them, and applied as the per-sample factor of every term of that edge in the node sum
  (``NodeSum``'s scale); nothing is drawn at probability 0 or in evaluation;
- PC-DARTS' partial channels (K): every op runs on the first C/K channels of its source,
  computed once per source for all out-edges; the edges' bypassed channels (max-pooled 2x2
  at stride 2, once per source) are summed per node beside the op outputs, and the channel
  shuffle of ``partial_merge`` is applied once per node to the two sums instead of once per
  edge (it is a fixed permutation, so it commutes with the node's sum); the narrow sep/dil
  convs of a source's out-edges are stacked (``_stacked_convs``); edge normalisation
  multiplies the edge weights by the node-softmaxed betas (conv ops: in the BN scale).

Every node is kept in the layout of the states (channels_last above 8 channels), its
gradient too: oneDNN's CPU backwards are 2-3x slower when an input's and its gradient's
layouts differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError
from genlab.core.parallel.data_parallel import batch_norm
from genlab.nas.supernet.cells import (
    CellTopology,
    EdgeKnobs,
    EdgeOptions,
    OpReporter,
    PerEdgeCell,
    drop_masks,
    edge_name,
)
from genlab.nas.supernet.nodesum import ChannelSplit, NodeTerms, memory_format_of, shuffle_join
from genlab.nas.supernet.ops import DIL_CONVS, SEP_CONVS, draw_noise, shifted

BN_MOMENTUM, BN_EPS = 0.1, 1e-5
# parameter tensors of each conv kind, with their (per-edge) shapes given C and kernel k
CONV_PARTS = {
    "sep": ("dw1", "pw1", "dw2", "pw2"),
    "dil": ("dw", "pw"),
    "reduce": ("conv_1", "conv_2"),
}
AUX = "aux"  # the name of DARTS-' auxiliary-skip groups


@dataclass(frozen=True)
class OpGroup:
    """One op of one source state, over the out-edges that offer it."""

    source: int
    name: str
    slots: tuple[tuple[int, int], ...]  # (alpha row, alpha column) per out-edge, in order
    stride: int

    @property
    def key(self) -> str:
        return f"s{self.source}_{self.name}"

    @property
    def aux(self) -> bool:
        """DARTS-' auxiliary skip (column -1: no alpha), not a candidate op."""
        return self.name == AUX

    @property
    def kind(self) -> str:
        if self.name == AUX:
            return "reduce" if self.stride == 2 else "identity"
        if self.name in SEP_CONVS:
            return "sep"
        if self.name in DIL_CONVS:
            return "dil"
        if self.name == "skip_connect":
            return "reduce" if self.stride == 2 else "identity"
        return self.name  # none, noise, max_pool_3x3, avg_pool_3x3

    @property
    def per_edge_output(self) -> bool:
        """True when every out-edge gets its own output (convs, FactorizedReduce, noise)."""
        return self.kind in ("sep", "dil", "reduce", "noise")


class FusedCell(nn.Module):
    """The DAG of a DARTS-space cell over preprocessed input states (module docstring).

    ``channels``: the states' width; ``options``/``knobs``: the methods' supernet options and
    their moving values (genlab.nas.supernet.cells), shared with the supernet."""

    def __init__(self, topology: CellTopology, edge_ops: Sequence[Sequence[str]], channels: int,
                 reduction: bool, options: EdgeOptions | None = None,
                 knobs: EdgeKnobs | None = None):
        super().__init__()
        options = options or EdgeOptions()
        if options.sampled:
            raise ConfigError("the fused DARTS cell runs every op; sampled edges (GDAS) use the "
                              "per-edge cell")
        self.topology, self.options = topology, options
        self.knobs = knobs or EdgeKnobs()
        self.channels = channels
        self.parts = options.partial_channels
        self.width = channels // self.parts  # the ops' width
        # PC-DARTS' narrow convs: the out-edges' convs of one source stacked into one conv
        # each (fewer, wider kernels; full-width per-edge convs are faster unstacked)
        self.stacked = self.parts > 1
        self.edge_ops = tuple(tuple(ops) for ops in edge_ops)
        self.num_ops = len(self.edge_ops[0])
        last = topology.num_inputs + topology.num_nodes - 1
        self.groups: list[list[OpGroup]] = []
        self.out_rows: list[tuple[int, ...]] = []
        # rows whose auxiliary identity joins the weight of the edge's skip_connect
        self.aux_folded: set[int] = set()
        for s in range(last):
            stride = 2 if reduction and s < topology.num_inputs else 1
            rows = tuple(r for r, (_, source) in enumerate(topology.edges) if source == s)
            by_op: dict[str, list[tuple[int, int]]] = {}
            for row in rows:
                for col, name in enumerate(self.edge_ops[row]):
                    by_op.setdefault(name, []).append((row, col))
            groups = [OpGroup(s, n, tuple(slots), stride) for n, slots in by_op.items()]
            if options.aux_skip:
                aux_rows = rows
                if stride == 1 and self.parts == 1:
                    folded = {r for r, _ in by_op.get("skip_connect", ())}
                    self.aux_folded |= folded
                    aux_rows = tuple(r for r in rows if r not in folded)
                if aux_rows:
                    groups.append(OpGroup(s, AUX, tuple((r, -1) for r in aux_rows), stride))
            self.groups.append(groups)
            self.out_rows.append(rows)
        self.params = nn.ParameterDict()
        for group in (g for gs in self.groups for g in gs):
            self._build(group)

    # -- parameters ------------------------------------------------------------------------
    def _width(self, g: OpGroup) -> int:
        """The channels of a group's op: the auxiliary skip reads the whole state."""
        return self.channels if g.aux else self.width

    def _build(self, g: OpGroup) -> None:
        n, c = len(g.slots), self._width(g)
        self.register_buffer(f"{g.key}_rows", torch.tensor([r for r, _ in g.slots]),
                             persistent=False)
        self.register_buffer(f"{g.key}_cols", torch.tensor([k for _, k in g.slots]),
                             persistent=False)
        kind = g.kind
        shapes = {}
        if kind in ("sep", "dil"):  # per edge: stacked depthwise convs are slower on CPU
            k = SEP_CONVS.get(g.name) or DIL_CONVS[g.name]
            for e in range(n):
                for part in CONV_PARTS[kind]:
                    shapes[f"e{e}_{part}"] = (c, 1, k, k) if part.startswith("dw") else (c, c, 1, 1)
                for b in ("bn1", "bn2") if kind == "sep" else ("bn2",):
                    if self.stacked:  # one BN over the out-edges' stacked channels
                        if e == 0:
                            self._bn_buffers(f"{g.key}_{b}", n * c)
                    else:
                        self._bn_buffers(f"{g.key}_e{e}_{b}", c)
        elif kind == "reduce":  # 1x1 convs of all out-edges stacked into one
            shapes = {p: (n * c // 2, c, 1, 1) for p in CONV_PARTS["reduce"]}
            self._bn_buffers(f"{g.key}_bn2", n * c)
        elif kind in ("max_pool_3x3", "avg_pool_3x3"):
            self._bn_buffers(f"{g.key}_bn", c)
        for part, shape in shapes.items():
            w = torch.empty(shape)
            nn.init.kaiming_uniform_(w, a=5 ** 0.5)  # nn.Conv2d's init (same fan-in per edge)
            self.params[f"{g.key}_{part}"] = nn.Parameter(w)

    def _bn_buffers(self, name: str, size: int) -> None:
        self.register_buffer(f"{name}_mean", torch.zeros(size))
        self.register_buffer(f"{name}_var", torch.ones(size))

    def _bn(self, x: torch.Tensor, name: str, scale: torch.Tensor | None) -> torch.Tensor:
        return batch_norm(x, getattr(self, f"{name}_mean"), getattr(self, f"{name}_var"),
                          scale, None, self.training, BN_MOMENTUM, BN_EPS)

    # -- forward ---------------------------------------------------------------------------------
    def forward(self, states: Sequence[torch.Tensor], weights: torch.Tensor,
                report: OpReporter | None = None,
                edge_weights: torch.Tensor | None = None) -> list[torch.Tensor]:
        """The intermediate nodes, given the preprocessed inputs and the (E, K) weights;
        ``edge_weights`` (E,): factors of the edge outputs (PC-DARTS' normalised betas)."""
        topo = self.topology
        first = topo.num_inputs
        if edge_weights is not None:
            weights = weights * edge_weights[:, None]
        step = _Step(weights, weights.reshape(-1).unbind(),
                     None if edge_weights is None else edge_weights.unbind(),
                     self._aux_weights(weights, edge_weights),
                     self._drop_masks(states[0].shape[0], weights), report)
        sums = {t: (NodeTerms(), NodeTerms(), NodeTerms())
                for t in range(first, first + topo.num_nodes)}
        states = list(states)
        for s in range(first):
            self._emit(s, states[s], step, sums)
        for t in range(first, first + topo.num_nodes):
            main, rest, aux = sums[t]
            node = main.total()
            if self.parts > 1:  # partial_merge's shuffle, once for the node's two sums
                aux.plain.insert(0, shuffle_join(node, rest.total(), self.parts))
                node = aux.total()
            states.append(node)
            if t < len(self.groups):
                self._emit(t, node, step, sums)
        return states[first:]

    def _aux_weights(self, weights: torch.Tensor, edge_weights: torch.Tensor | None):
        """DARTS-' beta per edge (times the edge's normalised beta), None without the skip."""
        if not self.options.aux_skip:
            return None
        beta = self.knobs.aux_scale
        if edge_weights is None:
            return weights.new_full((weights.shape[0],), beta).unbind()
        return (beta * edge_weights).unbind()

    def _drop_masks(self, batch: int, like: torch.Tensor) -> list[torch.Tensor] | None:
        """R-DARTS' drop-path: one (N, 1, 1, 1) mask / keep per edge (genlab.nas.supernet.cells.
        drop_masks), None when off."""
        if not (self.options.drop_path and self.training):
            return None
        return drop_masks(len(self.topology.edges), batch, self.knobs.drop_prob, like)

    def _emit(self, s: int, h: torch.Tensor, step: _Step, sums: dict) -> None:
        """Add every op of source ``s`` to the terms of its target nodes."""
        xs, rest = (h, None) if self.parts == 1 else ChannelSplit.apply(h, self.width)
        relus = {}

        def relu_of(x):
            if id(x) not in relus:
                relus[id(x)] = F.relu(x)
            return relus[id(x)]

        for g in self.groups[s]:
            self._emit_group(g, h if g.aux else xs, relu_of, step, sums)
        if self.parts > 1:
            self._emit_bypass(s, rest, step, sums)

    def _emit_group(self, g: OpGroup, x: torch.Tensor, relu_of, step: _Step,
                    sums: dict) -> None:
        """Add op group ``g``'s outputs on ``x`` to the terms of its out-edges' targets."""
        report, masks, edges = step.report, step.masks, self.topology.edges
        conv = g.kind in ("sep", "dil", "reduce")
        scales = None  # the edge weights as BN scales (not when unscaled outputs are wanted)
        if report is None and conv:
            if g.aux:
                scales = torch.stack([step.aux[r] for r, _ in g.slots])
            else:
                scales = step.weights[getattr(self, f"{g.key}_rows"),
                                      getattr(self, f"{g.key}_cols")]
        out = self._op_output(g, x, relu_of(x) if conv else None, scales)
        for e, (row, col) in enumerate(g.slots):
            if out is None:  # none
                if report is not None:
                    report(row, col, None)
                continue
            piece = out[e] if g.per_edge_output else out
            if report is not None and not g.aux:
                report(row, col, piece.detach())
            bucket = sums[edges[row][0]][2 if g.aux and self.parts > 1 else 0]
            coef = None if scales is not None else self._coef(g, row, col, step)
            bucket.add(piece, coef, None if masks is None else masks[row])

    def _coef(self, g: OpGroup, row: int, col: int, step: _Step) -> torch.Tensor:
        """The weight of op group ``g``'s term on edge ``row`` (op column ``col``)."""
        if g.aux:
            return step.aux[row]
        coef = step.scalars[row * self.num_ops + col]
        if row in self.aux_folded and g.name == "skip_connect":
            coef = coef + step.aux[row]
        return coef

    def _emit_bypass(self, s: int, rest: torch.Tensor, step: _Step, sums: dict) -> None:
        """PC-DARTS: source ``s``'s bypassed channels, max-pooled on the stride-2 edges, to
        the bypass sums of its targets."""
        edges, masks = self.topology.edges, step.masks
        if self.groups[s][0].stride == 2:
            rest = F.max_pool2d(rest, 2, 2)
        for row in self.out_rows[s]:
            sums[edges[row][0]][1].add(rest, None if step.edge is None else step.edge[row],
                                       None if masks is None else masks[row])

    def _op_output(self, g: OpGroup, h: torch.Tensor, relu: torch.Tensor | None,
                   scales: torch.Tensor | None):
        """None (zero), one tensor shared by the out-edges, or a list with one per out-edge."""
        n, c, p = len(g.slots), self._width(g), self.params
        kind, key = g.kind, g.key
        if kind == "none":
            return None
        if kind == "identity":
            return h
        if kind == "noise":  # one independent draw per out-edge
            return [draw_noise((h.shape[0], c, *_strided(h, g.stride)), h) for _ in range(n)]
        if kind in ("max_pool_3x3", "avg_pool_3x3"):
            pool = F.max_pool2d(h, 3, g.stride, 1) if kind == "max_pool_3x3" else \
                F.avg_pool2d(h, 3, g.stride, 1, count_include_pad=False)
            return self._bn(pool, f"{key}_bn", None)
        if kind == "reduce":
            a = F.conv2d(relu, p[f"{key}_conv_1"], stride=2)
            b = F.conv2d(shifted(relu), p[f"{key}_conv_2"], stride=2)
            halves = [t.unflatten(1, (n, c // 2)) for t in (a, b)]  # (N, n, C/2, H, W)
            if memory_format_of(relu) is torch.channels_last:  # stacked in the input's layout
                y = torch.stack([t.permute(0, 3, 4, 1, 2) for t in halves], dim=4)
                y = y.flatten(3).permute(0, 3, 1, 2)  # (N, H, W, n, 2, C/2) as (N, C', H, W)
            else:
                y = torch.stack(halves, dim=2).flatten(1, 3)
            scale = None if scales is None else scales.repeat_interleave(c)
            return self._bn(y, f"{key}_bn2", scale).split(c, dim=1)
        if self.stacked:
            return self._stacked_convs(g, relu, scales)
        outs = []
        for e in range(n):
            scale = None if scales is None else scales[e].expand(c).contiguous()
            pre = f"{key}_e{e}"
            if kind == "sep":
                x = depthwise(relu, p[f"{pre}_dw1"], g.stride, 1)
                x = F.relu(self._bn(F.conv2d(x, p[f"{pre}_pw1"]), f"{pre}_bn1", None))
                x = depthwise(x, p[f"{pre}_dw2"], 1, 1)
                outs.append(self._bn(F.conv2d(x, p[f"{pre}_pw2"]), f"{pre}_bn2", scale))
            else:
                x = depthwise(relu, p[f"{pre}_dw"], g.stride, 2)
                outs.append(self._bn(F.conv2d(x, p[f"{pre}_pw"]), f"{pre}_bn2", scale))
        return outs

    def _stacked_convs(self, g: OpGroup, relu: torch.Tensor, scales: torch.Tensor | None):
        """The sep/dil convs of all out-edges of a group in one conv each: the first
        depthwise conv with a channel multiplier (channel c * n + e: edge e's filter on channel
        c), the pointwise convs block-diagonal (the first one also reorders to edge-major
        channels e * C + c), the second depthwise over the stacked channels, one BN each."""
        n, c, p, key = len(g.slots), self.width, self.params, g.key
        kind = g.kind
        first, pw = ("dw1", "pw1") if kind == "sep" else ("dw", "pw")
        dw = torch.stack([p[f"{key}_e{e}_{first}"] for e in range(n)], dim=1).flatten(0, 1)
        x = depthwise(relu, dw, g.stride, 1 if kind == "sep" else 2)
        eye = torch.eye(n, dtype=dw.dtype, device=dw.device)
        pws = torch.stack([p[f"{key}_e{e}_{pw}"].flatten(1) for e in range(n)])  # (n, C, C)
        x = F.conv2d(x, torch.einsum("eoc,ef->eocf", pws, eye).reshape(n * c, c * n, 1, 1))
        if kind == "sep":
            x = F.relu(self._bn(x, f"{key}_bn1", None))
            dw2 = torch.cat([p[f"{key}_e{e}_dw2"] for e in range(n)])
            x = depthwise(x, dw2, 1, 1)
            pw2 = torch.block_diag(*[p[f"{key}_e{e}_pw2"].flatten(1) for e in range(n)])
            x = F.conv2d(x, pw2[:, :, None, None])
        scale = None if scales is None else scales.repeat_interleave(c)
        return self._bn(x, f"{key}_bn2", scale).split(c, dim=1)

    # -- weights from the per-edge layout -------------------------------------------------------
    def per_edge_tensors(self, ref: PerEdgeCell, attr: str = "data") -> dict[str, torch.Tensor]:
        """This cell's stacked tensors assembled from the per-edge cell ``ref``.

        ``attr="data"`` gives weights and BN statistics; ``attr="grad"`` the weights' gradients
        (for comparing the two layouts).
        """
        out = {}
        for g in (g for gs in self.groups for g in gs):
            edges = [ref.edges[edge_name(*self.topology.edges[r])] for r, _ in g.slots]
            mods = [e.aux if g.aux else e.ops[k] for e, (_, k) in zip(edges, g.slots, strict=True)]
            for part, tensors in _per_edge_parts(g.kind, mods, attr).items():
                if g.kind in ("sep", "dil") and not (self.stacked and part.startswith("bn")):
                    out.update({f"{g.key}_e{e}_{part}": t for e, t in enumerate(tensors)})
                else:
                    out[f"{g.key}_{part}"] = torch.cat(tensors)
        return out

    @torch.no_grad()
    def load_per_edge(self, ref: PerEdgeCell) -> None:
        """Copy the weights and BN statistics of the per-edge cell ``ref``."""
        for name, value in self.per_edge_tensors(ref).items():
            target = self.params[name] if name in self.params else getattr(self, name)
            target.copy_(value)

    def grads(self) -> dict[str, torch.Tensor]:
        """Gradients of the stacked weights, by the names of ``per_edge_tensors``."""
        return {name: p.grad for name, p in self.params.items()}


@dataclass
class _Step:
    """What every source of one cell forward reads."""

    weights: torch.Tensor  # (E, K) mixing weights (times the edge betas)
    scalars: tuple  # the same, flattened into 0-dim tensors
    edge: tuple | None  # the edge betas (PC-DARTS), None without
    aux: tuple | None  # DARTS-' beta per edge, None without the auxiliary skip
    masks: list | None  # drop-path mask / keep per edge, None when off
    report: OpReporter | None


def depthwise(x: torch.Tensor, w: torch.Tensor, stride: int, dilation: int) -> torch.Tensor:
    """Depthwise k x k conv, 'same' padding, by the fastest exact route on CPU (``w``: one
    filter per channel of ``x``, or a multiple: each channel's filters in turn).

    Dilation 2 at stride 2 reads only the even pixels: a plain conv of x[:, :, ::2, ::2].
    Dilation 2 at stride 1: one filter per channel, the kernel spread onto a (2k-1) x (2k-1)
    grid of zeros (faster than PyTorch's dilated depthwise backward on CPU in NCHW, as fast
    in channels_last; the zeros add exact zeros); several filters per channel (PC-DARTS'
    stacked convs), the dilated conv itself (2-3x faster than the spread kernel there).
    """
    c, k = x.shape[1], w.shape[-1]
    if dilation == 1:
        return F.conv2d(x, w, stride=stride, padding=k // 2, groups=c)
    if stride == 2:
        return F.conv2d(x[:, :, ::2, ::2], w, padding=k // 2, groups=c)
    if w.shape[0] > c:  # several filters per channel: oneDNN's dilated conv is 2-3x faster
        return F.conv2d(x, w, padding=k - 1, dilation=2, groups=c)
    spread = w.new_zeros(w.shape[0], 1, 2 * k - 1, 2 * k - 1)
    spread[:, :, ::2, ::2] = w
    return F.conv2d(x, spread, padding=k - 1, groups=c)


def _strided(h: torch.Tensor, stride: int) -> tuple[int, int]:
    return (h.shape[2] + stride - 1) // stride, (h.shape[3] + stride - 1) // stride


def _per_edge_parts(kind: str, mods: list[nn.Module], attr: str) -> dict[str, list]:
    """The per-edge tensors of one op group, by the fused part name (weights or BN stats)."""
    def get(t):
        return getattr(t, attr)

    def bn(norms, part):
        return {f"{part}_mean": [b.running_mean for b in norms],
                f"{part}_var": [b.running_var for b in norms]}

    if kind == "sep":
        seqs = [m.op for m in mods]
        parts = {name: [get(s[i].weight) for s in seqs]
                 for name, i in zip(CONV_PARTS["sep"], (1, 2, 5, 6), strict=True)}
        if attr == "data":
            parts.update(bn([s[3] for s in seqs], "bn1"))
            parts.update(bn([s[7] for s in seqs], "bn2"))
        return parts
    if kind == "dil":
        seqs = [m.op for m in mods]
        parts = {"dw": [get(s[1].weight) for s in seqs], "pw": [get(s[2].weight) for s in seqs]}
        if attr == "data":
            parts.update(bn([s[3] for s in seqs], "bn2"))
        return parts
    if kind == "reduce":
        parts = {"conv_1": [get(m.conv_1.weight) for m in mods],
                 "conv_2": [get(m.conv_2.weight) for m in mods]}
        if attr == "data":  # per edge: [conv_1 channels, conv_2 channels], as in the fused order
            parts.update(bn([m.bn for m in mods], "bn2"))
        return parts
    if kind in ("max_pool_3x3", "avg_pool_3x3") and attr == "data":
        return bn([mods[0][1]], "bn")  # every out-edge's BN saw the same input
    return {}
