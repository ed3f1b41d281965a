"""`genlab nas search` and `genlab nas train` in every registered space, through the CLI.

In process (``genlab.cli.main``), at tiny sizes. The search plots are replaced by a no-op here:
their files are checked by the search's own output-contract test, and drawing them would cost
more than the searches.
"""

import json

import pytest
import torch
from nas_reference import DARTS_V2 as V2
from nas_reference import SEARCH_CONTRACT as CONTRACT

import genlab.nas.retrain as retrain_mod
import genlab.nas.search as search_mod
import genlab.nas.spaces.darts.network as darts_networks
from genlab.cli import main
from genlab.nas import build_darts_network
from genlab.nas.spaces import get_space, space_names


def _run(argv):
    """Run the CLI in this process; its exit code (0 when it returns normally)."""
    try:
        main(argv)
    except SystemExit as exc:
        return 0 if exc.code is None else exc.code
    return 0


def _search(tmp_path, name, order):
    sp = get_space(name)
    size = [] if sp.proxy.cells is None else ["-N", str(min(3, sp.proxy.cells))]
    out = tmp_path / f"{name}-{order}"
    code = _run(["nas", "search", "--space", name, "--dataset", "digits", "--out", str(out),
                 "--order", str(order), "-C", "2", *size, "--steps", "1", "--batch-size", "8",
                 "--hessian-points", "0"])
    assert code == 0
    metrics = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    return (json.loads((out / "summary.json").read_text()),
            json.loads((out / "config.json").read_text()), metrics[-1])


@pytest.fixture
def quiet_search(monkeypatch):
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)  # no table: the same keys everywhere
    monkeypatch.setattr(search_mod, "_plots", lambda run, history, space: None)


def test_search_cli_in_every_space_first_and_second_order(tmp_path, quiet_search):
    keys = {}
    for name in space_names():
        sp = get_space(name)
        val_loss = {}
        for order in (1, 2):
            s, config, last = _search(tmp_path, name, order)
            keys[name, order] = set(s)
            assert (s["space"], s["order"], config["order"]) == (name, order, order)
            assert config["size"] == sp.proxy.size  # the space's proxy default, resolved
            # the genotype is the space's text of the derivation from the stored alphas
            genotype = sp.parse(s["genotype"])
            assert sp.format(genotype) == s["genotype"], name
            stored = {k: torch.tensor(v) for k, v in s["alpha"].items()}
            assert list(stored) == list(sp.alpha_specs()), name
            assert sp.derive(stored) == genotype, name
            val_loss[order] = last["val_loss"]
        # one step from the same weights and batches: first order reports L_val at w, second
        # order at the virtual step's w' (it ran the unrolled gradient)
        assert val_loss[1] != pytest.approx(val_loss[2], rel=1e-6), name
    # the same summary keys in every space and order
    reference = keys["nb201", 1]
    assert CONTRACT <= reference
    assert {k: v ^ reference for k, v in keys.items() if v != reference} == {}


def test_train_darts_genotype_with_the_upstream_recipe(tmp_path, monkeypatch):
    seen = {"drop": [], "cutout": [], "loss": []}
    real_drop, real_cutout, real_loss = (darts_networks.drop_path, retrain_mod.cutout,
                                         retrain_mod.recipe_loss)

    def drop(x, prob):
        seen["drop"].append(round(prob, 12))
        return real_drop(x, prob)

    def cut(x, generator, side):
        seen["cutout"].append(side)
        return real_cutout(x, generator, side)

    def loss(aux_weight):
        fn = real_loss(aux_weight)

        def spy(out, y):
            seen["loss"].append((aux_weight, isinstance(out, tuple)))
            return fn(out, y)

        return spy

    monkeypatch.setattr(darts_networks, "drop_path", drop)
    monkeypatch.setattr(retrain_mod, "cutout", cut)
    monkeypatch.setattr(retrain_mod, "recipe_loss", loss)
    out = tmp_path / "t"
    assert _run(["nas", "train", V2, "--space", "darts", "--out", str(out), "-C", "4", "-N",
                 "3", "--epochs", "3", "--batch-size", "256"]) == 0
    s = json.loads((out / "summary.json").read_text())
    config = json.loads((out / "config.json").read_text())
    # the upstream recipe (quark0/darts train.py), only the size scaled by flags
    assert {k: config[k] for k in ("lr", "momentum", "nesterov", "weight_decay", "grad_clip",
                                   "auxiliary_weight", "drop_path", "cutout")} == {
        "lr": 0.025, "momentum": 0.9, "nesterov": False, "weight_decay": 3e-4, "grad_clip": 5.0,
        "auxiliary_weight": 0.4, "drop_path": 0.2, "cutout": True}
    # drop-path ramps as upstream, p * epoch / epochs: off in epoch 0, then 0.2/3 and 0.4/3
    assert sorted(set(seen["drop"])) == [round(0.2 / 3, 12), round(0.4 / 3, 12)]
    # cutout of half the image side (8x8 digits: 4) on every training batch
    batches = len(seen["loss"])
    assert batches > 3 and seen["cutout"] == [config["size"] // 2] * batches
    # the auxiliary head's logits reach the loss, weighted 0.4, on every training batch
    assert set(seen["loss"]) == {(0.4, True)}
    net = build_darts_network(V2, 10, C=4, layers=3, auxiliary=False, in_channels=1)
    assert s["params"] == sum(p.numel() for p in net.parameters())
    assert s["space"] == "darts" and 0 <= s["test_acc"] <= 100


CUT = V2.replace("normal_concat=[2, 3, 4, 5]", "normal_concat=[]")


@pytest.mark.parametrize("space, arch, needle", [
    ("darts", V2[:-1], "not readable ('(' was never closed"),
    ("darts", V2.replace("('sep_conv_3x3', 0)", "('sep_conv_3x3' 0)", 1), "at character 19"),
    ("darts", V2.replace("normal=", "norml="), "unknown field 'norml'"),
    ("darts", V2.replace("normal_concat=[2, 3, 4, 5], ", ""), "lacks field(s) normal_concat"),
    ("darts", V2.replace("('sep_conv_3x3', 0)", "('sep_conv_3x3', -1)", 1),
     "bad gene \"('sep_conv_3x3', -1)\""),
    ("darts", V2.replace("Genotype(", "Genome("), "must be written Genotype("),
    ("darts", CUT, "normal_concat is empty"),
    ("darts", V2.replace("normal_concat=[2, 3, 4, 5]", "normal_concat=[2, 6]"),
     "normal_concat index 6"),
    ("darts", "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|"
              "nor_conv_3x3~1|nor_conv_1x1~2|",
     "not a darts genotype: it looks like a nb201 genotype; pass --space nb201"),
    ("s4", V2, "op 'skip_connect' of gene ('skip_connect', 0) in the normal cell is not in "
               "space s4"),
    ("s1", V2, "op 'sep_conv_3x3' of gene ('sep_conv_3x3', 0) in the normal cell is not in "
               "space s1"),
    ("darts-7op", V2.replace("('dil_conv_3x3', 2)", "('none', 2)"), "op 'none'"),
    ("nb201", V2, "not a nb201 genotype: it looks like a darts genotype"),
    ("mobilenet", ",".join(["3x3_MBConv3"] * 22), "has 22 choice(s); expected 21"),
    ("mobilenet", ",".join(["3x3_MBConv9"] * 21), "choice '3x3_MBConv9' of block 0"),
])
def test_train_bad_genotype_one_line_exit_2(tmp_path, capsys, space, arch, needle):
    out = tmp_path / "r"
    assert _run(["nas", "train", arch, "--space", space, "--out", str(out)]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], lines
    assert lines[0].startswith("genlab: ")
    assert not out.exists()  # refused before the run folder is created
