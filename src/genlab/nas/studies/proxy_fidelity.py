"""Proxy fidelity: does retraining on an embedded proxy rank NB201 cells the way CIFAR-10 does?

A fixed draw of 30 NB201 cells (``numpy.random.default_rng(0).choice(15625, 30, replace=False)``
as indices into ``Genotype.all()``; nothing is excluded, cells whose output is cut off from their
input stay in) is retrained from scratch on a proxy with ``genlab.nas.retrain`` and
``eval_on="val"`` (fit the train half, score the val half; the test split is not used), once per
retrain seed (0 and 1). Kendall's tau-b between the mean validation accuracy and the cells'
NB201 CIFAR-10 test accuracy (200 epochs) says how well the proxy ranks cells; tau between the
two retrain seeds is the proxy's own noise ceiling. Sanity rows: a random score (tau ~ 0), the
parameter count (a training-free ranking a proxy must beat to be worth its CPU), and the NB201
CIFAR-100 accuracy (another full-budget ranking of the same cells: near the best achievable).

    python experiments/nas_proxy_fidelity.py --out runs/proxy_fidelity --proxy digits --shard 0/2
    python experiments/nas_proxy_fidelity.py --out runs/proxy_fidelity --proxy digits --shard 1/2
    python experiments/nas_proxy_fidelity.py --out runs/proxy_fidelity --proxy digits  # aggregates
    python experiments/nas_proxy_fidelity.py --out runs/proxy_fidelity --compare digits,digits-hard

Every retraining is its own run folder (finished ones are reused, killed ones resumed). Writes
OUT/PROXY/fidelity.json, fidelity.md and fidelity.png; --compare writes OUT/proxies.md and
OUT/proxies.json, one row per proxy, and names the proxy with the highest tau.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import kendalltau

from genlab.core.report import figure, markdown_table
from genlab.core.runs import atomic_write_bytes, read_json, write_json
from genlab.nas.bench import retrain_once
from genlab.nas.retrain import RetrainConfig
from genlab.nas.spaces.nb201.genotype import Genotype
from genlab.nas.spaces.nb201.table import NB201Table

DRAW_SEED, NUM_CELLS, RETRAIN_SEEDS = 0, 30, (0, 1)
# proxy name -> retraining budget (RetrainConfig fields). Each is sized so that the 60
# retrainings of a study take about an hour of CPU (one thread); docs/ber.md says why.
PROXIES = {
    "digits": {"dataset": "digits", "size": 8, "channels": 16, "cells": 1, "epochs": 30},
    "digits-clutter": {"dataset": "digits-clutter", "size": 16, "channels": 8, "cells": 1,
                       "epochs": 20},
}
BOOTSTRAP = 2000


def draw_cells(n: int = NUM_CELLS, seed: int = DRAW_SEED) -> list[tuple[int, str]]:
    """(index into Genotype.all(), architecture string) of the fixed random draw, by index."""
    picks = sorted(int(i) for i in np.random.default_rng(seed).choice(5 ** 6, n, replace=False))
    wanted, out = set(picks), []
    for idx, genotype in enumerate(Genotype.all()):
        if idx in wanted:
            out.append((idx, genotype.to_string()))
    return out


def output_connected(arch: str) -> bool:
    """Whether the cell's output depends on its input (a path of ops other than `none`)."""
    reached = [True]
    for node in Genotype.from_string(arch).nodes:
        reached.append(any(op != "none" and reached[j] for op, j in node))
    return reached[-1]


def tau_row(name: str, x, y, rng: np.random.Generator | None = None) -> dict:
    """Kendall's tau-b of x against y with its p-value and a bootstrap 95% interval over cells."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    res = kendalltau(x, y)
    row = {"ranking": name, "tau": float(res.statistic), "p": float(res.pvalue), "cells": len(x),
           "ci_low": None, "ci_high": None}
    if rng is not None and len(x) > 3:
        boot = []
        for _ in range(BOOTSTRAP):
            idx = rng.integers(0, len(x), len(x))
            t = kendalltau(x[idx], y[idx]).statistic
            if np.isfinite(t):
                boot.append(t)
        row["ci_low"], row["ci_high"] = (float(v) for v in np.percentile(boot, [2.5, 97.5]))
    return row


def job_name(idx: int, seed: int) -> str:
    return f"cell{idx:05d}-s{seed}"


def run_job(out: Path, proxy: str, idx: int, arch: str, seed: int, threads: int) -> dict:
    """One retraining (reused when finished); its CPU seconds are noted beside its run folder."""
    folder = out / proxy / "retrain" / job_name(idx, seed)
    cfg = RetrainConfig(arch=arch, seed=seed, eval_on="val", threads=threads, **PROXIES[proxy])
    cpu_file = folder / "cpu_seconds.json"
    fresh, resumed = not (folder / "summary.json").exists(), (folder / "config.json").exists()
    start = time.process_time()
    summary = retrain_once(cfg, folder)
    if fresh and not resumed:  # a resumed training's CPU time would be partial
        write_json(cpu_file, {"cpu_seconds": time.process_time() - start})
    cpu = read_json(cpu_file)["cpu_seconds"] if cpu_file.exists() else None
    return {"val_acc": summary["val_acc"], "params": summary["params"], "cpu_seconds": cpu}


def study(out: Path, proxy: str, table: NB201Table, threads: int = 1, shard: str | None = None,
          cells: list[tuple[int, str]] | None = None) -> dict | None:
    """Run (a shard of) one proxy's retrainings; without a shard, aggregate them too."""
    cells = draw_cells() if cells is None else cells
    jobs = [(idx, arch, seed) for idx, arch in cells for seed in RETRAIN_SEEDS]
    if shard:
        i, n = (int(v) for v in shard.split("/"))
        for idx, arch, seed in jobs[i::n]:
            run_job(out, proxy, idx, arch, seed, threads)
        return None
    results = {(idx, seed): run_job(out, proxy, idx, arch, seed, threads)
               for idx, arch, seed in jobs}
    records = []
    for idx, arch in cells:
        runs = [results[idx, s] for s in RETRAIN_SEEDS]
        accs = [r["val_acc"] for r in runs]
        records.append({"index": idx, "arch": arch, "connected": output_connected(arch),
                        "param_free": Genotype.from_string(arch).param_free_count(),
                        **{f"nb201_{k}": v for k, v in table.lookup(arch).items()},
                        "params": runs[0]["params"], "val_accs": accs,
                        "val_acc": statistics.fmean(accs),
                        "cpu_seconds": [r["cpu_seconds"] for r in runs]})
    result = {"proxy": proxy, "budget": PROXIES[proxy], "retrain_seeds": list(RETRAIN_SEEDS),
              "draw": f"numpy.random.default_rng({DRAW_SEED}).choice(15625, {len(cells)})",
              "threads": threads, "records": records, "taus": fidelity_taus(records)}
    cpu = [c for r in records for c in r["cpu_seconds"] if c is not None]
    result["cpu_seconds_per_training"] = statistics.fmean(cpu) if cpu else None
    result["cpu_hours_total"] = sum(cpu) / 3600 if cpu else None
    folder = out / proxy
    write_json(folder / "fidelity.json", result)
    atomic_write_bytes(folder / "fidelity.md", fidelity_markdown(result).encode())
    _save(plot_fidelity(records, proxy), folder / "fidelity.png")
    return result


def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def fidelity_taus(records: list[dict]) -> list[dict]:
    """The proxy's taus, its noise ceiling and the sanity rows (fixed bootstrap streams)."""
    rng = np.random.default_rng(1)
    c10 = [r["nb201_cifar10"] for r in records]
    conn = [r for r in records if r["connected"]]
    random_score = np.random.default_rng(2).random(len(records))
    rows = [
        tau_row("proxy val acc (mean of seeds) vs CIFAR-10", [r["val_acc"] for r in records],
                c10, rng),
        *(tau_row(f"proxy val acc, retrain seed {s} vs CIFAR-10",
                  [r["val_accs"][k] for r in records], c10, rng)
          for k, s in enumerate(RETRAIN_SEEDS)),
        tau_row("noise ceiling: retrain seed 0 vs seed 1", [r["val_accs"][0] for r in records],
                [r["val_accs"][1] for r in records], rng),
        tau_row("proxy vs CIFAR-10, connected cells only", [r["val_acc"] for r in conn],
                [r["nb201_cifar10"] for r in conn], rng),
        tau_row("sanity: random score vs CIFAR-10", random_score, c10, rng),
        tau_row("sanity: parameter count vs CIFAR-10", [r["params"] for r in records], c10, rng),
        tau_row("sanity: NB201 CIFAR-100 vs CIFAR-10", [r["nb201_cifar100"] for r in records],
                c10, rng),
    ]
    return rows


def fidelity_markdown(result: dict) -> str:
    b = result["budget"]
    head = (f"Proxy `{result['proxy']}`: {b['dataset']} at {b['size']}x{b['size']}, "
            f"C={b['channels']}, N={b['cells']}, {b['epochs']} epochs, retrain seeds "
            f"{result['retrain_seeds']}, {len(result['records'])} cells ({result['draw']}); "
            f"CPU per training {_num(result['cpu_seconds_per_training'], 1)} s, "
            f"total {_num(result['cpu_hours_total'], 2)} CPU h.\n\n")
    cells = [{"index": r["index"], "arch": "`" + r["arch"].replace("|", "\\|") + "`",
              "p-free": r["param_free"], "connected": r["connected"],
              "C10": r["nb201_cifar10"], "val acc": r["val_acc"],
              "seed spread": abs(r["val_accs"][0] - r["val_accs"][-1])} for r in result["records"]]
    return (head + markdown_table(result["taus"], digits=3) + "\n"
            + markdown_table(cells, digits=2))


def _num(value, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def plot_fidelity(records: list[dict], proxy: str):
    """Proxy val accuracy against NB201 CIFAR-10 (seed range as bars), and seed 0 vs seed 1."""
    fig, axes = figure(ncols=2, width=4.6, height=3.8)
    ax = axes[0, 0]
    x = [r["nb201_cifar10"] for r in records]
    y = [r["val_acc"] for r in records]
    lo = [r["val_acc"] - min(r["val_accs"]) for r in records]
    hi = [max(r["val_accs"]) - r["val_acc"] for r in records]
    ax.errorbar(x, y, yerr=[lo, hi], fmt="none", ecolor="lightgrey", zorder=1)
    sc = ax.scatter(x, y, c=[r["param_free"] for r in records], cmap="viridis", s=18, zorder=2)
    fig.colorbar(sc, ax=ax, label="parameter-free edges")
    ax.set_xlabel("NB201 CIFAR-10 test accuracy (%)")
    ax.set_ylabel(f"{proxy} val accuracy (%), mean of seeds")
    ax.set_title("proxy vs target ranking")
    ax = axes[0, 1]
    ax.scatter([r["val_accs"][0] for r in records], [r["val_accs"][-1] for r in records], s=18)
    ax.set_xlabel("retrain seed 0 (%)")
    ax.set_ylabel("retrain seed 1 (%)")
    ax.set_title("the proxy's own noise")
    fig.tight_layout()
    return fig


FEW_PFREE = 3


def _few_pfree_tau(records: list[dict]) -> float:
    """Kendall's tau over the cells with at most FEW_PFREE parameter-free edges (NaN when
    fewer than two such cells were drawn: no ranking to compare)."""
    few = [r for r in records if r["param_free"] <= FEW_PFREE]
    if len(few) < 2:
        return float("nan")
    return float(kendalltau([r["val_acc"] for r in few],
                            [r["nb201_cifar10"] for r in few]).statistic)


def compare(out: Path, proxies: list[str]) -> dict:
    """One row per measured proxy; the best by the amended rule of docs/ber.md: the highest mean
    of tau over all cells and tau over the cells with at most 3 parameter-free edges."""
    rows = []
    for proxy in proxies:
        res = read_json(out / proxy / "fidelity.json")
        taus = {t["ranking"]: t for t in res["taus"]}
        main = res["taus"][0]
        b = res["budget"]
        rows.append({"proxy": proxy, "budget": f"{b['dataset']} {b['size']}px C={b['channels']} "
                     f"N={b['cells']} {b['epochs']} ep",
                     "tau": main["tau"], "95% CI": f"[{main['ci_low']:.2f}, {main['ci_high']:.2f}]",
                     "tau p-free<=3": (few := _few_pfree_tau(res["records"])),
                     "rule (mean of the two)": (main["tau"] + few) / 2,
                     "noise ceiling": taus["noise ceiling: retrain seed 0 vs seed 1"]["tau"],
                     "tau connected": taus["proxy vs CIFAR-10, connected cells only"]["tau"],
                     "median val acc": statistics.median(r["val_acc"] for r in res["records"]),
                     "CPU s/training": res["cpu_seconds_per_training"],
                     "CPU h": res["cpu_hours_total"]})
    best = max(rows, key=lambda r: r["rule (mean of the two)"])
    result = {"rows": rows, "best": best["proxy"],
              "rule": "highest mean of tau (all cells) and tau (cells with <= 3 p-free edges)"}
    write_json(out / "proxies.json", result)
    md = markdown_table(rows, digits=3) + f"\nBest proxy: `{best['proxy']}`\n"
    atomic_write_bytes(out / "proxies.md", md.encode())
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/proxy_fidelity"))
    ap.add_argument("--proxy", default="digits", choices=sorted(PROXIES))
    ap.add_argument("--compare", default=None, help="comma-separated measured proxies")
    ap.add_argument("--nb201-table", default=os.environ.get("GENLAB_NB201_TABLE"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shard", default=None, help="i/n: run every n-th retraining from i")
    args = ap.parse_args()
    if args.compare:
        compare(args.out, args.compare.split(","))
        print((args.out / "proxies.md").read_text())
        return
    table = NB201Table.load(args.nb201_table)
    result = study(args.out, args.proxy, table, args.threads, args.shard)
    if result is not None:
        print((args.out / args.proxy / "fidelity.md").read_text())


if __name__ == "__main__":
    main()
