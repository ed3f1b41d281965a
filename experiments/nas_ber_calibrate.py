"""Calibration of the BER candidates' strength grids by the force ratio (docs/ber.md, protocol).

For each candidate, one search at the defaults (digits, NB201, 1,800-step budget) with seed 9,
the probe strength lambda_p = 1 and a constant schedule runs its first 100 steps and logs, at
every step, rho_t = ||grad_alpha (lambda_p R)|| / ||grad_alpha CE_val|| (forces.jsonl, see
genlab.nas.diagnostics.alpha_forces). With rho the mean of rho_t over those 100 steps, the
candidate's grid is lambda in {0.3, 1, 3} x lambda_p / rho. The runs are used for nothing else.

A candidate whose force is zero until the nodes' batch entropy turns (``AFTER_TURN``:
ber-decay; ber-anchor, whose strength acts only after it) is calibrated over the 100 steps
after its turn instead (docs/ber_round3.md, protocol): its search runs on until then, and the
turn step is read from its checkpoint.

    python experiments/nas_ber_calibrate.py --out runs/ber_calibration \
        [--regs ber-lbe,ber-op,ber-ib]

Writes OUT/calibration.json and OUT/calibration.md; each search is its own run folder
(OUT/REG), resumed when killed.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from genlab.core.runs import CHECKPOINT, atomic_write_bytes, load_checkpoint, write_json
from genlab.nas.search import FORCES, SearchConfig, run_search

SEED, STEPS, PROBE_STRENGTH, MULTIPLIERS = 9, 100, 1.0, (0.3, 1.0, 3.0)
AFTER_TURN, TURN_CHUNK = ("ber-decay", "ber-anchor"), 300


def read_ratios(path: Path, first: int = 0, steps: int = STEPS) -> list[float]:
    """rho_t for t = first .. first+steps-1 (the last record of a step wins: a resumed run
    repeats some)."""
    by_step = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if first <= rec["step"] < first + steps and rec.get("force_ratio") is not None:
            by_step[rec["step"]] = rec["force_ratio"]
    missing = [t for t in range(first, first + steps) if t not in by_step]
    if missing:
        raise SystemExit(f"{path}: no force ratio for steps {missing[:5]}...")
    return [by_step[t] for t in range(first, first + steps)]


def _turn_step(folder: Path) -> int | None:
    return load_checkpoint(folder / CHECKPOINT).get("reg", {}).get("turn_step")


def calibrate(reg: str, out: Path) -> dict:
    folder = out / reg
    cfg = SearchConfig(reg=reg, reg_strength=PROBE_STRENGTH, reg_schedule="constant", seed=SEED,
                       force_every=1)
    if reg not in AFTER_TURN:
        first = 0
        if (not (folder / FORCES).exists()
                or len((folder / FORCES).read_text().splitlines()) < STEPS):
            run_search(cfg, folder, resume=(folder / "config.json").exists(), stop_at=STEPS)
    else:  # run in chunks until the turn is 100 steps behind
        done, budget = 0, cfg.resolved().steps
        while True:
            turn = _turn_step(folder) if (folder / CHECKPOINT).exists() else None
            if turn is not None and done >= turn + 1 + STEPS:
                break
            if done >= budget:
                raise SystemExit(f"{reg}: no entropy turn within the search budget")
            done = min(done + TURN_CHUNK, budget)
            run_search(cfg, folder, resume=(folder / "config.json").exists(), stop_at=done)
        first = turn + 1
    ratios = read_ratios(folder / FORCES, first)
    rho = statistics.fmean(ratios)
    return {"reg": reg, "first_step": first, "rho": rho, "rho_first": ratios[0],
            "rho_last": ratios[-1],
            "rho_min": min(ratios), "rho_max": max(ratios),
            "grid": [m * PROBE_STRENGTH / rho for m in MULTIPLIERS]}


def markdown(rows: list[dict]) -> str:
    head = ("| candidate | steps | rho (mean) | rho first step | rho last step | min | max | "
            "grid 0.3/rho, 1/rho, 3/rho |\n|---|---|---|---|---|---|---|---|\n")
    body = "".join(f"| {r['reg']} | {r.get('first_step', 0)}-{r.get('first_step', 0) + STEPS - 1}"
                   f" | {r['rho']:.4g} | {r['rho_first']:.4g} | {r['rho_last']:.4g}"
                   f" | {r['rho_min']:.4g} | {r['rho_max']:.4g} | "
                   + ", ".join(f"{g:.3g}" for g in r["grid"]) + " |\n" for r in rows)
    return head + body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--regs", default="ber-lbe,ber-op,ber-ib")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [calibrate(reg, args.out) for reg in args.regs.split(",")]
    write_json(args.out / "calibration.json", rows)
    atomic_write_bytes(args.out / "calibration.md", markdown(rows).encode())
    print(markdown(rows))


if __name__ == "__main__":
    main()
