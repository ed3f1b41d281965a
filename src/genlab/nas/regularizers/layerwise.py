"""``ber-lbe``: a BER candidate built on batch entropy (ours; the paper's formula is not public).

It acts on alpha only (the architecture step) and reads the search cells through a probe
(genlab.nas.supernet.probe); H_B is Peer et al.'s batch entropy (genlab.nas.entropy.batch_entropy).

Peer et al.'s layerwise batch-entropy loss (TMLR 2022) carried over to the
  architecture step. Over the nodes T_n of every search cell (intermediate nodes and output),

      L = CE_val x [1 + beta x mean_n (H_B(T_n) - max(h_min, |h_n|))^2],

  with one learnable target h_n per node, trained by the alpha optimiser and initialised at the
  node's batch entropy on the first validation batch. The penalty is two-sided (it resists
  both the decay and the inflation of a node's batch entropy away from its target) and fades
  as CE falls. The regulariser's term is ``beta x CE_val x mean_n (...)^2`` (strength = beta).

Preset: its calibrated mid-point (docs/ber.md, "Calibration"), constant schedule.
"""

from __future__ import annotations

import copy

import torch

from genlab.core.errors import ConfigError
from genlab.nas.entropy import batch_entropy, global_batch_entropy
from genlab.nas.regularizers.base import Penalty, register_penalty
from genlab.nas.supernet.probe import CellTraces


def node_entropies(probe: CellTraces) -> torch.Tensor:
    """H_B of every node of every traced cell (cells in forward order, nodes in order)."""
    if not probe.traces:
        raise ConfigError("the batch-entropy penalties need the cells' traces: pass the probe "
                          "from make_probe() to the supernet's forward")
    return torch.stack([batch_entropy(t) for tr in probe.traces for t in tr.nodes])


def node_entropy_reading(probe: CellTraces) -> torch.Tensor:
    """The mean of node_entropies() over every node, each of the global batch under torchrun
    (global_batch_entropy; the one-process value otherwise): the entropy-turn candidates'
    reading, the same on every rank."""
    if not probe.traces:
        return node_entropies(probe).mean()  # its error names the missing probe
    return torch.stack([global_batch_entropy(t) for tr in probe.traces
                        for t in tr.nodes]).mean()


@register_penalty
class LayerwiseBatchEntropy(Penalty):
    """ber-lbe: Peer's layerwise batch-entropy loss on the cell nodes, learnable targets."""

    name = "ber-lbe"
    needs_probe = True
    uses_val_loss = True
    preset = {"strength": 36.2, "schedule": "constant"}
    params = {"h_min": 0.0}  # the floor of the learnable node targets

    def __init__(self, **params: float):
        super().__init__(**params)
        if not self.h_min >= 0:
            raise ConfigError(f"--reg-param h_min must be >= 0, got {self.h_min}")
        self.targets: torch.nn.Parameter | None = None

    def make_probe(self) -> CellTraces:
        return CellTraces()

    def setup(self, net, x: torch.Tensor, space) -> None:
        """Create the targets h_n at the nodes' batch entropy on ``x`` (a copy of the net runs)."""
        twin = copy.deepcopy(net).train()
        probe = self.make_probe()
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            twin(x, probe=probe)
        self.targets = torch.nn.Parameter(node_entropies(probe).detach().clone())

    def parameters(self) -> list[torch.Tensor]:
        return [] if self.targets is None else [self.targets]

    def penalty(self, alphas, probe, val_loss: torch.Tensor | None,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        if self.targets is None:
            raise ConfigError("ber-lbe's targets are not set: call setup(net, x, space) first")
        if val_loss is None:
            raise ConfigError("ber-lbe multiplies the validation cross-entropy: pass val_loss")
        h = node_entropies(probe)
        if h.shape != self.targets.shape:
            raise ConfigError(f"ber-lbe has {self.targets.numel()} node targets but the probe "
                              f"traced {h.numel()} nodes")
        target = torch.clamp(self.targets.abs(), min=self.h_min)
        return val_loss * ((h - target) ** 2).mean()

    def state_dict(self) -> dict:
        return {} if self.targets is None else {"targets": self.targets.detach().clone()}

    def load_state_dict(self, state: dict) -> None:
        if "targets" in state:
            if self.targets is None:
                self.targets = torch.nn.Parameter(state["targets"].clone())
            else:
                with torch.no_grad():
                    self.targets.copy_(state["targets"])


