"""Real trace exports for the trace tests: spans made by the OpenTelemetry SDK, with the
OpenInference and OpenLLMetry instrumentations around an OpenAI client whose HTTP transport is
a fake model (no network), written as OTLP JSON.

The Python SDK has no file exporter; :func:`write_otlp_json` writes what the OpenTelemetry
Collector's file exporter writes: each batch one ``ExportTraceServiceRequest`` a line, in the
OTLP/JSON encoding (the protobuf JSON mapping with enums as integers and trace and span ids in
hex, not base64). The request is the SDK's own OTLP encoding (``encode_spans``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

FINAL = "People first walked on the Moon in 1969, during Apollo 11."
QUESTION = "When did people first walk on the Moon?"
DOCUMENT = "Apollo 11 landed on the Moon on 20 July 1969."


def fake_model(request: httpx.Request) -> httpx.Response:
    """The model: a tool call for a question, the answer once the tool's result is there."""
    body = json.loads(request.content)
    if body["messages"][-1]["role"] == "user":
        arguments = json.dumps({"event": "moon landing"})
        call = {"id": "call_1", "type": "function", "function": {"name": "get_year", "arguments": arguments}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    else:
        message = {"role": "assistant", "content": FINAL}
    return httpx.Response(200, json={
        "id": "c1", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    })  # fmt: skip


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else _hex_ids(v)
                for k, v in node.items()}  # fmt: skip
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def otlp_json_line(spans: Sequence[Any]) -> str:
    """One export request of ``spans`` (the SDK's ReadableSpans) in OTLP/JSON."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return json.dumps(_hex_ids(MessageToDict(encode_spans(spans), use_integers_for_enums=True)))


def write_otlp_json(path: Path, batches: Sequence[Sequence[Any]]) -> Path:
    path.write_text("".join(otlp_json_line(batch) + "\n" for batch in batches))
    return path


def otlp_json_to_proto(lines: Sequence[str]) -> bytes:
    """OTLP JSON lines as the Collector's file exporter writes them with ``format: proto``:
    each ``ExportTraceServiceRequest``'s bytes preceded by their size (4 bytes, big-endian)."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = b""
    for line in lines:
        request = ParseDict(_base64_ids(json.loads(line)), ExportTraceServiceRequest()).SerializeToString()
        out += len(request).to_bytes(4, "big") + request
    return out


def _base64_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId") and v
                else _base64_ids(v) for k, v in node.items()}  # fmt: skip
    if isinstance(node, list):
        return [_base64_ids(v) for v in node]
    return node


#: The exports :func:`make_exports` writes, each by its own process: an instrumentor patches the
#: OpenAI client for the whole process, and uninstrumenting it leaves wrappers behind.
EXPORTS = {
    "openinference": "openinference_spans",
    "openllmetry": "openllmetry_spans",
    "old_genai": "old_genai_spans",
    "genai_events": "genai_event_spans",
}


def make_exports(folder: Path, traces: int = 6) -> dict[str, Path]:
    """Write each export of :data:`EXPORTS` (``traces`` traces, one a line) to ``folder``."""
    import subprocess
    import sys

    from tests import ROOT

    paths = {}
    for name, function in EXPORTS.items():
        paths[name] = folder / f"{name}.jsonl"
        code = (f"from pathlib import Path; from tests.otel_exports import *; "
                f"write_otlp_json(Path({str(paths[name])!r}), [{function}() for _ in range({traces})])")  # fmt: skip
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    return paths


def traced(instrument: Callable[[Any], None], agent: Callable[[Any, Any], None]) -> list[Any]:
    """The finished spans of ``agent(tracer_provider, client)`` with ``instrument`` applied."""
    import openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(provider)
    client = openai.OpenAI(api_key="none", base_url="http://fake/v1",
                           http_client=httpx.Client(transport=httpx.MockTransport(fake_model)))  # fmt: skip
    agent(provider, client)
    return list(exporter.get_finished_spans())


def ask(client: Any) -> str:
    """The agent's loop: the question, the tool call, the tool's result, the answer."""
    tools = [{"type": "function", "function": {"name": "get_year", "parameters": {"type": "object"}}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    first = client.chat.completions.create(model="fake", messages=messages, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "1969"}]  # fmt: skip
    return client.chat.completions.create(model="fake", messages=messages, tools=tools).choices[0].message.content


def openinference_spans() -> list[Any]:
    """An agent traced with OpenInference: an AGENT root span, a RETRIEVER span and a TOOL span
    made with OpenInference's tracer, and the OpenAI calls by its OpenAI instrumentor."""
    from openinference.instrumentation import OITracer, TraceConfig
    from openinference.instrumentation.openai import OpenAIInstrumentor

    def instrument(provider: Any) -> None:
        OpenAIInstrumentor().instrument(tracer_provider=provider)

    def agent(provider: Any, client: Any) -> None:
        tracer = OITracer(provider.get_tracer("agent"), TraceConfig())
        try:
            with tracer.start_as_current_span("agent", openinference_span_kind="agent") as root:
                root.set_input(QUESTION)
                with tracer.start_as_current_span("search", openinference_span_kind="retriever") as search:
                    search.set_input(QUESTION)
                    search.set_attributes({"retrieval.documents.0.document.content": DOCUMENT})
                with tracer.start_as_current_span("get_year", openinference_span_kind="tool") as tool:
                    tool.set_tool(name="get_year", parameters={"type": "object"})
                    tool.set_input({"event": "moon landing"})
                    tool.set_output("1969")
                root.set_output(ask(client))
        finally:
            OpenAIInstrumentor().uninstrument()

    return traced(instrument, agent)


def openllmetry_spans() -> list[Any]:
    """An agent traced with OpenLLMetry's OpenAI instrumentor (the GenAI conventions, messages
    in ``gen_ai.input.messages``/``gen_ai.output.messages``) under a plain root span."""
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    def instrument(provider: Any) -> None:
        OpenAIInstrumentor().instrument(tracer_provider=provider)

    def agent(provider: Any, client: Any) -> None:
        try:
            with provider.get_tracer("agent").start_as_current_span("agent"):
                ask(client)
        finally:
            OpenAIInstrumentor().uninstrument()

    return traced(instrument, agent)


def old_genai_spans() -> list[Any]:
    """The GenAI conventions' older form (OpenLLMetry before the typed parts): a chat span's
    messages as ``gen_ai.prompt.<i>.*``/``gen_ai.completion.<i>.*`` attributes, set through the SDK."""

    def agent(provider: Any, client: Any) -> None:
        with provider.get_tracer("agent").start_as_current_span("openai.chat") as span:
            span.set_attributes({
                "gen_ai.system": "openai", "gen_ai.request.model": "fake",
                "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Answer briefly.",
                "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": QUESTION,
                "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": FINAL,
            })  # fmt: skip

    return traced(lambda provider: None, agent)


def genai_event_spans() -> list[Any]:
    """The GenAI conventions' span-event forms, set through the SDK: a chat span whose messages are
    ``gen_ai.content.prompt``/``gen_ai.content.completion`` events (JSON, OpenAI's shape), and a
    second one with an event a message (``gen_ai.user.message``, ``gen_ai.choice``)."""

    def agent(provider: Any, client: Any) -> None:
        tracer = provider.get_tracer("agent")
        with tracer.start_as_current_span("agent"):
            with tracer.start_as_current_span("chat fake") as span:
                span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "fake"})
                prompt = [{"role": "user", "content": QUESTION}]
                span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps(prompt)})
                completion = [{"role": "assistant", "content": "Let me check."}]
                span.add_event("gen_ai.content.completion", {"gen_ai.completion": json.dumps(completion)})
            with tracer.start_as_current_span("chat fake") as span:
                span.set_attributes({"gen_ai.system": "openai", "gen_ai.request.model": "fake"})
                span.add_event("gen_ai.user.message", {"content": QUESTION})
                span.add_event("gen_ai.choice", {"content": FINAL})

    return traced(lambda provider: None, agent)


def _any_value(v: dict[str, Any]) -> Any:
    if "arrayValue" in v:
        return [_any_value(x) for x in v["arrayValue"].get("values", [])]
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    return int(v["intValue"]) if "intValue" in v else None


def phoenix_spans(line: str) -> list[dict[str, Any]]:
    """The spans of an OTLP JSON line as Phoenix's REST API returns them (``GET
    /v1/projects/{project}/spans``, what ``client.spans.get_spans`` gives back): its kind taken
    out of the attributes into ``span_kind``, the attributes flat, ids in hex, times ISO."""
    from datetime import UTC, datetime

    spans = []
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                attributes = {kv["key"]: _any_value(kv["value"]) for kv in s.get("attributes", [])}
                start = datetime.fromtimestamp(int(s["startTimeUnixNano"]) / 1e9, tz=UTC).isoformat()
                spans.append({"id": f"U3Bhbjo{len(spans)}", "name": s["name"], "span_kind":
                              attributes.pop("openinference.span.kind", "UNKNOWN"),
                              "context": {"trace_id": s["traceId"], "span_id": s["spanId"]},
                              "parent_id": s.get("parentSpanId"), "start_time": start, "end_time": start,
                              "status_code": "OK", "status_message": "", "attributes": attributes,
                              "events": []})  # fmt: skip
    return spans


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """Dotted attributes as Phoenix stores them: nested mappings, numeric parts as lists."""
    root: dict[str, Any] = {}
    for key, value in flat.items():
        node = root
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value

    def lists(node: Any) -> Any:
        if isinstance(node, dict):
            if node and all(k.isdigit() for k in node):
                return [lists(node[k]) for k in sorted(node, key=int)]
            return {k: lists(v) for k, v in node.items()}
        return node

    return lists(root)


def _dataframe_columns(prefix: str, value: Any, out: dict[str, Any]) -> dict[str, Any]:
    """Phoenix's spans dataframe's flattening (``flatten(..., recurse_on_sequence=False)``):
    mappings opened into dotted columns, a list of mappings kept as a list, each item flattened."""
    if isinstance(value, dict):
        for key, item in value.items():
            _dataframe_columns(f"{prefix}.{key}", item, out)
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        out[prefix] = [_dataframe_columns("", item, {}) for item in value]
        out[prefix] = [{k.removeprefix("."): v for k, v in item.items()} for item in out[prefix]]
    else:
        out[prefix] = value
    return out


def phoenix_dataframe_rows(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``spans`` (:func:`phoenix_spans`) as the rows of Phoenix's spans dataframe
    (``client.spans.get_spans_dataframe``): ``context.span_id``, ``context.trace_id``,
    ``parent_id``, ``span_kind``, ``start_time`` and ``attributes.*`` columns."""
    rows = []
    for s in spans:
        row = {"name": s["name"], "span_kind": s["span_kind"], "parent_id": s["parent_id"],
               "start_time": s["start_time"], "context.span_id": s["context"]["span_id"],
               "context.trace_id": s["context"]["trace_id"]}  # fmt: skip
        rows.append(_dataframe_columns("attributes", _nested(s["attributes"]), row))
    return rows


def make_mlflow_export(folder: Path) -> tuple[Path, Path]:
    """:func:`mlflow_trace` written by its own process (MLflow's telemetry off) to ``folder``:
    the trace's JSON (``mlflow.json``) and its spans as OTLP JSON (``mlflow_otlp.jsonl``)."""
    import os
    import subprocess
    import sys

    from tests import ROOT

    paths = folder / "mlflow.json", folder / "mlflow_otlp.jsonl"
    code = (f"from pathlib import Path; from tests.otel_exports import mlflow_trace; t, line = mlflow_trace(); "
            f"Path({str(paths[0])!r}).write_text(t); Path({str(paths[1])!r}).write_text(line + '\\n')")  # fmt: skip
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, env=env)
    return paths


def mlflow_trace() -> tuple[str, str]:
    """An agent traced by MLflow's own span entities (``create_mlflow_span``: ``set_inputs``,
    ``set_outputs``, span types) over OpenTelemetry spans: an AGENT root, a RETRIEVER, a TOOL and
    two CHAT_MODEL spans holding the OpenAI requests and completions of the fake model. Returned
    as ``Trace.to_json()`` writes it and as the OTLP JSON line of the same spans (MLflow's spans
    exported over OTLP). (MLflow's fluent tracing needs a tracking store, which the light
    mlflow-tracing package has no local one of.)"""
    import openai
    from mlflow.entities import SpanType, Trace, TraceData, TraceInfo, TraceLocation, TraceState
    from mlflow.entities.span import create_mlflow_span
    from mlflow.tracing.utils import generate_trace_id_v3
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    client = openai.OpenAI(api_key="none", base_url="http://fake/v1",
                           http_client=httpx.Client(transport=httpx.MockTransport(fake_model)))  # fmt: skip
    tools = [{"type": "function", "function": {"name": "get_year", "parameters": {"type": "object"}}}]

    def chat(trace_id: str, messages: list[dict[str, Any]]) -> Any:
        with tracer.start_as_current_span("Completions") as otel:
            span = create_mlflow_span(otel, trace_id, SpanType.CHAT_MODEL)
            request = {"model": "fake", "messages": messages, "tools": tools}
            span.set_inputs(request)
            completion = client.chat.completions.create(**request)
            span.set_outputs(completion.model_dump(exclude_none=True))
            return completion.choices[0].message

    with tracer.start_as_current_span("agent") as otel_root:
        trace_id = generate_trace_id_v3(otel_root)
        root = create_mlflow_span(otel_root, trace_id, SpanType.AGENT)
        root.set_inputs({"question": QUESTION})
        with tracer.start_as_current_span("search") as otel:
            search = create_mlflow_span(otel, trace_id, SpanType.RETRIEVER)
            search.set_inputs({"query": QUESTION})
            search.set_outputs([{"page_content": DOCUMENT, "metadata": {}, "id": "doc-1"}])
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        first = chat(trace_id, messages)
        call = first.tool_calls[0]
        with tracer.start_as_current_span("get_year") as otel:
            tool = create_mlflow_span(otel, trace_id, SpanType.TOOL)
            tool.set_inputs(json.loads(call.function.arguments))
            tool.set_outputs("1969")
        messages += [first.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "1969"}]
        root.set_outputs(chat(trace_id, messages).content)
    spans = [create_mlflow_span(s, trace_id) for s in exporter.get_finished_spans()]
    location = TraceLocation.from_experiment_id("0")
    info = TraceInfo(trace_id=trace_id, trace_location=location, request_time=0, state=TraceState.OK)
    return Trace(info=info, data=TraceData(spans=spans)).to_json(), otlp_json_line(exporter.get_finished_spans())
