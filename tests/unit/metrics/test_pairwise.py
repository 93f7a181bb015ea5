"""Pairwise judging: both orders asked, votes order-corrected, majorities over 2k, ties per
tie-break, abstentions counted, position consistency, the jury's mean (hand-computed tables)."""

import json

import pytest

from localjury import AspectCritic, PairwiseCritic, evaluate
from localjury.engines.base import Completion
from localjury.errors import ConfigError, MetricError
from localjury.metrics.pairwise import EXAMPLES, corrected
from localjury.records.record import parse_record
from localjury.votes.voting import position_consistency
from tests.fakes import factory, judgment, spec

BETTER = PairwiseCritic("better", "The response answers the question more helpfully.", strictness=3)


def pair(rid):
    return {"id": rid, "user_input": f"question {rid}", "response_a": f"alpha {rid}", "response_b": f"beta {rid}"}


def shown(prompt):
    """(record id, order) of a prompt: which of the record's responses fills the A slot."""
    first = prompt.rsplit("<response_a>\n", 1)[1].split("\n", 1)[0]
    kind, rid = first.split(" ")
    return rid, "AB" if kind == "alpha" else "BA"


def scripted(table):
    """table[model][record][order]: the k answers, "A", "B" or None (a sample that does not parse)."""

    def respond(model, prompt, j):
        rid, order = shown(prompt)
        answer = table[model][rid][order][j]
        if answer is None:
            return "not json"
        return json.dumps({"reason": f"{order} sample {j}", "preferred": answer})

    return respond


# Order-corrected votes (1: prefers response_a); "B" in order BA is a vote for response_a.
TABLE = {
    "M1": {
        # AB -> 1,1,0; BA -> 1,1,0: 4 of 6 for response_a; majorities A (AB) and B (BA) agree.
        "r0": {"AB": ["A", "A", "B"], "BA": ["B", "B", "A"]},
        # AB -> 0,-,0; BA -> 0,0,-: response_b with 2 abstentions; consistent.
        "r1": {"AB": ["B", None, "B"], "BA": ["A", "A", None]},
    },
    "M2": {
        # Always "A": AB -> 1,1,1; BA -> 0,0,0: a 3-3 tie; inconsistent (position bias).
        "r0": {"AB": ["A", "A", "A"], "BA": ["A", "A", "A"]},
        # AB -> 0,0,1; BA -> 0,0,1: response_b 4-2; consistent.
        "r1": {"AB": ["B", "B", "A"], "BA": ["A", "A", "B"]},
    },
}


def run(metric=BETTER, table=TABLE, log=None, calls=None, **kw):
    return evaluate(
        [pair("r0"), pair("r1")],
        [metric],
        [spec("M1"), spec("M2")],
        engine_factory=factory(scripted(table), [] if log is None else log, calls),
        **kw,
    )


def by(result):
    return {(r.record_id, m.model): m for r in result.results for m in r.models}


def test_corrected_maps_order_ba_to_the_records_frame():
    assert [corrected(v, "AB") for v in (1, 0, None)] == [1, 0, None]
    assert [corrected(v, "BA") for v in (1, 0, None)] == [0, 1, None]


def test_votes_majorities_and_consistency_follow_the_hand_computed_table():
    result = run()
    m = by(result)
    assert m[("r0", "M1")].votes == [1, 1, 0, 1, 1, 0]
    assert m[("r0", "M1")].order_votes == {"AB": [1, 1, 0], "BA": [0, 0, 1]}
    assert (m[("r0", "M1")].verdict, m[("r0", "M1")].score, m[("r0", "M1")].position_consistent) == (1, 1.0, True)
    assert m[("r0", "M2")].votes == [1, 1, 1, 0, 0, 0]
    assert (m[("r0", "M2")].verdict, m[("r0", "M2")].score, m[("r0", "M2")].position_consistent) == (
        None,
        None,
        False,
    )
    r1 = m[("r1", "M1")]
    assert r1.votes == [0, None, 0, 0, 0, None] and r1.abstentions == 2 and r1.drawn == 6
    assert [s.sample for s in r1.invalid] == [1, 5] and r1.reasons[1] is None
    assert (r1.verdict, r1.score, r1.position_consistent) == (0, 0.0, True)
    assert (m[("r1", "M2")].votes, m[("r1", "M2")].score) == ([0, 0, 1, 0, 0, 1], 0.0)
    rows = {r.record_id: r for r in result.results}
    # The jury: the mean of the models' scores, an abstaining model left out.
    assert (rows["r0"].score, rows["r0"].position_consistency) == (1.0, 0.5)
    assert (rows["r1"].score, rows["r1"].position_consistency) == (0.0, 1.0)
    (summary,) = result.summary.metrics
    assert summary.kind == "pairwise" and summary.tie_break == "abstain"
    assert (summary.mean_score, summary.pass_rate, summary.position_consistency) == (0.5, 0.5, 0.75)
    assert result.summary.models[0].abstentions == 2 and result.summary.models[0].judgments == 12


@pytest.mark.parametrize(("tie_break", "score"), [("abstain", None), ("pass", 1.0), ("fail", 0.0)])
def test_an_even_split_of_the_2k_votes_follows_the_tie_break(tie_break, score):
    metric = PairwiseCritic("better", "More helpful.", strictness=3, tie_break=tie_break)
    assert by(run(metric))[("r0", "M2")].score == score


def test_both_orders_are_asked_in_one_batched_call_and_found_in_the_store_again():
    log, calls = [], []
    run(log=log, calls=calls)
    gen = [e for e in log if e[0] == "generate"]
    assert gen == [("generate", "M1", 4, 3), ("generate", "M2", 4, 3)]
    assert sorted(shown(p) for p in calls[0]["prompts"]) == [("r0", "AB"), ("r0", "BA"), ("r1", "AB"), ("r1", "BA")]
    assert set(calls[0]["schema"]["properties"]) == {"reason", "preferred"}
    log2 = []
    again = run(log=log2)
    assert not [e for e in log2 if e[0] == "generate"]
    assert again.summary.models[0].cached == 12
    assert by(again)[("r0", "M1")].order_votes == {"AB": [1, 1, 0], "BA": [0, 0, 1]}


def test_adaptive_strictness_applies_to_each_order():
    table = {m: {r: {"AB": ["B", "B", "B"], "BA": ["A", "A", "A"]} for r in ("r0", "r1")} for m in ("M1", "M2")}
    result = run(table=table, adaptive=True)
    m = by(result)[("r0", "M1")]
    assert m.order_votes == {"AB": [0, 0], "BA": [1, 1]} and m.score == 0.0 and m.drawn == 4


def test_position_consistency_needs_a_majority_in_both_orders():
    assert position_consistency([1, 1, 0], [0]) is True
    assert position_consistency([1], [1, None]) is False
    assert position_consistency([1, 0], [0]) is None
    assert position_consistency([None], [1]) is None


def test_order_ba_shows_response_b_as_a_and_the_examples_prefer_each_position_once():
    record = parse_record(pair("r0"))
    ab = BETTER.messages(record, order="AB")[-1]["content"]
    ba = BETTER.messages(record, order="BA")[-1]["content"]
    assert "<response_a>\nalpha r0\n</response_a>\n<response_b>\nbeta r0\n</response_b>" in ab
    assert "<response_a>\nbeta r0\n</response_a>\n<response_b>\nalpha r0\n</response_b>" in ba
    assert sorted(out.preferred for _, out in EXAMPLES) == ["A", "B"]


def test_records_without_the_pair_name_the_missing_field():
    result = evaluate(
        [{"id": "single", "response": "r"}, {"id": "half", "response_a": "x"}],
        [BETTER],
        [spec("M1")],
        engine_factory=factory(lambda *a: judgment(1), []),
    )
    errors = {r.record_id: r.error for r in result.results}
    assert "'better' needs this field" in errors["single"] and "response_a" in errors["single"]
    assert "response_b" in errors["half"] and "response_a and response_b" in errors["half"]


def test_a_pointwise_metric_on_a_pair_names_the_response_field():
    metric = AspectCritic("dated", "The response includes a year.")
    result = evaluate([pair("r0")], [metric], [spec("M1")], engine_factory=factory(lambda *a: judgment(1), []))
    (row,) = result.results
    assert row.score is None and "'dated' needs this field" in row.error and "response" in row.error


def test_a_pairwise_critic_needs_a_criterion():
    with pytest.raises(MetricError, match="non-empty"):
        PairwiseCritic("x", " ")


def test_the_cli_reads_pairwise_criteria():
    from localjury.metrics.spec import metrics_of_options

    (metric,) = metrics_of_options([], [], None, pairwise=['helpful="The response is more helpful."'])
    assert isinstance(metric, PairwiseCritic) and metric.name == "helpful" and metric.tie_break == "abstain"
    with pytest.raises(ConfigError, match="--pairwise expects NAME=TEXT"):
        metrics_of_options([], [], None, pairwise=["oops"])


def test_results_written_before_pairwise_judging_still_read():
    from localjury.results.record_result import RecordResult

    old = {
        "record_id": "r",
        "metric": "m",
        "score": 1.0,
        "error": None,
        "models": [{"model": "M", "votes": [1], "reasons": ["x"], "abstentions": 0, "verdict": 1, "score": 1.0}],
    }
    row = RecordResult.model_validate_json(json.dumps(old))
    assert row.position_consistency is None and row.models[0].order_votes is None


def test_p_pass_is_the_probability_of_preferring_response_a_in_both_orders():
    # The engine reports the probability of "A" (the response shown first) where the sample
    # wrote its preference; in order BA the first response is response_b, so p_pass = 1 - p(A).
    p_first = {"AB": [0.9, 0.8, 0.3], "BA": [0.2, 0.4, 0.9]}

    def respond(model, prompt, j):
        _, order = shown(prompt)
        p = p_first[order][j]
        text = json.dumps({"reason": "r", "preferred": "A" if p > 0.5 else "B"})
        return Completion(text=text, n_tokens=8, finished=True, verdict_probs=(p,))

    def judge(**kw):
        result = evaluate([pair("r0")], [BETTER], [spec("M1")], engine_factory=factory(respond, []), **kw)
        return result.results[0]

    row = judge()
    (m,) = row.models
    assert m.p_pass == pytest.approx([0.9, 0.8, 0.3, 0.8, 0.6, 0.1])
    assert m.confidence == pytest.approx(3.5 / 6) and row.confidence == pytest.approx(3.5 / 6)
    assert m.votes == [1, 1, 0, 1, 1, 0] and m.score == 1.0  # votes decide by default: 4 of 6
    # Probability scoring: the score is the confidence, the preference confidence > threshold.
    prob = judge(scoring="probability", threshold=0.6).models[0]
    assert prob.score == pytest.approx(3.5 / 6) and prob.verdict == 0
