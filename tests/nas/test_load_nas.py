"""genlab.load of a `nas train` and a `nas search` run folder: the checkpoint's model record
rebuilds the network (from space name, genotype text and sizes) or the supernet with its
alphas, and the rebuilt model computes what the trained one computes."""

import torch

import genlab
from genlab.core.storage.checkpoints import load_checkpoint
from genlab.nas.data import load_image_data
from genlab.nas.retrain import RetrainConfig, retrain
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import build_space_network, build_space_supernet

S2_CELL = ("Genotype(normal=[('skip_connect', 0), ('sep_conv_3x3', 1), ('skip_connect', 0), "
           "('sep_conv_3x3', 1), ('sep_conv_3x3', 0), ('skip_connect', 2), ('skip_connect', 0), "
           "('sep_conv_3x3', 1)], normal_concat=[2, 3, 4, 5], reduce=[('skip_connect', 0), "
           "('sep_conv_3x3', 1), ('skip_connect', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0), "
           "('skip_connect', 2), ('skip_connect', 0), ('sep_conv_3x3', 1)], "
           "reduce_concat=[2, 3, 4, 5])")


def _x():
    return load_image_data("digits", size=8, seed=0).test.images[:16]


def test_a_retrained_network_loads_from_its_run_folder(tmp_path):
    cfg = RetrainConfig(arch=S2_CELL, space="s2", channels=4, cells=3, epochs=1)
    retrain(cfg, tmp_path / "r")
    run = genlab.load(tmp_path / "r", kind="nas train")
    assert run.kind == "nas train" and run.config["arch"] == S2_CELL
    state = load_checkpoint(tmp_path / "r" / "checkpoint.pt")
    twin = build_space_network("s2", S2_CELL, 10, 1, 4, 3, {"auxiliary": True,
                                                             "drop_path": 0.0}).eval()
    twin.load_state_dict(state["model"])
    with torch.no_grad():
        assert torch.allclose(run.model(_x()), twin(_x()))


def test_a_search_supernet_loads_with_its_alphas(tmp_path):
    cfg = SearchConfig(channels=2, cells=1, steps=2, batch_size=16, hessian_points=0,
                       diag_batch=8)
    summary = run_search(cfg, tmp_path / "s")
    run = genlab.load(tmp_path / "s", kind="nas search")
    alphas = {k: v.tolist() for k, v in run.model.alphas().items()}
    assert alphas == summary["alpha"]
    state = load_checkpoint(tmp_path / "s" / "checkpoint.pt")
    twin = build_space_supernet("nb201", 10, 1, 2, 1).eval()
    twin.load_state_dict(state["net"])
    with torch.no_grad():
        assert torch.allclose(run.model(_x()), twin(_x()))
