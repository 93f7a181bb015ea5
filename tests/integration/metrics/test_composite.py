"""Composite metrics on the embedded model through the real engine: nested constrained
outputs, per-statement votes, reproducibility, and the custom-metrics example."""

import json
import runpy
import sys

import pytest

from localjury import FactualAccuracy, Faithfulness, evaluate
from tests import ROOT

pytestmark = pytest.mark.slow

RECORDS = [
    {
        "id": "paris",
        "user_input": "What is the capital of France and how many people live there?",
        "response": "The capital of France is Paris. About 2.1 million people live in the city.",
        "retrieved_contexts": ["Paris is the capital of France, with 2,102,650 residents in January 2023."],
        "reference": "Paris, with about 2.1 million inhabitants.",
    },
    {
        "id": "einstein",
        "user_input": "When was Einstein born?",
        "response": "Einstein was born in 1879 in Ulm. He won the Nobel Prize in 1950.",
        "retrieved_contexts": ["Albert Einstein (born 14 March 1879 in Ulm) received the 1921 Nobel Prize."],
        "reference": "14 March 1879.",
    },
]


def test_faithfulness_and_factual_accuracy_are_valid_per_statement_and_reproducible(smollm):
    # On llama.cpp (a fraction of transformers' time for SmolLM2 on one core); the composite
    # example below runs on transformers.
    metrics = [Faithfulness(strictness=3), FactualAccuracy(strictness=3)]
    first = evaluate(RECORDS, metrics, ["smollm2-135m-instruct"], seed=5, use_cache=False, engine="llamacpp")
    # Reproducible, and a record's statements and verdicts do not depend on what it was judged
    # beside: the second record again, alone.
    alone = evaluate(RECORDS[1:], metrics, ["smollm2-135m-instruct"], seed=5, use_cache=False, engine="llamacpp")
    assert [r.model_dump() for r in alone.results] == [
        r.model_dump() for r in first.results if r.record_id == RECORDS[1]["id"]
    ]
    judged_statements = 0
    for row in first.results:
        assert row.error is None and row.extracted_by == "smollm2-135m-instruct"
        assert row.statements is not None
        if not row.statements:
            assert row.score is None
            continue
        (model,) = row.models
        # The schema fixes one verdict per statement, so constrained samples always parse.
        assert model.abstentions == 0 and model.invalid == []
        verdicts = []
        for s in row.statements:
            (judged,) = s.models
            assert len(judged.votes) == 3 and set(judged.votes) <= {0, 1}
            assert all(isinstance(r, str) for r in judged.reasons)
            verdicts.append(judged.verdict)
            judged_statements += 1
        assert model.score == sum(verdicts) / len(verdicts) == row.score
    assert judged_statements >= 2  # the tiny model extracts something from these answers
    assert first.summary.models[0].abstentions == 0


def test_custom_metrics_example_runs(smollm, tmp_path, monkeypatch, capsys):
    # One record of the three: each metric's result of a record is what the example shows
    # (51 s for all three alone on an Intel Xeon, 2 cores). As a script, in this process: the
    # same code as `python examples/custom_metrics.py ...` with no second interpreter to start
    # (it uses the default store, this test's own: it generates every judgment).
    script = ROOT / "examples" / "custom_metrics.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--out", str(tmp_path), "--records", "1"])
    runpy.run_path(str(script), run_name="__main__")
    stdout = capsys.readouterr().out
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["metric"] for r in rows[:3]] == ["answers_the_question", "faithfulness", "reference_coverage"]
    assert len(rows) == 3 and all(r["error"] is None and r["record_id"] == "everest" for r in rows)
    single = [r for r in rows if r["metric"] == "answers_the_question"]
    assert all(len(r["models"][0]["votes"]) == 3 and r["statements"] is None for r in single)
    coverage = [r for r in rows if r["metric"] == "reference_coverage"]
    assert all(isinstance(r["statements"], list) for r in coverage)
    assert "reference_coverage" in stdout
