"""Verdict probabilities read from top log-probabilities (vLLM, servers), by hand."""

import math

import pytest

from localjury.engines._verdicts import PREFERENCE, VERDICT, decision_of, verdict_probs_from_top
from localjury.metrics import AspectCritic, Faithfulness, PairwiseCritic


def test_the_digit_after_the_verdict_key_is_read_and_renormalised():
    tokens = ['{"', "reason", '":', ' "', "1", "9", '",', ' "', "verdict", '":', " ", "1", "}"]
    tops = [[(t, 0.0)] for t in tokens]
    # The "1" inside the reason is no verdict; at the verdict: 1 (-0.2) + " 1"... only digits count.
    tops[11] = [("1", math.log(0.6)), ("0", math.log(0.2)), ("true", math.log(0.1)), ("00", math.log(0.1))]
    (p,) = verdict_probs_from_top(tokens, tops)
    assert p == pytest.approx(0.6 / (0.6 + 0.2 + 0.1))


def test_a_space_and_digit_token_and_several_verdicts():
    tokens = ['{"verdicts": [{"', "verdict", '":', " 0", '}, {"', "verdict", '":', "1", "}]}"]
    tops = [[(t, 0.0)] for t in tokens]
    tops[3] = [(" 0", math.log(0.7)), (" 1", math.log(0.3))]
    tops[7] = [("1", 0.0)]  # only the chosen 1 among the alternatives: p = 1
    assert verdict_probs_from_top(tokens, tops) == pytest.approx((0.3, 1.0))


def test_no_verdict_written():
    assert verdict_probs_from_top(['{"reason": "cut', " off"], [[], []]) == ()


def test_a_pairwise_preference_is_read_after_its_opening_quote():
    # '"A' in one token, or '"' then 'A"': both write the preference; the A inside the reason does not.
    tokens = ['{"reason": "', "A", " is", " better", '", "', "preferred", '": ', '"A', '"}']
    tops = [[(t, 0.0)] for t in tokens]
    tops[7] = [('"A', math.log(0.3)), ('"B', math.log(0.6)), ('"', math.log(0.1))]
    (p,) = verdict_probs_from_top(tokens, tops, PREFERENCE)
    assert p == pytest.approx(0.3 / 0.9)
    split = ['{"reason": "x", "preferred": ', '"', 'B"', "}"]
    tops = [[(t, 0.0)] for t in split]
    tops[2] = [('B"', math.log(0.8)), ('A"', math.log(0.2))]
    assert verdict_probs_from_top(split, tops, PREFERENCE) == pytest.approx((0.2,))
    assert verdict_probs_from_top(split, tops) == ()  # read as a 0/1 verdict, nothing is written


def test_each_metric_schema_names_its_decision():
    assert decision_of(PairwiseCritic("p", "Better.").json_schema()) is PREFERENCE
    assert decision_of(AspectCritic("a", "Dated.").json_schema()) is VERDICT
    assert decision_of(Faithfulness().verify.json_schema()) is VERDICT
