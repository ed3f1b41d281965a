"""What batch entropy can and cannot tell apart: the cost of every op of the NB201 supernet.

A `none` search (DARTS, no regulariser) with the calibration seed 9 runs to step 900 at the
search defaults; its supernet at step 0 and at step 900 is probed on the first 256 validation
images, plain and augmented as the search augments its validation batches, and for every op k
on every edge e of the three search cells two costs are taken:

- D_ek = relu(H_B(x_e) - H_B(o_ek)), the batch entropy the op loses (ber-op's cost);
- L_ek = I_B(x_e; Y) - I_B(o_ek; Y), the label information it loses (ber-ib's cost),
- G_ek = I_B(m(x_e); Y) - I_B(m(o_ek); Y), the same on every channel's spatial mean m, and
  D_ek + G_ek (ber-xu's cost),

with x_e the edge input and o_ek the op's unscaled output (genlab.nas.regularizers.per_op).
The table gives their mean per op over all 18 edges, over the 9 edges from the cell input
(node 0) and over the 9 from intermediate nodes (docs/ber.md, the fourth
amendment and "Selection (measured)").

    python experiments/nas_op_information.py --out runs/op_information

Writes OUT/op_information.json and OUT/op_information.md; the search is its own run folder
(OUT/search), resumed when killed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from genlab.core.data import augment_images
from genlab.core.runs import CHECKPOINT, atomic_write_bytes, load_checkpoint, write_json
from genlab.core.seeding import make_generator
from genlab.nas.data import load_image_data
from genlab.nas.entropy import label_information, spatial_mean
from genlab.nas.regularizers.per_op import (
    OpCompression,
    OpLabelInformation,
    OpPooledInformation,
    edge_sources,
)
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import get_space

SEED, STEP, IMAGES = 9, 900, 256


class PooledLabelInformation(OpLabelInformation):
    """G_ek alone: the label information lost by the channels' spatial means (ber-xu's 2nd term)."""

    def statistic(self, t, labels=None):
        return label_information(spatial_mean(t), labels)


COSTS = {"D: batch entropy lost (ber-op)": OpCompression,
         "label information lost (ber-ib)": OpLabelInformation,
         "G: pooled label information lost": PooledLabelInformation,
         "D + G (ber-xu)": OpPooledInformation}


GROUPS = {"all edges": lambda s: True, "from the cell input": lambda s: s == 0,
          "from intermediate nodes": lambda s: s > 0}


def op_costs(net, space, x: torch.Tensor, y: torch.Tensor) -> dict[tuple[str, str], list]:
    """(cost kind, edge group) -> mean cost of every op over the group's edges."""
    sources = edge_sources(space.alpha_specs()["cell"].rows)
    out = {}
    for label, kind in COSTS.items():
        cost = kind()
        cost.setup(net, x, space)
        probe = cost.make_probe()
        with torch.no_grad():
            net.train()(x, probe=probe)
        c = cost.losses(net.alphas(), probe, y)["cell"]
        for group, keep in GROUPS.items():
            rows = [r for r, s in enumerate(sources) if keep(s)]
            out[label, group] = c[rows].mean(0).tolist()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = SearchConfig(reg="none", seed=SEED).resolved()
    folder = args.out / "search"
    run_search(cfg, folder, resume=(folder / "config.json").exists(), stop_at=STEP)
    space = get_space(cfg.space)
    data = load_image_data(cfg.dataset, cfg.data_root, size=cfg.size, seed=cfg.seed)
    x, y = data.val.images[:IMAGES], data.val.labels[:IMAGES]
    batches = {"plain": x, "augmented": augment_images(x, make_generator(SEED, 0, 1))}
    ops = space.alpha_specs()["cell"].ops[0]
    rows = []
    for step in (0, STEP):
        torch.manual_seed(SEED)
        net = space.build_supernet(num_classes=data.num_classes, in_channels=data.in_channels,
                                   channels=cfg.channels, cells=cfg.cells, **space.proxy.options)
        if step:
            net.load_state_dict(load_checkpoint(folder / CHECKPOINT)["net"])
        for batch, images in batches.items():
            for (label, group), values in op_costs(net, space, images, y).items():
                rows.append({"step": step, "batch": batch, "quantity": label, "edges": group,
                             **dict(zip(ops, values, strict=True))})
    write_json(args.out / "op_information.json", rows)
    keys = ("step", "batch", "quantity", "edges")
    head = ("| " + " | ".join(keys + tuple(ops)) + " |\n|" + "---|" * (len(ops) + len(keys))
            + "\n")
    body = "".join("| " + " | ".join(str(r[k]) for k in keys) + " | "
                   + " | ".join(f"{r[o]:.3f}" for o in ops) + " |\n" for r in rows)
    atomic_write_bytes(args.out / "op_information.md", (head + body).encode())
    print(head + body)


if __name__ == "__main__":
    main()
