"""The whole pipeline on the embedded models: API and CLI, results and summary files."""

import json

import pytest
from typer.testing import CliRunner

from localjury import AspectCritic, evaluate
from localjury.cli import app
from localjury.votes.voting import passes

pytestmark = pytest.mark.slow

RECORDS = [
    {"id": "wall", "question": "When did the Berlin Wall fall?", "answer": "It fell on 9 November 1989."},
    {
        "id": "hamlet",
        "user_input": "Who wrote Hamlet?",
        "response": "William Shakespeare.",
        "retrieved_contexts": ["Hamlet is a tragedy written by William Shakespeare around 1600."],
    },
]


def test_evaluate_is_complete_and_reproducible(smollm, tmp_path):
    metrics = [AspectCritic("dated", "The response must include a specific date or year.", strictness=3)]
    first = evaluate(RECORDS, metrics, ["smollm2-135m-instruct"], seed=3, use_cache=False)
    second = evaluate(RECORDS, metrics, ["smollm2-135m-instruct"], seed=3, use_cache=False)
    assert [r.model_dump() for r in first.results] == [r.model_dump() for r in second.results]
    assert [r.record_id for r in first.results] == ["wall", "hamlet"]
    for row in first.results:
        (m,) = row.models
        assert len(m.votes) == 3 and len(m.reasons) == 3
        assert m.abstentions == sum(v is None for v in m.votes)
        assert row.score in (0.0, 1.0) or (row.score is None and m.verdict is None)
    s = first.summary.models[0]
    assert s.judgments == 6 and s.judgments_per_second > 0


def test_cli_jury_of_both_embedded_models(smollm, gemma, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS) + '{"id": "broken", "question": "no answer"}\n')
    criteria = tmp_path / "criteria.yaml"
    criteria.write_text("dated: The response must include a specific date or year.\n")
    out = tmp_path / "res.jsonl"
    args = [
        "run",
        str(data),
        "--criteria",
        str(criteria),
        "--aspect",
        "conciseness",
        "--models",
        "smollm2-135m-instruct,gemma-3-270m",
        "--strictness",
        "3",
        "--seed",
        "0",
        "--out",
        str(out),
        "--quiet",
        # The CI gate on the same run: a bar of 0 met whenever a record is scored, one of 100%
        # met only if every scored record passes; the exit code follows the summary's rates.
        "--fail-under",
        "dated=0",
        "--fail-under",
        "conciseness=100%",
    ]
    # In this process (typer's runner, which gives the CLI its own stdout and stderr): no second
    # interpreter imports torch and the engines again, and the engines this module keeps loaded
    # (tests/conftest.py, engines_loaded_once) serve the same models.yaml entries.
    proc = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert proc.exit_code in (0, 3), (proc.stderr, proc.exception)
    assert "Metrics" in proc.stdout and "Models" in proc.stdout and "1 bad" in proc.stdout
    assert json.loads(out.with_name("res.manifest.json").read_text())["seed"] == 0

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["record_id"], r["metric"]) for r in rows] == [
        ("wall", "conciseness"),
        ("wall", "dated"),
        ("hamlet", "conciseness"),
        ("hamlet", "dated"),
        ("broken", "conciseness"),
        ("broken", "dated"),
    ]
    for r in rows[:4]:
        assert r["error"] is None
        assert [m["model"] for m in r["models"]] == ["smollm2-135m-instruct", "gemma-3-270m"]
        for m in r["models"]:
            assert len(m["votes"]) == 3 and set(m["votes"]) <= {0, 1, None}
            assert m["verdict"] in (0, 1, None)
        scores = [m["score"] for m in r["models"] if m["score"] is not None]
        assert r["score"] == (sum(scores) / len(scores) if scores else None)
    assert "field 'response'" in rows[4]["error"] and rows[4]["models"] == [] and rows[4]["score"] is None

    summary = json.loads(out.with_name("res.summary.json").read_text())
    assert [m["model"] for m in summary["models"]] == ["smollm2-135m-instruct", "gemma-3-270m"]
    assert all(m["judgments"] == 12 for m in summary["models"])
    assert [m["metric"] for m in summary["metrics"]] == ["conciseness", "dated"]
    assert summary["records"] == 3 and summary["record_errors"] == 1

    # Each bar's line: met on stdout, missed on stderr with the records that failed it and
    # those not scored (the bad record among them); exit 3 when one is missed.
    bars = {"dated": 0.0, "conciseness": 1.0}
    rates = {m["metric"]: (m["pass_rate"], m["scored"]) for m in summary["metrics"]}
    met = {name: rates[name][0] is not None and rates[name][0] >= bar for name, bar in bars.items()}
    assert proc.exit_code == (0 if all(met.values()) else 3)
    for name, bar in bars.items():
        rate, scored = rates[name]
        if met[name]:
            assert f"{name}: pass rate {rate:.1%} of {scored} meets the bar {bar:.1%}" in proc.stdout
            continue
        judged = [(r["record_id"], None if r["error"] else passes(r["score"])) for r in rows if r["metric"] == name]
        expected = f"{name}: pass rate {rate:.1%} of {scored} is under the bar {bar:.1%}"
        if rate is None:
            expected = f"{name}: no record was scored (bar {bar:.1%}): the gate fails"
        for label, verdict in (("failed", False), ("not scored", None)):
            if ids := [record for record, v in judged if v is verdict]:
                expected += f"; {label}: {', '.join(ids)}"
        assert expected in proc.stderr.splitlines()
