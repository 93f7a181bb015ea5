"""The pytest plugin's judgment object: its truth is the jury's pass, its repr one line with
the reasons, its explanation every model's votes and reasons (the real run is
tests/integration/integrations/test_pytest_plugin.py)."""

import pytest

from localjury.integrations.pytest_plugin import Judge, Judgment
from localjury.results.record_result import ModelJudgment, RecordResult


def result(score, votes=(1, 0, 1), reasons=("has 1989", "no year", "has 1989")):
    model = ModelJudgment(model="m", votes=list(votes), reasons=list(reasons), abstentions=0,
                          verdict=None if score is None else int(score > 0.5), score=score)  # fmt: skip
    return RecordResult(record_id="pytest", metric="criterion", score=score, error=None, models=[model])


@pytest.mark.parametrize(("score", "truth", "head"), [(1.0, True, "PASS"), (0.5, False, "FAIL"), (0.0, False, "FAIL"),
                                                      (None, False, "NO VERDICT")])  # fmt: skip
def test_a_judgment_is_true_only_when_the_jury_passes_it(score, truth, head):
    j = Judgment("has a year", result(score))
    assert bool(j) is truth
    assert repr(j).startswith(f"<{head}") and "\n" not in repr(j) and "has 1989 | no year" in repr(j)
    assert "on the criterion 'has a year'" in j.explain() and "m: verdict" in j.explain()


def test_a_record_that_cannot_be_judged_fails_the_test_with_its_error(monkeypatch):
    import localjury.run

    bad = RecordResult(record_id="pytest", metric="criterion", score=None, error="response: too long", models=[])
    monkeypatch.setattr(localjury.run, "evaluate", lambda *a, **k: type("R", (), {"results": [bad]})())
    with pytest.raises(AssertionError, match="could not judge the response: response: too long"):
        Judge(["m"]).passes("x", "has a year")
