"""Verdict probabilities read from top log-probabilities (vLLM, servers), by hand."""

import math

import pytest

from localjury.engines.constrain.verdicts import (
    PREFERENCE,
    VERDICT,
    decision_of,
    score_decision,
    verdict_probs_from_top,
)
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


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0.5], ids=["nan", "inf", "positive"])
def test_a_decision_whose_alternatives_are_not_log_probabilities_gives_no_figure(bad):
    tokens = ['{"verdict": ', "1", "}", '{"verdict": ', "0", "}"]
    tops = [[(t, 0.0)] for t in tokens]
    tops[1] = [("1", bad), ("0", math.log(0.5))]
    tops[4] = [("1", math.log(0.25)), ("0", math.log(0.75))]
    # The first decision gives nothing (as one with no known alternative), the second its figure.
    assert verdict_probs_from_top(tokens, tops) == pytest.approx((0.25,))


def test_alternatives_of_probability_0_give_no_figure_and_no_nan():
    tokens = ['{"verdict": ', "1", "}"]
    tops = [[], [("1", -math.inf), ("0", -math.inf)], []]
    assert verdict_probs_from_top(tokens, tops) == ()
    tops[1] = [("1", -math.inf), ("0", -0.1)]
    assert verdict_probs_from_top(tokens, tops) == (0.0,)


@pytest.mark.parametrize(
    ("decision", "masses"),
    [
        (VERDICT, [math.nan, 1.0]),
        (VERDICT, [math.inf, 1.0]),
        (VERDICT, [0.0, 0.0]),
        (VERDICT, [-1.0, 2.0]),
        (score_decision(3), [0.2, math.nan, 0.3]),
        (score_decision(3), [0.0, 0.0, 0.0]),
    ],
)
def test_masses_that_are_not_finite_probabilities_give_no_figures(decision, masses):
    # The local engines' decode loop reads its figures through the same method.
    assert decision.figures(masses) == ()


def test_finite_masses_give_the_same_figures_as_before():
    assert VERDICT.figures([0.3, 0.1]) == (0.3 / 0.4,)
    assert score_decision(3).figures([1.0, 2.0, 1.0]) == (0.25, 0.5, 0.25)
