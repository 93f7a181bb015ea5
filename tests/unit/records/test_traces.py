"""Traces as records: real exports (the OpenTelemetry SDK with the OpenInference and OpenLLMetry
instrumentations around a fake model, tests/otel_exports.py) read as conversations; bad traces
each their own error; a run's judgments written back as Phoenix, Langfuse and MLflow annotations."""

import base64
import json
import sys

import httpx
import pytest

pytest.importorskip("openinference.instrumentation.openai", reason="the dev extra's trace packages are not installed")

from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError, MissingDependencyError, RecordError
from localjury.records.readers import iter_records
from localjury.records.traces import (
    TraceReading,
    iter_langfuse_records,
    iter_mlflow_records,
    iter_phoenix_records,
    iter_trace_records,
    otlp,
    phoenix,
)
from localjury.results.annotations import annotation, write_annotations
from localjury.results.record_result import read_results
from tests.fakes import dated_responder, factory, run_cli, spec
from tests.otel_exports import (
    DOCUMENT,
    FINAL,
    QUESTION,
    make_exports,
    make_mlflow_export,
    otlp_json_to_proto,
    phoenix_dataframe_rows,
    phoenix_spans,
)

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_year", "arguments": '{"event": "moon landing"}'}}
AGENT_TURNS = [
    {"role": "user", "content": QUESTION},
    {"role": "assistant", "tool_calls": [CALL]},
    {"role": "tool", "content": "1969", "tool_call_id": "call_1"},
    {"role": "assistant", "content": FINAL},
]  # fmt: skip


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Each export's traces, a line each (tests/otel_exports.py)."""
    paths = make_exports(tmp_path_factory.mktemp("exports"))
    return {name: path.read_text().splitlines() for name, path in paths.items()}


@pytest.fixture
def oi(exports):
    """One OpenInference trace (an OTLP JSON line)."""
    return exports["openinference"][0]


def write(path, *lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def spans_of(line):
    request = json.loads(line)
    return [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def ids(line):
    """The trace id and the root span's id of an export line."""
    (root,) = [s for s in spans_of(line) if not s.get("parentSpanId")]
    return root["traceId"], root["spanId"]


def records(path, **reading):
    return list(iter_trace_records(path, TraceReading(**reading)))


def turns(record):
    return [m.model_dump(exclude_none=True) for m in record.messages]


def test_an_openinference_agent_trace_is_one_conversation_with_its_tool_call_and_documents(tmp_path, oi):
    (record,) = records(write(tmp_path / "t.jsonl", oi))
    trace_id, root_id = ids(oi)
    assert record.id == f"{trace_id}/{root_id}"
    assert turns(record) == AGENT_TURNS and record.retrieved_contexts == [DOCUMENT]
    (bare,) = records(tmp_path / "t.jsonl", contexts=False)
    assert bare.retrieved_contexts is None
    (rooted,) = records(tmp_path / "t.jsonl", answer="root")
    assert rooted.response == FINAL  # the AGENT span's output.value


def test_one_record_per_llm_span_names_each_span(tmp_path, oi):
    got = records(write(tmp_path / "t.jsonl", oi), per="llm-span")
    kind = {"key": "openinference.span.kind", "value": {"stringValue": "LLM"}}
    llm = sorted((s for s in spans_of(oi) if kind in s["attributes"]), key=lambda s: int(s["startTimeUnixNano"]))
    assert len(llm) == 2 and [r.id for r in got] == [f"{s['traceId']}/{s['spanId']}" for s in llm]
    assert turns(got[0]) == AGENT_TURNS[:2] and turns(got[1]) == AGENT_TURNS


def test_the_genai_conventions_current_and_older_forms_read_as_the_same_conversation(tmp_path, exports):
    (current,) = records(write(tmp_path / "a.jsonl", exports["openllmetry"][0]))
    assert turns(current) == AGENT_TURNS and current.retrieved_contexts is None
    (older,) = records(write(tmp_path / "b.jsonl", exports["old_genai"][0]))
    assert turns(older) == [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": QUESTION},
                            {"role": "assistant", "content": FINAL}]  # fmt: skip
    # The span-event forms: the last chat span's events are the conversation; each span per LLM span.
    (events,) = records(write(tmp_path / "c.jsonl", exports["genai_events"][0]))
    assert turns(events) == [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": FINAL}]
    first, second = records(tmp_path / "c.jsonl", per="llm-span")
    assert turns(first)[-1] == {"role": "assistant", "content": "Let me check."} and second == events.model_copy(
        update={"id": second.id}
    )


def part(line, keep):
    """``line`` with only the spans ``keep`` (a slice of its flattened spans)."""
    request = json.loads(line)
    chosen = {s["spanId"] for s in spans_of(line)[keep]}
    for rs in request["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            ss["spans"] = [s for s in ss["spans"] if s["spanId"] in chosen]
    return json.dumps(request)


def test_a_trace_over_several_batches_among_others_and_base64_ids_read_the_same(tmp_path, oi, exports):
    (whole,) = records(write(tmp_path / "whole.jsonl", oi))
    other = exports["old_genai"][0]
    got = records(write(tmp_path / "split.jsonl", part(oi, slice(0, 2)), other, part(oi, slice(2, None))))
    assert [r.id.split("/")[0] for r in got] == [ids(other)[0], ids(oi)[0]]  # each as its last line is read
    assert got[1] == whole
    # The protobuf JSON mapping (base64 ids) is read as OTLP JSON is.
    b64 = oi
    for s in spans_of(oi):
        for key in ("traceId", "spanId", "parentSpanId"):
            if s.get(key):
                b64 = b64.replace(f'"{s[key]}"', json.dumps(base64.b64encode(bytes.fromhex(s[key])).decode()))
    assert b64 != oi and records(write(tmp_path / "b64.jsonl", b64)) == [whole]


def test_otlp_protobuf_as_the_file_exporter_writes_it_reads_as_its_json(tmp_path, oi, exports, monkeypatch):
    lines = [oi, exports["old_genai"][0], exports["openllmetry"][0]]
    as_json = records(write(tmp_path / "t.jsonl", *lines))
    proto = tmp_path / "t.pb"
    proto.write_bytes(otlp_json_to_proto(lines))
    assert records(proto) == as_json and len(as_json) == 3
    assert list(iter_records(proto)) == as_json  # `localjury run t.pb`
    # A message over the bound is skipped unread and named; the others are read.
    sizes = [len(otlp_json_to_proto([line])) - 4 for line in lines]
    monkeypatch.setattr(otlp, "MAX_BATCH_BYTES", max(sizes) - 1)
    got = records(proto)
    monkeypatch.undo()
    biggest = sizes.index(max(sizes))
    (skipped,) = [e for e in got if isinstance(e, RecordError)]
    assert f"t.pb message {biggest + 1}" in str(skipped) and f"{max(sizes):,} bytes, over" in str(skipped)
    assert [r for r in got if not isinstance(r, RecordError)] == as_json[:biggest] + as_json[biggest + 1 :]
    # A file cut short: the traces before the cut are read, the cut message is named.
    cut = tmp_path / "cut.pb"
    cut.write_bytes(proto.read_bytes()[:-10])
    *read, error = records(cut)
    assert read == as_json[:2] and isinstance(error, RecordError) and "cut.pb message 3" in str(error)
    assert "ends inside it" in str(error)
    # Without the traces extra: the package to install, named.
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.collector.trace.v1.trace_service_pb2", None)
    with pytest.raises(MissingDependencyError, match=r"localjury\[traces\]"):
        records(proto)
    monkeypatch.undo()
    # Neither JSON nor protobuf.
    (tmp_path / "junk.pb").write_bytes(b"PK\x03\x04 not traces at all")
    with pytest.raises(ConfigError, match="neither OTLP JSON nor OTLP protobuf"):
        records(tmp_path / "junk.pb")


def test_iter_records_reads_an_otlp_file_as_traces_and_other_jsonl_as_records(tmp_path, oi):
    path = write(tmp_path / "t.json", oi)
    assert list(iter_records(path)) == records(path)
    (tmp_path / "plain.jsonl").write_text(json.dumps({"id": "a", "response": "resourceSpans"}) + "\n")
    assert [r.id for r in iter_records(tmp_path / "plain.jsonl")] == ["a"]


def edited(line, change):
    """The export ``line`` with ``change(span dicts)`` applied."""
    request = json.loads(line)
    change([s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]])
    return json.dumps(request)


def test_each_bad_trace_is_its_own_error_and_the_good_ones_are_read(tmp_path, exports):
    good = exports["old_genai"][0]
    trace_ids = {}

    def cycle(spans):
        ids = {s["spanId"] for s in spans}
        root = next(s for s in spans if not s.get("parentSpanId"))
        child = next(s for s in spans if s.get("parentSpanId") == root["spanId"])
        root["parentSpanId"] = child["spanId"]
        assert child["spanId"] in ids

    def orphan(spans):
        spans[0]["parentSpanId"] = "ab" * 8

    def unknown(spans):
        for s in spans:
            s["attributes"] = [
                a for a in s["attributes"] if not a["key"].startswith(("gen_ai.", "openinference", "llm."))
            ]

    def no_answer(spans):
        for s in spans:
            s["attributes"] = [a for a in s["attributes"] if not a["key"].startswith(("llm.output", "output."))]

    def bad_id(spans):
        spans[0]["spanId"] = "not an id"

    changes = (cycle, orphan, unknown, no_answer, bad_id)
    lines = [edited(line, change) for line, change in zip(exports["openinference"][1:], changes, strict=True)]
    for line, why in zip(lines, ("cycle", "orphan", "unknown", "no answer", "bad id"), strict=True):
        trace_ids[json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][-1]["traceId"]] = why
    path = tmp_path / "bad.jsonl"
    write(path, *lines, "not json", good)
    got = records(path)
    errors = [g for g in got if isinstance(g, RecordError)]
    assert [r.id.split("/")[0] for r in got if not isinstance(r, RecordError)] == [ids(good)[0]]
    messages = "\n".join(str(e) for e in errors)
    assert "form a cycle" in messages and "not in the file" in messages
    assert "neither the OpenInference" not in messages and "follows the OpenInference, GenAI or MLflow" in messages
    assert (
        "no answer" in messages
        and "a span cannot be read" in messages
        and "neither 16 hex digits nor 8 bytes" in messages
    )
    assert "bad.jsonl line 6" in messages and "not JSON" in messages
    assert len(errors) == 6 and {e.record_id for e in errors} >= set(trace_ids)
    # A span whose trace id cannot be read is its line's error; its trace is read without it.
    lost = edited(good, lambda spans: spans[0].update(traceId="zz"))
    path.write_text(lost + "\n")
    (error,) = records(path)
    assert "bad.jsonl line 1" in str(error) and "traceId 'zz'" in str(error)
    for e in errors:
        if e.record_id in trace_ids:
            assert str(e).count(f"trace {e.record_id}") == 1  # a trace's error names its trace, once


def test_a_batch_over_the_bound_is_skipped_and_named(tmp_path, oi, monkeypatch):
    monkeypatch.setattr(otlp, "MAX_BATCH_BYTES", 2000)
    path = write(tmp_path / "big.jsonl", oi)
    (error,) = records(path)
    assert (
        isinstance(error, RecordError)
        and "big.jsonl line 1" in str(error)
        and "over the 2,000-byte bound" in str(error)
    )


def judged(tmp_path, *lines):
    path = write(tmp_path / "traces.jsonl", *lines)
    out = tmp_path / "r.jsonl"
    dated = AspectCritic("dated", "The response must include a specific date or year.")
    models = [spec("A"), spec("B")]
    evaluate(
        str(path), [dated], models, strictness=3, out=out, use_cache=False, engine_factory=factory(dated_responder, [])
    )
    return list(read_results(out))


@pytest.mark.parametrize("tool", ["phoenix", "langfuse", "mlflow"])
def test_judgments_of_traces_become_each_tools_annotations(tmp_path, oi, tool):
    results = judged(tmp_path, oi)
    (result,) = results
    trace_id, root_id = ids(oi)
    done = write_annotations(results, tool, tmp_path / "a.jsonl")
    (row,) = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert done.annotations == 1 and done.unscored == []
    value = {"phoenix": "score", "langfuse": "value", "mlflow": "value"}[tool]
    assert row[value] == result.score and result.score is not None
    why = {"phoenix": "explanation", "langfuse": "comment", "mlflow": "rationale"}[tool]
    for m in result.models:  # each judge's reason for the verdict it reached
        assert any(f"{m.model}: {r}" in row[why] for v, r in zip(m.votes, m.reasons, strict=True) if v == m.verdict)
    if tool == "phoenix":
        assert row["span_id"] == root_id and row["annotation_name"] == "dated" and row["label"] in ("pass", "fail")
    elif tool == "langfuse":
        assert (row["trace_id"], row["observation_id"], row["name"]) == (trace_id, root_id, "dated")
    else:
        assert (row["trace_id"], row["span_id"], row["source"]["source_type"]) == (
            f"tr-{trace_id}",
            root_id,
            "LLM_JUDGE",
        )


def test_a_result_not_from_a_trace_is_refused_naming_it_and_nothing_is_written(tmp_path, oi):
    (result,) = judged(tmp_path, oi)
    other = result.model_copy(update={"record_id": "r1"})
    with pytest.raises(ConfigError, match="record 'r1': its id is not '<trace id>/<span id>'"):
        write_annotations([result, other], "langfuse", tmp_path / "a.jsonl")
    assert not [p for p in tmp_path.iterdir() if "a.jsonl" in p.name]  # neither the file nor a temporary one
    unscored = result.model_copy(update={"score": None})
    done = write_annotations([unscored], "mlflow", tmp_path / "a.jsonl")
    assert done.annotations == 0 and done.unscored == [result.record_id]


def test_the_cli_shows_what_traces_become_and_writes_annotations(tmp_path, oi, exports, monkeypatch, capsys):
    path = write(tmp_path / "t.jsonl", oi, exports["old_genai"][0])
    code, out, err = run_cli(
        monkeypatch, capsys, "traces", "show", path, "--per", "llm-span", "--out", tmp_path / "recs.jsonl"
    )
    assert code == 0 and "get_year" in out and "3 records written" in err
    written = [json.loads(line)["id"] for line in (tmp_path / "recs.jsonl").read_text().splitlines()]
    assert written == [r.id for r in records(path, per="llm-span")]
    monkeypatch.setattr("localjury.cli.traces.SHOWN", 1)  # the table keeps its first rows; --out has them all
    code, out, err = run_cli(
        monkeypatch, capsys, "traces", "show", path, "--per", "llm-span", "-o", tmp_path / "all.jsonl"
    )
    assert (
        code == 0
        and "... and 2 more records" in out
        and (tmp_path / "all.jsonl").read_text() == (tmp_path / "recs.jsonl").read_text()
    )
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    code, _, err = run_cli(monkeypatch, capsys, "traces", "show", path, "--per", "sentence")
    assert code == 2 and "--per must be" in err
    code, _, err = run_cli(monkeypatch, capsys, "traces", "show", path, "--from", "zipkin")
    assert code == 2 and "--from must be one of: otlp, phoenix, langfuse, mlflow" in err
    (tmp_path / "lf.jsonl").write_text(json.dumps(langfuse_trace()) + "\n")
    code, out, _ = run_cli(monkeypatch, capsys, "traces", "show", tmp_path / "lf.jsonl", "--from", "langfuse")
    assert code == 0 and "get_year" in out and "Apollo" in out
    judged(tmp_path, oi)
    code, out, _ = run_cli(
        monkeypatch, capsys, "traces", "annotate", tmp_path / "r.jsonl", "--to", "phoenix", "-o", tmp_path / "p.jsonl"
    )
    assert code == 0 and "1 phoenix annotations written" in out
    code, _, err = run_cli(
        monkeypatch, capsys, "traces", "annotate", tmp_path / "r.jsonl", "--to", "arize", "-o", tmp_path / "x.jsonl"
    )
    assert code == 2 and "--to must be one of: phoenix, langfuse, mlflow" in err


def langfuse_trace(trace_id="6f1c2a9e-0d1b-4b43-9f7e-2f0f1b8a7c11"):
    """A trace as Langfuse's public API returns it (``GET /api/public/traces/{id}``), observations
    included: an agent span, a retriever, two generations (OpenAI-shaped input and output), a tool."""

    def observation(oid, kind, second, parent="o-agent", **fields):
        return {"id": oid, "traceId": trace_id, "type": kind, "name": kind.lower(), "parentObservationId": parent,
                "startTime": f"2026-11-30T09:00:0{second}.000Z", **fields}  # fmt: skip

    first_out = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    return {
        "id": trace_id, "name": "agent", "timestamp": "2026-11-30T09:00:00.000Z", "input": QUESTION, "output": FINAL,
        "observations": [
            observation("o-agent", "AGENT", 0, parent=None),
            observation("o-search", "RETRIEVER", 1, input=QUESTION, output=[{"page_content": DOCUMENT}]),
            observation("o-gen1", "GENERATION", 2, input=AGENT_TURNS[:1], output=first_out),
            observation("o-tool", "TOOL", 3, input={"event": "moon landing"}, output="1969"),
            observation("o-gen2", "GENERATION", 4, input=AGENT_TURNS[:3],
                        output={"choices": [{"message": AGENT_TURNS[3]}]}),
        ],
    }  # fmt: skip


def test_a_langfuse_export_reads_as_the_same_conversation_as_a_list_or_lines(tmp_path):
    trace = langfuse_trace()
    (tmp_path / "export.json").write_text(json.dumps([trace, {"name": "no id"}]))
    (tmp_path / "export.jsonl").write_text(json.dumps(trace) + "\n")
    got = list(iter_langfuse_records(tmp_path / "export.json"))
    record, error = got
    assert record.id == f"{trace['id']}/trace" and turns(record) == AGENT_TURNS
    assert record.retrieved_contexts == [DOCUMENT]
    assert (
        isinstance(error, RecordError)
        and "export.json item 2" in str(error)
        and "not a trace of a Langfuse export" in str(error)
    )
    assert list(iter_langfuse_records(tmp_path / "export.jsonl")) == [record]
    spans = list(iter_langfuse_records(tmp_path / "export.jsonl", TraceReading(per="llm-span")))
    assert [r.id for r in spans] == [f"{trace['id']}/o-gen1", f"{trace['id']}/o-gen2"]
    (rooted,) = iter_langfuse_records(tmp_path / "export.jsonl", TraceReading(answer="root"))
    assert rooted.response == FINAL
    looped = langfuse_trace("t-2")
    looped["observations"][0]["parentObservationId"] = "o-gen2"
    (tmp_path / "loop.jsonl").write_text(json.dumps(looped) + "\n")
    (error,) = iter_langfuse_records(tmp_path / "loop.jsonl")
    assert isinstance(error, RecordError) and "trace t-2" in str(error) and "cycle" in str(error)


def test_judgments_of_langfuse_traces_annotate_the_trace_and_phoenix_refuses_them(tmp_path):
    path = tmp_path / "export.jsonl"
    path.write_text(json.dumps(langfuse_trace()) + "\n")
    records_file = tmp_path / "recs.jsonl"
    records_file.write_text("".join(r.model_dump_json(exclude_none=True) + "\n" for r in iter_langfuse_records(path)))
    out = tmp_path / "r.jsonl"
    dated = AspectCritic("dated", "The response must include a specific date or year.")
    evaluate(str(records_file), [dated], [spec("A")], strictness=3, out=out, use_cache=False,
             engine_factory=factory(dated_responder, []))  # fmt: skip
    results = list(read_results(out))
    write_annotations(results, "langfuse", tmp_path / "l.jsonl")
    (row,) = [json.loads(line) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert row["trace_id"] == langfuse_trace()["id"] and row["observation_id"] is None
    write_annotations(results, "mlflow", tmp_path / "m.jsonl")
    assert (
        json.loads((tmp_path / "m.jsonl").read_text())["trace_id"] == langfuse_trace()["id"]
    )  # not an OTel id: as it is
    with pytest.raises(ConfigError, match="Phoenix annotates spans, and this record is a whole trace"):
        write_annotations(results, "phoenix", tmp_path / "p.jsonl")


def test_a_phoenix_export_of_spans_or_of_its_dataframe_reads_as_the_otlp_trace(tmp_path, exports, monkeypatch):
    pd = pytest.importorskip("pandas")
    client_module = pytest.importorskip("phoenix.client", reason="arize-phoenix-client is not installed")
    lines = exports["openinference"][:2]
    as_otlp = records(write(tmp_path / "t.jsonl", *lines))
    spans = [s for line in lines for s in phoenix_spans(line)]
    spans = spans[::2] + spans[1::2]  # a trace's spans apart, as a project's pages give them
    served = httpx.MockTransport(lambda request: httpx.Response(200, json={"data": spans, "next_cursor": None}))
    client = client_module.Client(
        base_url="http://phoenix", http_client=httpx.Client(transport=served, base_url="http://phoenix")
    )
    got = client.spans.get_spans(project_identifier="agents", limit=100)  # what a user saves
    (tmp_path / "spans.json").write_text(json.dumps(got, default=str))
    assert list(iter_phoenix_records(tmp_path / "spans.json")) == as_otlp
    frame = pd.DataFrame(phoenix_dataframe_rows(spans))
    frame.to_parquet(tmp_path / "spans.parquet")
    frame.to_json(tmp_path / "frame.jsonl", orient="records", lines=True)
    monkeypatch.setattr(phoenix, "ROWS", 3)  # traces over several batches
    assert list(iter_phoenix_records(tmp_path / "spans.parquet")) == as_otlp
    assert list(iter_phoenix_records(tmp_path / "frame.jsonl")) == as_otlp
    for name in ("spans.json", "spans.parquet", "frame.jsonl"):  # `localjury run` knows each as Phoenix's
        assert list(iter_records(tmp_path / name)) == as_otlp
    frame.drop(columns=["context.span_id"]).to_parquet(tmp_path / "records.parquet")
    as_records = list(iter_records(tmp_path / "records.parquet"))  # read as records, each row not one
    assert len(as_records) == len(spans) and all(isinstance(r, RecordError) for r in as_records)
    (tmp_path / "bad.jsonl").write_text(json.dumps({"name": "no context"}) + "\n" + json.dumps(spans[0]) + "\n")
    error, *rest = iter_phoenix_records(tmp_path / "bad.jsonl")
    assert isinstance(error, RecordError) and "bad.jsonl line 1" in str(error) and "context.trace_id" in str(error)
    assert all(isinstance(r, RecordError) for r in rest)  # one span of a trace: its parent is missing


def test_an_mlflow_trace_reads_as_one_conversation_from_its_json_or_its_otlp_export(tmp_path):
    trace_json, otlp_jsonl = make_mlflow_export(tmp_path)
    (record,) = iter_mlflow_records(trace_json)
    trace = json.loads(trace_json.read_text())
    root = next(s for s in trace["data"]["spans"] if not s["parent_span_id"])
    assert record.id == f"{trace['info']['trace_id']}/{base64.b64decode(root['span_id']).hex()}"
    assert turns(record) == AGENT_TURNS and record.retrieved_contexts == [DOCUMENT]
    (over_otlp,) = iter_trace_records(otlp_jsonl)  # MLflow's spans exported over OTLP
    assert over_otlp.messages == record.messages and over_otlp.retrieved_contexts == record.retrieved_contexts
    (tmp_path / "list.json").write_text(json.dumps([trace, {"info": {}}]))
    (tmp_path / "lines.jsonl").write_text(json.dumps(trace) + "\n")
    same, error = iter_mlflow_records(tmp_path / "list.json")
    assert same == record and isinstance(error, RecordError) and "list.json item 2" in str(error)
    assert list(iter_mlflow_records(tmp_path / "lines.jsonl")) == [record]
    for path in (trace_json, tmp_path / "lines.jsonl"):  # `localjury run` knows an MLflow export
        assert list(iter_records(path)) == [record]
    assert len(list(iter_mlflow_records(trace_json, TraceReading(per="llm-span")))) == 2

    # MLflow 2's span dicts: ids in a context, "0x" and hex; the trace's id as its request id.
    def v2(span):
        hexed = {k: "0x" + base64.b64decode(span[k]).hex() if span.get(k) else None
                 for k in ("trace_id", "span_id", "parent_span_id")}  # fmt: skip
        return {"name": span["name"], "context": {"trace_id": hexed["trace_id"], "span_id": hexed["span_id"]},
                "parent_id": hexed["parent_span_id"], "start_time": span["start_time_unix_nano"],
                "attributes": span["attributes"], "events": []}  # fmt: skip

    spans_v2 = [v2(s) for s in trace["data"]["spans"]]
    (tmp_path / "v2.json").write_text(
        json.dumps({"info": {"request_id": trace["info"]["trace_id"]}, "data": {"spans": spans_v2}})
    )
    assert list(iter_mlflow_records(tmp_path / "v2.json")) == [record]
    (tmp_path / "recs.jsonl").write_text(record.model_dump_json(exclude_none=True) + "\n")
    out = tmp_path / "r.jsonl"
    dated = AspectCritic("dated", "The response must include a specific date or year.")
    evaluate(str(tmp_path / "recs.jsonl"), [dated], [spec("A")], strictness=1, out=out, use_cache=False,
             engine_factory=factory(dated_responder, []))  # fmt: skip
    (result,) = read_results(out)
    assert annotation(result, "mlflow")["trace_id"] == trace["info"]["trace_id"]  # MLflow's own id, back


def test_the_turns_of_chosen_span_kinds_in_the_order_the_spans_ran(tmp_path, oi):
    path = write(tmp_path / "t.jsonl", oi)
    (agent_tool,) = records(path, turns=("agent", "tool"))
    (tool,) = [s for s in spans_of(oi) if s["name"] == "get_year"]
    call = f"call_{tool['spanId']}"
    assert turns(agent_tool) == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "tool_calls": [{**CALL, "id": call}]},
        {"role": "tool", "content": "1969", "tool_call_id": call},
        {"role": "assistant", "content": FINAL},  # the agent's output, after its children
    ]  # fmt: skip
    (llms,) = records(path, turns=("llm",))
    assert turns(llms)[0] == {"role": "user", "content": QUESTION} and turns(llms)[-1]["content"] == FINAL
    assert [m["role"] for m in turns(llms)] == ["user", "assistant", "assistant"]  # each LLM span's answer
    with pytest.raises(ValueError, match="one record per trace"):
        TraceReading(per="llm-span", turns=("llm",))
    (error,) = records(path, turns=("chain",))
    assert isinstance(error, RecordError) and "none of its spans is of a kind given as turns (chain)" in str(error)
