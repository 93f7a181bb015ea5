"""Verdict probabilities through a run: per sample p_pass, a model's confidence, the jury's
mean, and probability scoring, against tables computed by hand."""

import json

import pytest

from localjury import AspectCritic, evaluate
from localjury.engines.base import Completion
from localjury.errors import ConfigError
from localjury.votes.voting import confidence, probability_verdict
from tests.fakes import factory, judgment, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.", strictness=3)

# Model A: votes 1, 0, 0 with p_pass 0.9, 0.4, 0.45; model B gives no probabilities (votes 1, 1, 1);
# model C's second sample does not parse (its probability must not count).
SCRIPT = {
    "A": [Completion(judgment(1), 5, True, (0.9,)), Completion(judgment(0), 5, True, (0.4,)),
          Completion(judgment(0), 5, True, (0.45,))],
    "B": [Completion(judgment(1), 5, True)] * 3,
    "C": [Completion(judgment(0), 5, True, (0.2,)), Completion("{not json", 5, True, (0.99,)),
          Completion(judgment(0), 5, True, (0.1,))],
}  # fmt: skip


def respond(model, prompt, j):
    return SCRIPT[model][j]


def run(tmp_path, **settings):
    return evaluate(
        [{"id": "r", "response": "In 1989."}],
        [DATED],
        [spec("A"), spec("B"), spec("C")],
        use_cache=False,
        engine_factory=factory(respond, []),
        **settings,
    )


def by_model(result):
    (record,) = list(result.iter_results())
    return record, {j.model: j for j in record.models}


def test_votes_decide_by_default_and_probabilities_are_recorded(tmp_path):
    record, m = by_model(run(tmp_path))
    assert m["A"].p_pass == [0.9, 0.4, 0.45] and m["A"].confidence == pytest.approx(1.75 / 3)
    assert (m["A"].verdict, m["A"].score) == (0, 0.0)  # the majority of votes, not the probabilities
    assert m["B"].p_pass == [None, None, None] and m["B"].confidence is None
    assert m["C"].p_pass == [0.2, None, 0.1] and m["C"].confidence == pytest.approx(0.15)
    assert record.score == pytest.approx(1 / 3)  # A 0, B 1, C 0
    assert record.confidence == pytest.approx((1.75 / 3 + 0.15) / 2)  # B has none


def test_probability_scoring(tmp_path):
    record, m = by_model(run(tmp_path, scoring="probability"))
    assert (m["A"].verdict, m["A"].score) == (1, pytest.approx(1.75 / 3))  # 0.583 > 0.5
    assert (m["B"].verdict, m["B"].score) == (1, 1.0)  # no probabilities: scored by votes
    assert (m["C"].verdict, m["C"].score) == (0, pytest.approx(0.15))
    assert record.score == pytest.approx((1.75 / 3 + 1.0 + 0.15) / 3)
    record, m = by_model(run(tmp_path, scoring="probability", threshold=0.6))
    assert m["A"].verdict == 0 and m["A"].score == pytest.approx(1.75 / 3)


def test_results_lines_carry_them(tmp_path):
    (record,) = list(run(tmp_path).iter_results())
    line = json.loads(record.model_dump_json())
    assert line["models"][0]["p_pass"] == [0.9, 0.4, 0.45]
    assert line["confidence"] == pytest.approx(record.confidence)


@pytest.mark.parametrize(
    "settings, message",
    [({"scoring": "logits"}, "unknown scoring 'logits'"), ({"threshold": 1.0}, "threshold must be")],
)
def test_bad_scoring_settings(tmp_path, settings, message):
    with pytest.raises(ConfigError, match=message):
        run(tmp_path, **settings)


def test_confidence_and_probability_verdict():
    assert confidence([None, 0.2, 0.6]) == pytest.approx(0.4) and confidence([None]) is None
    assert probability_verdict(0.5) == 0 and probability_verdict(0.51) == 1 and probability_verdict(None) is None
    assert probability_verdict(0.3, threshold=0.25) == 1


def test_composite_statements_carry_per_sample_p_pass():
    from localjury.metrics import Faithfulness

    def respond(model, prompt, j):
        if "Break the answer" in prompt:
            return json.dumps({"statements": ["S one.", "S two."]})
        body = {"verdicts": [{"statement": f"s{i}", "reason": "r", "verdict": 1} for i in (1, 2)]}
        if j == 1:
            return Completion("{broken", 2, True, (0.3, 0.4))  # abstains: its probabilities do not count
        return Completion(json.dumps(body), 9, True, (0.9, 0.6) if j == 0 else (0.8,))  # j=2: one too few

    result = evaluate(
        [{"id": "r", "user_input": "q", "response": "a", "retrieved_contexts": ["ctx"]}],
        [Faithfulness()],
        [spec("A")],
        strictness=3,
        use_cache=False,
        engine_factory=factory(respond, []),
    )
    (record,) = list(result.iter_results())
    assert [s.models[0].p_pass for s in record.statements] == [[0.9, None, None], [0.6, None, None]]


def test_same_results_allows_probabilities_to_differ_by_rounding_only(tmp_path):
    from localjury.results.record_result import same_results

    a = list(run(tmp_path).iter_results())
    b = [r.model_copy(deep=True) for r in a]
    b[0].models[0].p_pass[0] += 5e-6  # another batch shape's rounding
    assert same_results(a, b)
    b[0].models[0].p_pass[0] += 0.01
    assert not same_results(a, b)
    c = [r.model_copy(deep=True) for r in a]
    c[0].models[0].reasons[0] = "another reason"
    assert not same_results(a, c)
    d = [r.model_copy(deep=True) for r in a]
    d[0].score = (d[0].score or 0) + 5e-6  # a score is no probability: exact
    assert not same_results(a, d)
