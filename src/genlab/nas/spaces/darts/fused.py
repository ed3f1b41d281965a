"""The fused DARTS-space search cell: the per-edge mixed ops regrouped by source state.

Same function as the per-edge cell (genlab.nas.cells.PerEdgeCell with the ops of
genlab.nas.spaces.darts.supernet.search_op; checked in tests and in benchmarks/nas_step.py),
computed with fewer, larger kernels:

- every op that reads state s is computed once for all out-edges of s that offer it: one ReLU
  per source; the depthwise and pointwise convs of the out-edges stacked into grouped convs
  over the input repeated once per edge (edge-major channels); FactorizedReduce's two 1x1
  convs stacked the same way;
- a pool followed by BN(affine=False) gives the same tensor on every out-edge (the BN's batch
  statistics, and so its running statistics, are those of one input): it is computed once per
  source, with one set of running statistics;
- the softmax weight of an edge's conv op becomes the per-channel scale of its last BN, so
  w * BN(x) costs nothing extra; pools, skip and noise enter the node sums with scalar weights,
  accumulated in place (genlab.nas.nodesum.NodeSum);
- `none` (zero) is skipped; its weight still enters the softmax.

RobustDARTS spaces offer different ops on different edges: each (source, op) group holds only
the out-edges that offer the op.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.parallel.data_parallel import batch_norm
from genlab.nas.cells import CellTopology, OpReporter, PerEdgeCell, edge_name
from genlab.nas.nodesum import NodeSum
from genlab.nas.ops import DIL_CONVS, SEP_CONVS, draw_noise, shifted

BN_MOMENTUM, BN_EPS = 0.1, 1e-5
# parameter tensors of each conv kind, with their (per-edge) shapes given C and kernel k
CONV_PARTS = {
    "sep": ("dw1", "pw1", "dw2", "pw2"),
    "dil": ("dw", "pw"),
    "reduce": ("conv_1", "conv_2"),
}


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
    def kind(self) -> str:
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
    """The DAG of a DARTS-space cell over preprocessed input states (module docstring)."""

    def __init__(self, topology: CellTopology, edge_ops: Sequence[Sequence[str]], channels: int,
                 reduction: bool):
        super().__init__()
        self.topology, self.channels = topology, channels
        self.edge_ops = tuple(tuple(ops) for ops in edge_ops)
        self.num_ops = len(self.edge_ops[0])
        last = topology.num_inputs + topology.num_nodes - 1
        self.groups: list[list[OpGroup]] = []
        for s in range(last):
            stride = 2 if reduction and s < topology.num_inputs else 1
            by_op: dict[str, list[tuple[int, int]]] = {}
            for row, (_, source) in enumerate(topology.edges):
                if source == s:
                    for col, name in enumerate(self.edge_ops[row]):
                        by_op.setdefault(name, []).append((row, col))
            self.groups.append([OpGroup(s, n, tuple(slots), stride) for n, slots in by_op.items()])
        self.params = nn.ParameterDict()
        for group in (g for gs in self.groups for g in gs):
            self._build(group)

    # -- parameters ------------------------------------------------------------------------
    def _build(self, g: OpGroup) -> None:
        n, c = len(g.slots), self.channels
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
                report: OpReporter | None = None) -> list[torch.Tensor]:
        """The intermediate nodes, given the preprocessed inputs and the (E, K) weights."""
        topo = self.topology
        scalars = weights.reshape(-1).unbind()
        first = topo.num_inputs
        terms = {t: ([], [], []) for t in range(first, first + topo.num_nodes)}
        states = list(states)
        for s in range(first):
            self._emit(s, states[s], weights, scalars, terms, report)
        for t in range(first, first + topo.num_nodes):
            plain, weighted, scales = terms[t]
            node = NodeSum.apply(len(plain), tuple(scales), *plain, *weighted)
            states.append(node)
            if t < len(self.groups):
                self._emit(t, node, weights, scalars, terms, report)
        return states[first:]

    def _emit(self, s: int, h: torch.Tensor, weights: torch.Tensor, scalars, terms: dict,
              report: OpReporter | None) -> None:
        """Add every op of source ``s`` to the terms of its target nodes."""
        relu = None
        for g in self.groups[s]:
            if g.kind in ("sep", "dil", "reduce") and relu is None:
                relu = F.relu(h)
            scales = None  # the edge weights as BN scales (not when unscaled outputs are wanted)
            if report is None and g.kind in ("sep", "dil", "reduce"):
                scales = weights[getattr(self, f"{g.key}_rows"), getattr(self, f"{g.key}_cols")]
            out = self._op_output(g, h, relu, scales)
            for e, (row, col) in enumerate(g.slots):
                target = self.topology.edges[row][0]
                if out is None:  # none
                    if report is not None:
                        report(row, col, None)
                    continue
                piece = out[e] if g.per_edge_output else out
                if report is not None:
                    report(row, col, piece.detach())
                plain, weighted, node_scales = terms[target]
                if scales is not None:
                    plain.append(piece)
                else:
                    weighted += [piece, scalars[row * self.num_ops + col]]
                    node_scales.append(None)

    def _op_output(self, g: OpGroup, h: torch.Tensor, relu: torch.Tensor | None,
                   scales: torch.Tensor | None):
        """None (zero), one tensor shared by the out-edges, or a list with one per out-edge."""
        n, c, p = len(g.slots), self.channels, self.params
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
            y = torch.stack([a.unflatten(1, (n, c // 2)), b.unflatten(1, (n, c // 2))], dim=2)
            scale = None if scales is None else scales.repeat_interleave(c)
            return self._bn(y.flatten(1, 3), f"{key}_bn2", scale).split(c, dim=1)
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

    # -- weights from the per-edge layout -------------------------------------------------------
    def per_edge_tensors(self, ref: PerEdgeCell, attr: str = "data") -> dict[str, torch.Tensor]:
        """This cell's stacked tensors assembled from the per-edge cell ``ref``.

        ``attr="data"`` gives weights and BN statistics; ``attr="grad"`` the weights' gradients
        (for comparing the two layouts).
        """
        out = {}
        for g in (g for gs in self.groups for g in gs):
            mods = [ref.edges[edge_name(*self.topology.edges[r])].ops[k] for r, k in g.slots]
            for part, tensors in _per_edge_parts(g.kind, mods, attr).items():
                if g.kind in ("sep", "dil"):
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


def depthwise(x: torch.Tensor, w: torch.Tensor, stride: int, dilation: int) -> torch.Tensor:
    """Depthwise k x k conv, 'same' padding, by the fastest exact route on CPU.

    Dilation 2 at stride 2 reads only the even pixels: a plain conv of x[:, :, ::2, ::2].
    Dilation 2 at stride 1: the kernel spread onto a (2k-1) x (2k-1) grid of zeros (faster
    than PyTorch's dilated depthwise backward on CPU; the zeros add exact zeros).
    """
    c, k = w.shape[0], w.shape[-1]
    if dilation == 1:
        return F.conv2d(x, w, stride=stride, padding=k // 2, groups=c)
    if stride == 2:
        return F.conv2d(x[:, :, ::2, ::2], w, padding=k // 2, groups=c)
    spread = w.new_zeros(c, 1, 2 * k - 1, 2 * k - 1)
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
