"""genlab.nas.studies.entropy_peak: node-by-node recomputation, probe alignment, onsets."""

import json

import pytest
import torch

import genlab.nas.studies.entropy_peak as entropy_peak_module
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces.nb201.genotype import NB201_OPS
from genlab.nas.spaces.nb201.supernet import NB201SuperNet
from genlab.nas.supernet.probe import CellTraces


@pytest.fixture(scope="module")
def peak():
    return entropy_peak_module


def test_cell_nodes_reproduce_the_fused_cell(peak):
    # the per-edge reference supernet (one module per op) lends its weights to the fused one;
    # its probe traces are the independent node-by-node truth
    torch.manual_seed(0)
    net = NB201SuperNet(C=3, N=1, num_classes=3, in_channels=1).double()
    ref = NB201SuperNet(C=3, N=1, num_classes=3, in_channels=1, per_edge=True).double()
    net.load_per_edge(ref)
    x = torch.randn(10, 1, 6, 6, dtype=torch.float64)
    with torch.no_grad():
        ref.arch_params.normal_()
        net.arch_params.copy_(ref.arch_params)
        traces = CellTraces()
        ref.train()(x, probe=traces)
        fused = CellTraces()
        net.train()(x, probe=fused)
    w = torch.softmax(net.arch_params, -1)
    cell, trace = net.search_cells()[0], fused.traces[0]
    nodes = peak.cell_nodes(cell, trace.inputs[-1], w)
    assert torch.allclose(nodes[-1], trace.output, atol=1e-10)
    ref_trace = traces.traces[0]
    for mine, theirs in zip(nodes[1:], ref_trace.nodes, strict=True):
        assert torch.allclose(mine, theirs, atol=1e-10)


def test_probed_search_pairs_nodes_with_metrics_and_leaves_the_search_alone(peak, tmp_path):
    cfg = SearchConfig(reg="none", steps=22, channels=4, hessian_points=0)
    metrics = peak.probed_search(cfg, tmp_path / "probed")
    plain = run_search(cfg, tmp_path / "plain", progress_bar=False)
    assert len(metrics) == 2 and all(len(m["nodes"]) == 3 for m in metrics)
    assert all(len(cell) == 4 for m in metrics for cell in m["nodes"])
    probed = json.loads((tmp_path / "probed" / "summary.json").read_text())
    assert probed["alpha"] == plain["alpha"]  # the probe reads, never writes
    assert peak.probed_search(cfg, tmp_path / "probed") == metrics  # reused when finished
    assert peak.analyse(metrics, NB201_OPS)["peak_step"] in (11, 22)


def test_onset_rules_on_hand_curves(peak):
    steps = [10, 20, 30, 40, 50, 60]
    assert peak.rise_onset(steps, [0.6, 0.55, 0.5, 0.52, 0.58, 0.7]) == 30
    assert peak.rise_onset(steps, [0.6, 0.55, 0.5, 0.5, 0.49, 0.5]) is None  # no clear rise
    assert peak.count_onset(steps, [2, 1, 3, 1, 2, 3]) == 50
    assert peak.count_onset(steps, [2, 1, 3, 1, 2, 1]) is None


def test_moving_average_hand_values(peak):
    got = peak.moving_average([0.0, 3.0, 6.0, 3.0], 3)
    assert got.tolist() == pytest.approx([1.5, 3.0, 4.0, 4.5])
