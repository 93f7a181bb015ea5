import math

import pytest

from localjury.votes.voting import final_score, model_score, model_verdict, passes, share_supported


@pytest.mark.parametrize(
    ("votes", "tie_break", "verdict"),
    [
        ([1, 1, 0], "fail", 1),
        ([0, 0, 1], "fail", 0),
        ([1], "fail", 1),
        ([0], "pass", 0),
        ([1, 0], "fail", 0),
        ([1, 0], "pass", 1),
        ([1, 0], "abstain", None),
        ([1, 1, 0, 0], "pass", 1),
        # abstentions are not votes: [1, None, 0] is a 1-1 tie, [1, None, None] a pass
        ([1, None, 0], "fail", 0),
        ([1, None, 0], "pass", 1),
        ([1, None, 0], "abstain", None),
        ([1, None, None], "fail", 1),
        ([0, None, None], "pass", 0),
        ([None, None, None], "pass", None),
        ([], "fail", None),
    ],
)
def test_model_verdict(votes, tie_break, verdict):
    assert model_verdict(votes, tie_break) == verdict


def test_unknown_tie_break_is_rejected():
    with pytest.raises(ValueError, match="unknown tie-break policy 'coin'; expected one of: fail, pass, abstain"):
        model_verdict([1, 0], "coin")  # type: ignore[arg-type]


def test_spec_example_strictness_3_two_models():
    a = model_score(model_verdict([1, 1, 0]))
    b = model_score(model_verdict([0, 0, 1]))
    assert (a, b) == (1.0, 0.0)
    assert final_score([a, b]) == 0.5


def test_spec_example_five_models_two_pass_three_fail():
    scores = [model_score(v) for v in (1, 1, 0, 0, 0)]
    assert final_score(scores) == pytest.approx(0.4)


def test_abstaining_models_are_left_out_of_the_mean():
    assert final_score([1.0, None, 0.0, 1.0]) == pytest.approx(2 / 3)
    assert final_score([None, 1.0]) == 1.0


def test_all_abstain_gives_no_score():
    assert final_score([None, None]) is None
    assert final_score([]) is None
    assert final_score([math.nan]) is None


@pytest.mark.parametrize(("score", "expected"), [(1.0, True), (0.6, True), (0.5, False), (0.0, False), (None, None)])
def test_pass_is_a_strict_majority(score, expected):
    assert passes(score) is expected


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([1, 1, 0, 1], 0.75),
        ([1, None, 0], 0.5),
        ([0, 0], 0.0),
        ([None, None], None),
        ([], None),
    ],
)
def test_share_supported_leaves_out_abstained_statements(verdicts, expected):
    assert share_supported(verdicts) == expected
