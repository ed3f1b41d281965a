"""The synthetic NAS-Bench-201 accuracy table the tests write and read (conftest's fixture)."""

from __future__ import annotations

from pathlib import Path

# The synthetic NAS-Bench-201 table every test reads (tests never need the published file):
# every one of the 15,625 cells, in the published CSV's format, with accuracies by a rule a
# test can recompute: a cell whose output is cut off from its input (no path of non-`none`
# edges) scores chance (10 / 1 / 0.8333, as the published table's all-`none` cell); any other
# scores a base plus a weight per op, so a cell of 3x3 convolutions scores highest.
NB201_HEADER = ["CIFAR10TestAccuracy200Epochs", "CIFAR100TestAccuracy200Epochs",
                "ImageNetTestAccuracy200Epochs", "ArchitectureString", "UniqueString"]
NB201_OP_WEIGHT = {"none": 0.0, "skip_connect": 1.0, "avg_pool_3x3": 1.5,
                   "nor_conv_1x1": 3.0, "nor_conv_3x3": 4.0}
NB201_EDGES = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))  # (from, to) in string order


def nb201_synthetic_accuracy(ops) -> tuple[float, float, float]:
    """(CIFAR-10, CIFAR-100, ImageNet16-120) accuracy of a cell (six ops in edge order)."""
    reach = {0}
    for (src, dst), op in zip(NB201_EDGES, ops, strict=True):  # edges are in topological order
        if op != "none" and src in reach:
            reach.add(dst)
    if 3 not in reach:
        return 10.0, 1.0, 0.8333333333333334
    score = sum(NB201_OP_WEIGHT[op] for op in ops)  # 1 .. 24
    return 70.0 + score, 40.0 + 1.4 * score, 15.0 + 1.3 * score


def nb201_arch_string(ops) -> str:
    return "|{}~0|+|{}~0|{}~1|+|{}~0|{}~1|{}~2|".format(*ops)


def write_nb201_table(path: Path) -> Path:
    """Write the synthetic table (the published CSV's columns and row format) to ``path``."""
    import csv
    import itertools

    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(NB201_HEADER)
        for ops in itertools.product(list(NB201_OP_WEIGHT), repeat=6):
            writer.writerow([*nb201_synthetic_accuracy(ops), nb201_arch_string(ops), "-"])
    return path
