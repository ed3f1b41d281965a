"""Probes: what a supernet's search cells compute, reported to the caller during a forward.

``net(x, probe=probe)`` calls, for every search cell in forward order,
``probe.node(trace)`` with a :class:`CellTrace`: the name of the alpha tensor that governs
the cell, the cell's inputs, the outputs of its intermediate nodes and its output, all with
their autograd graph (a regulariser may back-propagate through them to alpha). When
``probe.wants_ops`` is set, the supernet also calls ``probe.op(alpha, cell, row, col, out)``
with every candidate op's unscaled output (before the softmax weight) on edge ``row`` of that
alpha, op column ``col``; ``out`` may be detached, and is None for ``none`` (zero).

The probe decides what to keep; the supernet only reports. Every space's supernets (fused and
per-edge) report the same traces, which the tests check.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CellTrace:
    """What one search cell computed in one forward pass."""

    alpha: str  # the alpha tensor governing the cell ("cell", "normal", "reduce", ...)
    index: int  # the cell's position among the supernet's search cells
    inputs: tuple[torch.Tensor, ...]  # the cell's inputs (before any preprocessing)
    nodes: tuple[torch.Tensor, ...]  # outputs of the intermediate nodes, in node order
    output: torch.Tensor  # the cell's output


class Probe:
    """Base probe: ignores everything. Subclass and override ``node`` and/or ``op``."""

    wants_ops: bool = False

    def node(self, trace: CellTrace) -> None:
        """Called once per search cell, in forward order."""

    def op(self, alpha: str, cell: int, row: int, col: int,
           output: torch.Tensor | None) -> None:
        """Called per candidate op and edge when ``wants_ops`` is set (``None`` for zero ops)."""


class CellPairs(Probe):
    """Collects (last cell input, cell output) per search cell: the points of the IB plane."""

    def __init__(self):
        self.pairs: list[tuple[torch.Tensor, torch.Tensor]] = []

    def node(self, trace: CellTrace) -> None:
        self.pairs.append((trace.inputs[-1], trace.output))


class CellTraces(Probe):
    """Keeps every cell's trace and, when built with ``ops=True``, every op output by key."""

    def __init__(self, ops: bool = False):
        self.wants_ops = ops
        self.traces: list[CellTrace] = []
        self.ops: dict[tuple[str, int, int, int], torch.Tensor | None] = {}

    def node(self, trace: CellTrace) -> None:
        self.traces.append(trace)

    def op(self, alpha: str, cell: int, row: int, col: int,
           output: torch.Tensor | None) -> None:
        self.ops[alpha, cell, row, col] = output
