"""Figures the methods' authors report, cited beside genlab's bench tables (never compared).

These are CIFAR-10 searches on GPUs at the authors' budgets, judged on the real NAS-Bench-201
(test accuracy, %, CIFAR-10 / CIFAR-100 / ImageNet16-120); genlab's bench rows are digits-proxy
searches judged through the table, so the two are not comparable: the reported rows say what a
method reaches at full scale, the bench says what it does at the proxy.
"""

from __future__ import annotations

# method row -> (CIFAR-10, CIFAR-100, ImageNet16-120 test accuracy %, source)
REPORTED_NB201 = {
    "darts": (54.30, 15.61, 16.32, "NAS-Bench-201 paper (Dong & Yang, ICLR-20), DARTS-V1"),
    "gdas": (93.61, 70.70, 41.71, "NAS-Bench-201 paper (Dong & Yang, ICLR-20)"),
    "darts-minus": (93.80, 71.53, 45.12, "DARTS- paper (Chu et al., ICLR-21)"),
    "pc-darts": (93.41, 67.48, 41.31, "DrNAS README (xiangning-chen/DrNAS)"),
    "drnas": (94.36, 73.51, 46.34, "DrNAS README (xiangning-chen/DrNAS)"),
    "beta": (94.36, 73.51, 46.34, "beta-DARTS paper (Ye et al., CVPR-22)"),
    "optimum": (94.37, 73.51, 47.31, "the best cell of NAS-Bench-201 (its test accuracies)"),
}


def reported_rows(space: str) -> list[dict]:
    """The cited rows of ``space``'s bench table (NB201 only: the others report errors of
    retrained networks, which the proxy bench does not measure)."""
    if space != "nb201":
        return []
    return [{"row": f"reported: {name}", "C10": f"{c10:.2f}",
             "C100": f"{c100:.2f}", "IN16": f"{in16:.2f}", "source": source}
            for name, (c10, c100, in16, source) in REPORTED_NB201.items()]


def standing(per_row: dict[str, dict]) -> dict | None:
    """How the bench's rows rank against their published standing: Kendall's tau between
    each row's mean CIFAR-10 accuracy through the table (``per_row``: bench.aggregate's) and
    its reported figure, over the rows that have both (None under three such rows)."""
    from scipy.stats import kendalltau

    pairs = [(row, agg["cifar10_mean"], REPORTED_NB201[row][0])
             for row, agg in per_row.items()
             if row in REPORTED_NB201 and agg.get("cifar10_mean") is not None]
    if len(pairs) < 3:
        return None
    tau = kendalltau([p[1] for p in pairs], [p[2] for p in pairs]).statistic
    return {"tau": float(tau), "rows": [{"row": r, "proxy C10": c, "reported C10": rep}
                                        for r, c, rep in pairs]}


__all__ = ["REPORTED_NB201", "reported_rows", "standing"]
