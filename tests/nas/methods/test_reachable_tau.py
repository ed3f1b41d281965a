"""reachable_tau: the highest published-standing tau a partial bench can reach, against a
hand count and against random completions of the missing seeds."""

import random
import statistics

import pytest

from genlab.nas.methods.reported import reachable_tau, standing

ROWS = ["darts", "gdas", "pc-darts", "darts-minus", "drnas", "beta"]
DONE = {"darts": [90.4, 86.5, 91.1, 90.0, 93.2], "gdas": [10.0, 86.5, 86.4, 10.0, 86.3],
        "pc-darts": [92.1, 92.3, 88.8, 93.1, 92.1], "darts-minus": [93.6, 80.1, 69.5, 69.9, 54.1]}


def tau_of(per_seed):
    return standing({r: {"cifar10_mean": statistics.fmean(v)} for r, v in per_seed.items()})["tau"]


def test_the_bound_by_hand_with_two_rows_open():
    # the four complete rows agree with the published order in 2 pairs of 6 and disagree in 4;
    # at best drnas and beta (published 94.36 both: one tied pair) end above every other row
    # and tied with each other: 8 more agreeing pairs, so (10 - 4) / sqrt(14 * 14)
    assert reachable_tau(DONE, ROWS, 5) == pytest.approx(6 / 14)
    assert tau_of({**DONE, "drnas": [99.0] * 5, "beta": [99.0] * 5}) == pytest.approx(6 / 14)


def test_no_completion_of_the_missing_seeds_beats_the_bound():
    partial = {**DONE, "drnas": [93.0, 80.0], "darts-minus": DONE["darts-minus"][:3]}
    bound = reachable_tau(partial, ROWS, 5)
    rng = random.Random(0)
    fills = [[rng.uniform(0, 100) for _ in range(3)] for _ in range(1000)]
    fills += [[a, b, c] for a in range(0, 101, 10) for b in range(0, 101, 10)
              for c in range(0, 101, 10)]  # every seed of a row at one value, on a grid
    best = -1.0
    for a, b, c in fills:
        filled = {**partial, "drnas": partial["drnas"] + [a] * 3, "beta": [b] * 5,
                  "darts-minus": partial["darts-minus"] + [c] * 2}
        best = max(best, tau_of(filled))
    assert best <= bound + 1e-12
    assert best > bound - 0.1  # the grid comes near it


def test_a_complete_bench_gives_its_own_tau_and_too_many_open_rows_none():
    full = {**DONE, "drnas": [94.0] * 5, "beta": [93.0] * 5}
    assert reachable_tau(full, ROWS, 5) == pytest.approx(tau_of(full))
    assert reachable_tau({"darts": [90.0] * 5}, ROWS, 5) is None
