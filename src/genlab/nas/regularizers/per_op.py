"""``ber-op`` and ``ber-ib``: per-op BER candidates (ours; the paper's formula is not public).

Both act on alpha only (the architecture step) and read the search cells through a probe
(genlab.nas.supernet.probe); H_B is Peer et al.'s batch entropy (genlab.nas.entropy.batch_entropy).

- ``ber-op``: a per-op compression penalty, R = sum over alpha tensors of
  mean_e sum_k p_ek sg[D_ek], p_e = softmax(alpha_e),
  D_ek = relu(H_B(x_e) - H_B(o_ek)): the batch entropy that op k's unscaled output o_ek loses
  relative to the edge input x_e, averaged over the cells that share the alpha tensor (sg: no
  gradient through the features). The gradient on alpha_e is p_e * (D_e - p_e . D_e) / |E|:
  it pushes alpha away from the ops that discard more batch entropy than the edge's average
  (``none``, whose output is 0, loses all of it; pooling loses some) from step 0, and is
  nearly indifferent between ops that keep it (convolutions with BatchNorm, skip), which it
  leaves to the data. Edge inputs are read from the cell's trace: state s of an edge 't<-s'
  is ``(inputs + nodes)[s]``; in the DARTS spaces the inputs are those before the cells'
  preprocessing (an approximation of the edge input, stated here).
- ``ber-ib``: the same per-op form with the label information each op loses,
  R = sum over alpha tensors of mean_e sum_k p_ek sg[I_B(x_e; Y) - I_B(o_ek; Y)],
  I_B(T; Y) = H_B(T) - H_B(T | Y) (genlab.nas.entropy.label_information; Y the validation
  labels). Batch entropy alone is blind between a convolution (whose BatchNorm resets H_B) and a
  skip connection (which passes H_B through): ber-op's cost is ~0 for both. The label
  information is a ratio of total to within-class spread, so BatchNorm does not hide it: ops
  whose output separates the classes better than their input (trained convolutions) get a
  negative cost, skip exactly 0, ``none`` (I_B = 0) and pooling a positive one. It restrains
  the compression of the information about the target, the IB's prediction term, op by op.

Presets: each candidate's calibrated mid-point (docs/ber.md and docs/ber_round3.md, "Calibration"),
constant schedule.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError
from genlab.nas.entropy import batch_entropy, label_information, spatial_mean
from genlab.nas.regularizers.base import Penalty, register_penalty
from genlab.nas.supernet.probe import CellTraces

EDGE_RE = re.compile(r"^(\d+)<-(\d+)$")


def edge_sources(rows: tuple[str, ...]) -> list[int]:
    """The source state of every alpha row named 't<-s' (a ConfigError for other names)."""
    out = []
    for row in rows:
        m = EDGE_RE.match(row)
        if m is None:
            raise ConfigError(f"ber-op and ber-ib need alpha rows that are edges 't<-s'; got row "
                              f"{row!r} (this space has no edge inputs to compare op outputs "
                              "with)")
        out.append(int(m.group(2)))
    return out


class PerOpPenalty(Penalty):
    """R = sum over alpha tensors of mean_e sum_k p_ek sg[c_ek], c_ek a cost of op k's unscaled
    output on edge e against the edge input (mean over the cells sharing the alpha tensor).

    The gradient on alpha_e is p_e * (c_e - p_e . c_e) / |E|: it moves probability from the ops
    that cost more than the edge's average to those that cost less. Subclasses give the cost."""

    needs_probe = True
    name = "per-op"

    def __init__(self, **params: float):
        super().__init__(**params)
        self.sources: dict[str, list[int]] = {}

    def make_probe(self) -> CellTraces:
        return CellTraces(ops=True)

    def setup(self, net, x: torch.Tensor, space) -> None:
        self.sources = {name: edge_sources(spec.rows)
                        for name, spec in space.alpha_specs().items()}

    def statistic(self, t: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        """The feature statistic the cost compares (0 for a zero output)."""
        raise NotImplementedError

    def cost(self, at_input: torch.Tensor, at_output: torch.Tensor) -> torch.Tensor:
        """c_ek from the statistic at the edge input and at the op's output."""
        raise NotImplementedError

    def losses(self, alphas, probe: CellTraces,
               labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """c per alpha tensor, shape (rows, K), averaged over the cells sharing it (no graph)."""
        if not probe.traces or not probe.ops:
            raise ConfigError(f"{self.name} needs every op's output: pass the probe from "
                              "make_probe() (wants_ops) to the supernet's forward")
        sums: dict[str, torch.Tensor] = {}
        counts: dict[str, int] = {}
        with torch.no_grad():
            for tr in probe.traces:
                alpha = alphas[tr.alpha]
                if tr.alpha not in self.sources:
                    raise ConfigError(f"{self.name} has no edge sources for alpha {tr.alpha!r}: "
                                      "call setup(net, x, space) first")
                states = tr.inputs + tr.nodes
                c = torch.zeros(alpha.shape, dtype=alpha.dtype, device=alpha.device)
                for r, s in enumerate(self.sources[tr.alpha]):
                    at_input = self.statistic(states[s], labels)
                    for k in range(alpha.shape[1]):
                        out = probe.ops.get((tr.alpha, tr.index, r, k))
                        at_output = (torch.zeros_like(at_input) if out is None
                                     else self.statistic(out, labels))
                        c[r, k] = self.cost(at_input, at_output)
                sums[tr.alpha] = sums.get(tr.alpha, 0) + c
                counts[tr.alpha] = counts.get(tr.alpha, 0) + 1
        return {name: sums[name] / counts[name] for name in sums}

    def penalty(self, alphas, probe, val_loss=None, labels=None) -> torch.Tensor:
        total = None
        for name, c in self.losses(alphas, probe, labels).items():
            term = (F.softmax(alphas[name], dim=-1) * c).sum(-1).mean()
            total = term if total is None else total + term
        return total


@register_penalty
class OpCompression(PerOpPenalty):
    """ber-op: c_ek = relu(H_B(edge input) - H_B(op output)), the batch entropy the op loses."""

    name = "ber-op"
    preset = {"strength": 2.66, "schedule": "constant"}

    def statistic(self, t, labels=None) -> torch.Tensor:
        return batch_entropy(t)

    def cost(self, at_input, at_output) -> torch.Tensor:
        return F.relu(at_input - at_output)


@register_penalty
class OpLabelInformation(PerOpPenalty):
    """ber-ib: c_ek = I_B(edge input; Y) - I_B(op output; Y), the label information it loses."""

    name = "ber-ib"
    preset = {"strength": 17.3, "schedule": "constant"}

    def statistic(self, t, labels=None) -> torch.Tensor:
        if labels is None:
            raise ConfigError("ber-ib measures label information: pass the validation labels")
        return label_information(t, labels)

    def cost(self, at_input, at_output) -> torch.Tensor:
        return at_input - at_output


@register_penalty
class OpPooledInformation(PerOpPenalty):
    """ber-xu: c_ek = relu(H_B(x_e) - H_B(o_ek)) + [I_B(m(x_e); Y) - I_B(m(o_ek); Y)], m the
    spatial mean of every channel: the batch entropy the op loses per unit (ber-op's cost)
    plus the label information it loses across the units of a channel (a local average
    barely changes a channel's spatial mean, so pooling gains none of it)."""

    name = "ber-xu"
    preset = {"strength": 2.59, "schedule": "constant"}

    def statistic(self, t, labels=None) -> torch.Tensor:
        if labels is None:
            raise ConfigError("ber-xu measures label information: pass the validation labels")
        return torch.stack([batch_entropy(t), label_information(spatial_mean(t), labels)])

    def cost(self, at_input, at_output) -> torch.Tensor:
        return F.relu(at_input[0] - at_output[0]) + (at_input[1] - at_output[1])
