"""genlab.nas.studies.ber_select: the protocol's choice among eligible settings, by hand."""

import math

import pytest

import genlab.nas.studies.ber_select as ber_select_module


@pytest.fixture(scope="module")
def sel():
    return ber_select_module


def row(name, eligible, score, se=1.0, p_free=1.0, agreement=0.5):
    return {"setting": name, "eligible": eligible, "score": score, "se": se, "p_free": p_free,
            "agreement": agreement, "seeds": [3, 4, 5], "entropy": 1.0, "p_free_per_seed": [1],
            "hessian_growth": 1.0}


def test_ineligible_settings_never_win_and_none_eligible_is_none(sel):
    assert sel.choose([row("a", False, 99.0), row("b", None, 98.0)]) is None
    assert sel.choose([row("a", False, 99.0), row("b", True, 50.0)])["setting"] == "b"


def test_ties_within_two_standard_errors_go_to_fewer_parameter_free_edges(sel):
    best = row("best", True, 80.0, se=1.0, p_free=1.0)
    close = row("close", True, 79.0, se=1.0, p_free=0.0)  # 1.0 < 2 sqrt(2): a tie
    far = row("far", True, 70.0, se=0.5, p_free=0.0)  # 10 > 2 sqrt(1.25): no tie
    assert 80.0 - 79.0 < 2 * math.sqrt(2) and 80.0 - 70.0 > 2 * math.sqrt(1.25)
    assert sel.choose([best, close, far])["setting"] == "close"
    # equal parameter-free edges: agreement across seeds decides, then the score
    agree = row("agree", True, 79.0, p_free=1.0, agreement=0.9)
    assert sel.choose([best, agree])["setting"] == "agree"
    twin = row("twin", True, 79.5, p_free=1.0, agreement=0.5)
    assert sel.choose([best, twin])["setting"] == "best"


def test_unscored_settings_are_marked_in_the_table(sel):
    text = sel.markdown([row("a", False, None, se=float("nan"))], None, "digits")
    assert "| not scored |" in text and "Winner: none eligible" in text
