"""Agent-run metrics: tool-call accuracy (exact matching, no judge), goal achieved (judged over
the whole conversation) and tool-result faithfulness (the faithfulness stages with the tool
results as evidence); turns cut counted in the run summary."""

import json
import sys
from typing import Any

import pytest
from rich.console import Console

import localjury.run.generate
from localjury import GoalAchieved, ToolCallAccuracy, ToolResultFaithfulness, evaluate
from localjury.cli import main
from localjury.errors import RecordError
from localjury.metrics.tool_calls import json_equal, match_calls
from localjury.records.conversation import parse_reference_calls
from localjury.records.readers import iter_records
from localjury.records.record import Record, parse_record
from localjury.results.gate import GATE_EXIT
from localjury.results.tables import print_summary
from tests.fakes import factory, fake_registry, judgment, spec


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """An OpenAI tool call of an assistant turn."""
    return {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def run_of(*calls: dict[str, Any], answer: str = "It is 18C and sunny in Paris.") -> list[dict[str, Any]]:
    """A conversation: the user asks, the assistant makes ``calls`` (each answered), then answers."""
    turns: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    for i, c in enumerate(calls):
        turns.append({"role": "assistant", "content": None, "tool_calls": [{**c, "id": f"t{i}"}]})
        turns.append({"role": "tool", "tool_call_id": f"t{i}", "name": c["function"]["name"], "content": "18C, sunny"})
    turns.append({"role": "assistant", "content": answer})
    return turns


def ref(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ({"city": "Paris", "units": "C"}, {"units": "C", "city": "Paris"}, True),  # key order does not count
        (1, 1.0, True),  # JSON has one number type
        (True, 1, False),
        (False, 0, False),
        ([1, 2], [2, 1], False),  # a list keeps its order
        ({"a": {"b": [1, {"c": None}]}}, {"a": {"b": [1.0, {"c": None}]}}, True),
        ({"a": {"b": [1, {"c": None}]}}, {"a": {"b": [1, {"c": 0}]}}, False),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ("1", 1, False),
        (None, None, True),
    ],
)
def test_arguments_compare_as_parsed_json(a, b, equal):
    assert json_equal(a, b) is equal
    assert json_equal(b, a) is equal


def calls_of(*items: dict[str, Any]):
    return parse_reference_calls(list(items))


W = ref("get_weather", city="Paris")
T = ref("get_time", zone="CET")


@pytest.mark.parametrize(
    ("reference", "made", "ordered", "matched", "f1"),
    [
        ([W], [W], True, 1, 1.0),
        ([W], [W, T], True, 1, 2 / 3),  # an extra call costs precision
        ([W, T], [W], True, 1, 2 / 3),  # a missing call costs recall
        ([W], [ref("get_wether", city="Paris")], True, 0, 0.0),  # wrong name
        ([W], [ref("get_weather", city="paris")], True, 0, 0.0),  # a string argument must match exactly
        ([ref("f", n=1)], [ref("f", n=1.0)], True, 1, 1.0),
        ([ref("f", opts={"a": [1, 2], "b": "x"})], [ref("f", opts={"b": "x", "a": [1, 2]})], True, 1, 1.0),
        ([ref("f", opts={"a": [1, 2]})], [ref("f", opts={"a": [2, 1]})], True, 0, 0.0),
        ([W, T], [T, W], True, 1, 0.5),  # order-sensitive: one of the two in the reference's order
        ([W, T], [T, W], False, 2, 1.0),
        ([W, W], [W], False, 1, 2 / 3),  # each call matches one reference call at most
        ([W, T, W], [T, W, W, T], True, 2, 4 / 7),  # the longest run in order: T, W
        ([], [], True, 0, 1.0),  # none expected, none made
        ([], [W], True, 0, 0.0),
    ],
)
def test_tool_calls_match_exactly_by_name_and_arguments(reference, made, ordered, matched, f1):
    m = match_calls(calls_of(*reference), calls_of(*made), ordered=ordered)
    assert (m.matched, m.reference, m.made) == (matched, len(reference), len(made))
    assert m.f1 == pytest.approx(f1)
    assert len(m.missing) == len(reference) - matched and len(m.unexpected) == len(made) - matched


def test_reference_calls_are_read_in_openai_ragas_and_plain_shapes():
    class RagasToolCall:  # RAGAS's ToolCall: a pydantic model of name and args
        def model_dump(self):
            return {"name": "get_weather", "args": {"city": "Paris"}}

    shapes = [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"name": "get_weather", "args": {"city": "Paris"}},
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        RagasToolCall(),
    ]
    parsed = [parse_reference_calls([s])[0] for s in shapes]
    assert {(c.name, json.dumps(json.loads(c.arguments))) for c in parsed} == {("get_weather", '{"city": "Paris"}')}
    assert parse_reference_calls([{"name": "now"}])[0].arguments == "{}"


@pytest.mark.parametrize(
    ("value", "field", "reason"),
    [
        ("get_weather", "reference_tool_calls", "must be a list of calls"),
        ([{"arguments": {}}], "reference_tool_calls[0].name", "missing"),
        ([W, {"name": "f", "arguments": "{not json"}], "reference_tool_calls[1].arguments", "not valid JSON"),
        ([["get_weather"]], "reference_tool_calls[0]", "must be an object with name and arguments"),
    ],
)
def test_bad_reference_calls_are_the_records_error_naming_the_field(value, field, reason):
    with pytest.raises(RecordError, match=reason) as info:
        parse_record({"id": "r1", "messages": run_of(), "reference_tool_calls": value}, location="line 3")
    assert info.value.field == field and info.value.record_id == "r1" and "line 3" in str(info.value)


def test_reference_calls_read_from_a_csv_cell_and_change_the_content_id(tmp_path):
    path = tmp_path / "d.csv"
    cell = json.dumps([W]).replace('"', '""')
    path.write_text(f'messages,reference_tool_calls\n"{json.dumps(run_of()).replace(chr(34), chr(34) * 2)}","{cell}"\n')
    (record,) = list(iter_records(path))
    assert isinstance(record, Record) and record.reference_tool_calls is not None
    assert record.reference_tool_calls[0].name == "get_weather"
    other = parse_record({"messages": run_of(), "reference_tool_calls": [T]})
    assert other.id != record.id


def respond(model: str, prompt: str, sample: int) -> str:
    """The fake jury: statements for an extraction, supported/unsupported for a verification,
    a pass for a judgment."""
    if "Break the answer" in prompt:
        return json.dumps({"statements": ["It is 18C in Paris.", "It is sunny in Paris."]})
    if "Judge each statement" in prompt:
        verdicts = [{"statement": "s", "reason": "r", "verdict": v} for v in (1, 0)]
        return json.dumps({"verdicts": verdicts})
    return judgment(1)


def test_tool_call_accuracy_asks_no_model_and_names_the_missing_field():
    rows = [
        {"id": "full", "messages": run_of(call("get_weather", city="Paris")), "reference_tool_calls": [W]},
        {"id": "extra", "messages": run_of(call("get_weather", city="Paris"), call("get_time", zone="CET")),
         "reference_tool_calls": [W]},
        {"id": "none", "messages": run_of()},
        {"id": "plain", "response": "It is sunny.", "reference_tool_calls": [W]},
    ]  # fmt: skip
    log: list = []
    result = evaluate(rows, [ToolCallAccuracy()], [spec("A")], use_cache=False, engine_factory=factory(respond, log))
    assert log == []  # nothing to generate: no model loaded
    by_id = {r.record_id: r for r in result.results}
    assert by_id["full"].score == 1.0 and by_id["extra"].score == pytest.approx(2 / 3)
    detail = by_id["extra"].tool_calls
    assert detail is not None and (detail.precision, detail.recall) == (0.5, 1.0)
    assert detail.unexpected == ['get_time({"zone": "CET"})'] and detail.missing == []
    assert by_id["none"].score is None and "record 'none' (item 3), field 'reference_tool_calls'" in (
        by_id["none"].error or ""
    )
    assert "record 'plain' (item 4), field 'messages'" in (by_id["plain"].error or "")
    (summary,) = result.summary.metrics
    assert (summary.kind, summary.records, summary.scored) == ("tool_calls", 2, 2)
    assert summary.pass_rate == 1.0 and summary.mean_score == pytest.approx((1 + 2 / 3) / 2)


def test_a_tool_call_bar_gates_the_run_like_any_metric(tmp_path, monkeypatch, capsys):
    registry = fake_registry(tmp_path)
    data = tmp_path / "runs.jsonl"
    rows = [
        {"id": "good", "messages": run_of(call("get_weather", city="Paris")), "reference_tool_calls": [W]},
        {"id": "wrong", "messages": run_of(call("get_time", zone="CET")), "reference_tool_calls": [W]},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded: list = []
    monkeypatch.setattr(localjury.run.generate, "load_engine", lambda s, **_: loaded.append(s))
    args = ["run", data, "--metric", "tool_call_accuracy", "--models", "fake", "--registry", registry, "--quiet",
            "--out", tmp_path / "r.jsonl", "--cache", tmp_path / "c.sqlite",
            "--fail-under", "tool_call_accuracy=0.9"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["localjury", *map(str, args)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = " ".join(capsys.readouterr().err.split())
    assert exit_info.value.code == GATE_EXIT and loaded == []
    assert "tool_call_accuracy: pass rate 50.0% of 2 is under the bar 90.0%; failed: wrong" in err
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    matched = [(r["record_id"], r["score"], r["tool_calls"]["matched"]) for r in lines]
    assert matched == [("good", 1.0, 1), ("wrong", 0.0, 0)]
    summary = json.loads((tmp_path / "r.summary.json").read_text())
    assert summary["metrics"][0]["kind"] == "tool_calls" and summary["metrics"][0]["pass_rate"] == 0.5


def test_goal_achieved_judges_every_turn_against_the_goal_in_reference():
    record = parse_record({"id": "g", "messages": run_of(call("get_weather", city="Paris")),
                           "reference": "The user learns the weather in Paris."})  # fmt: skip
    metric = GoalAchieved()
    prompt = metric.messages(record)[-1]["content"]
    assert prompt.startswith("<goal>\nThe user learns the weather in Paris.\n</goal>\n<conversation>")
    assert '<call name="get_weather" id="t0">' in prompt
    assert "It is 18C and sunny in Paris." in prompt  # the last turn too
    assert "<response>" not in prompt and metric.scope == "conversation"
    with pytest.raises(RecordError, match="record 'g2', field 'reference': metric 'goal_achieved' needs this field"):
        metric.messages(parse_record({"id": "g2", "messages": run_of()}))


def test_tool_result_faithfulness_checks_the_final_answer_against_the_tool_results():
    record = parse_record({"id": "f", "messages": run_of(call("get_weather", city="Paris"))})
    metric = ToolResultFaithfulness()
    prompt = metric.verify_messages(record, ["It is 18C in Paris."])[-1]["content"]
    evidence = 'get_weather {"city": "Paris"} returned:\n18C, sunny'
    assert f'<context>\n<item index="1">\n{evidence}\n</item>\n</context>' in prompt
    assert "It is 18C in Paris." in prompt
    extract = metric.extract_messages(record)[-1]["content"]
    assert "<response>\nIt is 18C and sunny in Paris.\n</response>" in extract
    with pytest.raises(RecordError, match=r"record 'n', field 'messages': .* it has no tool result"):
        metric.verify_input(parse_record({"id": "n", "messages": run_of()}), [])


def test_the_three_agent_metrics_run_together_and_an_unparsed_verification_abstains():
    rows = [{"id": "a", "messages": run_of(call("get_weather", city="Paris")), "reference_tool_calls": [W],
             "reference": "The user learns the weather in Paris."}]  # fmt: skip
    metrics = [GoalAchieved(), ToolCallAccuracy(), ToolResultFaithfulness()]
    result = evaluate(rows, metrics, [spec("A")], use_cache=False, engine_factory=factory(respond, []))
    scores = {r.metric: r.score for r in result.results}
    assert scores == {"goal_achieved": 1.0, "tool_call_accuracy": 1.0, "tool_result_faithfulness": 0.5}

    def garbled(model: str, prompt: str, sample: int) -> str:
        return "not json" if "Judge each statement" in prompt else respond(model, prompt, sample)

    (res,) = evaluate(rows, [ToolResultFaithfulness()], [spec("A")], use_cache=False,
                      engine_factory=factory(garbled, [])).results  # fmt: skip
    assert res.score is None and res.models[0].abstentions == 1  # an abstention, never a silent 0


def long_run(n: int) -> dict[str, Any]:
    """A run of ``n`` tool calls, each result 40 words long."""
    turns = run_of(*[call("get_weather", city=f"city {i}") for i in range(n)])
    turns = [{**t, "content": "word " * 40} if t["role"] == "tool" else t for t in turns]
    return {"id": "long", "messages": turns, "reference": "The user learns the weather in Paris."}


def test_the_turns_cut_are_counted_in_the_summary_and_printed(tmp_path):
    small = spec("A", context_length=1400, max_tokens=100)
    rows = [long_run(30), {**long_run(1), "id": "short"}]
    result = evaluate(rows, [GoalAchieved(), ToolResultFaithfulness()], [small], on_overflow="truncate",
                      use_cache=False, engine_factory=factory(respond, []))  # fmt: skip
    for summary in result.summary.metrics:
        cut = [r.turns_cut for r in result.results if r.metric == summary.metric and r.turns_cut]
        assert len(cut) == 1 and summary.records_cut == 1 and summary.turns_cut == cut[0] > 0
    console = Console(record=True, width=120)
    print_summary(result.summary, console)
    text = console.export_text()
    goal = result.summary.metrics[0]
    assert f"goal_achieved: {goal.turns_cut} conversation turns cut in 1 records" in text
    out = tmp_path / "r.jsonl"
    result.write(out)
    written = json.loads((tmp_path / "r.summary.json").read_text())
    assert written["metrics"][0]["turns_cut"] == goal.turns_cut


def test_a_cut_that_would_leave_no_tool_result_is_not_made():
    """The only tool result is too long for the judge: cutting it would leave no evidence, so
    the prompt stays whole and is the model's overflow error, not a crash or a silent cut."""
    turns = run_of(call("get_weather", city="Paris"))
    turns[2] = {**turns[2], "content": "word " * 1500}
    turns.append({"role": "user", "content": "Thanks!"})
    turns.append({"role": "assistant", "content": "You are welcome. It is 18C in Paris."})
    small = spec("A", context_length=1400, max_tokens=100)
    (res,) = evaluate([{"id": "big", "messages": turns}], [ToolResultFaithfulness()], [small],
                      on_overflow="truncate", use_cache=False, engine_factory=factory(respond, [])).results  # fmt: skip
    assert res.turns_cut is None and res.score is None
    assert "exceeds context_length 1400" in (res.models[0].error or "")
