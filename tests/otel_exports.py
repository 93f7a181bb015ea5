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
