"""The transfer line of the demo: its reading follows the numbers, its budget is valid."""

from nas_reference import DARTS_V2 as UPSTREAM_DARTS_V2

from genlab.nas.spaces.darts.genotype import parse_darts_genotype
from genlab.nas.transfer.detection.demo import DARTS_V2, demo_config, detect_reading


def summary(ours, trivial):
    return {"map50": ours, "trivial_map50": trivial, "steps": 160}


def test_reading_names_the_verdict_from_the_numbers():
    assert "0.162 after 160 iterations, well above the trivial detector's 0.043" in \
        detect_reading(summary(0.162, 0.043))
    assert ", above the trivial detector's 0.040" in detect_reading(summary(0.06, 0.04))
    assert "not above the trivial detector's 0.050" in detect_reading(summary(0.05, 0.05))


def test_the_demo_budget_is_valid_and_the_cell_is_upstreams_darts_v2():
    for quick in (True, False):
        demo_config(quick).validate()
    assert demo_config(True).data == "synthetic:128" and demo_config(True).lr_steps == (4,)
    assert parse_darts_genotype(DARTS_V2) == parse_darts_genotype(UPSTREAM_DARTS_V2)
