"""The agent-run metrics on the embedded model through the real engine: goal achieved, tool-call
accuracy and tool-result faithfulness on two agent runs in one evaluate call."""

import json

import pytest

from localjury import GoalAchieved, ToolCallAccuracy, ToolResultFaithfulness, evaluate
from localjury.metrics.tool_calls import match_calls
from localjury.records.record import parse_record
from localjury.votes.voting import model_verdict
from tests import ROOT

pytestmark = pytest.mark.slow


#: Two agent runs: one right call, and one wrong call then the right one (the README's example).
DATA = ROOT / "examples" / "agent_runs.jsonl"
RUNS = [json.loads(line) for line in DATA.read_text().splitlines()]


def test_the_agent_metrics_on_two_runs_in_one_call(smollm):
    metrics = [GoalAchieved(), ToolCallAccuracy(), ToolResultFaithfulness()]
    # llama.cpp: the verification's long constrained outputs decode about 4x faster there than
    # on the transformers engine (20 s against 86 s of generation, measured on 2 busy EPYC cores).
    result = evaluate(DATA, metrics, [smollm], seed=3, use_cache=False, engine="llamacpp")
    by = {(r.record_id, r.metric): r for r in result.results}
    assert len(by) == 6

    for run in RUNS:  # computed, not judged: exactly the deterministic match
        record = parse_record(run)
        assert record.messages is not None and record.reference_tool_calls is not None
        expected = match_calls(record.reference_tool_calls, [c.function for m in record.messages
                                                              for c in m.tool_calls or ()])  # fmt: skip
        res = by[(run["id"], "tool_call_accuracy")]
        assert res.error is None and res.models == [] and res.score == expected.f1
    assert by[("paris", "tool_call_accuracy")].score == 1.0
    assert by[("rome", "tool_call_accuracy")].score == pytest.approx(2 / 3)  # one extra call

    votes = 0
    for run in RUNS:
        goal = by[(run["id"], "goal_achieved")]
        (judged,) = goal.models
        assert goal.error is None and judged.drawn == 1 and len(judged.votes) == 1
        # An unparsed sample abstains and says why: never a silent 0.
        assert judged.abstentions == sum(v is None for v in judged.votes) == len(judged.invalid)
        assert judged.verdict == model_verdict(judged.votes, "fail")
        assert goal.score == (None if judged.verdict is None else float(judged.verdict))
        votes += sum(v is not None for v in judged.votes)

        faithful = by[(run["id"], "tool_result_faithfulness")]
        if faithful.error is not None:  # the tiny extractor may abstain: said, with its raw text
            assert "statement extraction" in faithful.error and faithful.score is None
            continue
        assert faithful.statements is not None
        verdicts = [s.models[0].verdict for s in faithful.statements]
        assert all(set(s.models[0].votes) <= {0, 1, None} for s in faithful.statements)
        decided = [v for v in verdicts if v is not None]
        assert faithful.score == (sum(decided) / len(decided) if decided else None)
        assert faithful.score is None or 0.0 <= faithful.score <= 1.0

    (model,) = result.summary.models
    assert model.judgments >= 2 and votes + sum(by[(r["id"], "goal_achieved")].models[0].abstentions for r in RUNS) == 2
    kinds = {m.metric: m.kind for m in result.summary.metrics}
    assert kinds == {
        "goal_achieved": "judge",
        "tool_call_accuracy": "tool_calls",
        "tool_result_faithfulness": "composite",
    }
