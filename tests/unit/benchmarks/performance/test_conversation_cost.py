"""benchmarks/performance/conversation_cost.py's records: what its figures compare (no model is run)."""

import json

from localjury import AspectCritic
from localjury.records.record import parse_record
from tests.unit.benchmarks.scripts import load

cc = load("performance/conversation_cost.py")


def test_a_system_prompt_and_20_turns_with_tool_calls_answered_and_the_same_final_answer():
    data = cc.datasets(5)
    assert [len(data[shape]) for shape in ("one-turn", "20-turn")] == [5, 5]
    for one, conv in zip(data["one-turn"], data["20-turn"], strict=True):
        messages = conv["messages"]
        assert messages[0]["role"] == "system" and len(messages) == 21
        calls = [c for m in messages for c in m.get("tool_calls") or ()]
        results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        assert len(calls) == 5 and [c["id"] for c in calls] == results
        assert all(json.loads(c["function"]["arguments"]) for c in calls)
        assert messages[-1] == {"role": "assistant", "content": one["response"]}
        # Both are valid records, and the conversation's last turn is what a last_turn criterion judges.
        record = parse_record(conv)
        assert parse_record(one).response == one["response"]
        assert record.messages is not None and len(record.messages) == 21
        assert one["response"] in AspectCritic("x", cc.CRITERION).messages(record)[-1]["content"]
    # The whole conversation is longer to judge than its last turn, which is longer than the one-turn record.
    record, single = parse_record(data["20-turn"][0]), parse_record(data["one-turn"][0])
    size = {
        name: sum(len(m["content"]) for m in AspectCritic("x", cc.CRITERION, scope=scope).messages(r))
        for name, scope, r in (
            ("one", "last_turn", single),
            ("last_turn", "last_turn", record),
            ("conversation", "conversation", record),
        )
    }
    assert size["one"] < size["last_turn"] < size["conversation"]


def test_the_markdown_shows_every_run_and_the_overflow_runs_apart():
    base = {"model": "m", "engine": "e", "prompt_tokens": 100.0, "prompt_tokens_reused": 40.0, "output_tokens": 30.0}
    base |= {"seconds": 1.0, "errors": 0, "error": None, "turns_cut": [None, None], "context": 8192}
    rows = [
        base | {"record": "one-turn", "scope": "last_turn"},
        base | {"record": "20-turn", "scope": "conversation", "prompt_tokens": 400.0, "prompt_ratio": 4.0},
        base
        | {"record": "20-turn", "scope": "conversation", "context": 456, "on_overflow": "error", "errors": 2}
        | {"error": "too long", "prompt_tokens": 0.0},
        base
        | {"record": "20-turn", "scope": "conversation", "context": 456, "on_overflow": "truncate"}
        | {"turns_cut": [9, 9]},
    ]
    report = {"strictness": 3, "seed": 0, "records": 2, "cpu": "Some CPU, 2 CPUs, no AMX", "cores": 2, "rows": rows}
    report["command"] = "python benchmarks/performance/conversation_cost.py --records 2"
    text = cc.markdown(report)
    assert "CPU: Some CPU, 2 CPUs, no AMX" in text
    assert "| m (e) | 20-turn | conversation | 400 | 40 | 30 | 1.00 | 4.00 |" in text
    assert "| m (e) | 456 | error | 2 | -, - |" in text and "| m (e) | 456 | truncate | 0 | 9, 9 |" in text
    assert "Error: `too long`" in text
    assert text.endswith("Command: `python benchmarks/performance/conversation_cost.py --records 2`\n")
