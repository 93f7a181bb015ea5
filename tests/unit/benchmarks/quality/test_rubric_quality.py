"""benchmarks/quality/rubric_quality.py's reading of rubric samples as preferences (no model is run)."""

import pytest

from localjury.results.record_result import ModelJudgment
from tests.unit.benchmarks.scripts import load

rq = load("quality/rubric_quality.py")


def judgment(scores: list[int | None], expected: list[float | None]) -> ModelJudgment:
    return ModelJudgment(
        model="m", votes=[], reasons=[], abstentions=scores.count(None), verdict=None, score=None,
        scores=scores, expected=expected,
    )  # fmt: skip


def test_each_way_reads_the_same_samples_abstentions_left_out():
    got = rq.scores(judgment([2, None, 5, 5], [2.5, None, 4.0, 4.5]))
    assert got == {"sampled": 4.0, "expected": pytest.approx(11 / 3), "majority": 5.0}
    assert rq.scores(judgment([None, None], [None, None])) == dict.fromkeys(rq.WAYS)
    # An engine without probabilities: sampled and majority scores, no expected score.
    assert rq.scores(judgment([3, 4], [None, None]))["expected"] is None


def test_a_pairs_credit_and_accuracy_count_ties_half_and_skip_undecided_pairs():
    gold = [1, 0, 1, 0, 1]
    a = [4.0, 4.0, 3.0, 2.0, None]
    b = [3.0, 5.0, 3.0, 4.5, 2.0]
    assert [rq.credit(g, x, y) for g, x, y in zip(gold, a, b, strict=True)] == [1.0, 1.0, 0.5, 1.0, None]
    assert rq.credit(1, 2.0, 3.0) == 0.0
    out = rq.compare(gold, a, b)
    assert (out["pairs"], out["decided"], out["ties"]) == (5, 4, 1)
    assert out["accuracy"] == pytest.approx(3.5 / 4)  # the library's figure, from the same credits
    low, high = out["accuracy_ci"]
    assert 0 <= low <= out["accuracy"] <= high <= 1
    assert rq.compare([1], [None], [3.0])["accuracy_ci"] is None
