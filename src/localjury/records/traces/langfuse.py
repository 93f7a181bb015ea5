"""A Langfuse export read as traces: a JSON list of traces (or one trace a JSONL line), each
with its ``observations`` as Langfuse's public API returns them (``GET /api/public/traces/{id}``:
``id``, ``type``, ``name``, ``startTime``, ``parentObservationId``, ``input``, ``output``).

A ``GENERATION`` observation is an LLM span: its ``input`` the messages (a list in the OpenAI
chat shape, or a prompt string), its ``output`` the answer (a message, a string, or a completion
whose first choice holds it). A ``RETRIEVER`` observation's ``output`` documents (strings, or
objects with ``page_content``/``content``/``text``) are contexts. A trace without generations is
read from the trace's own ``input`` and ``output``, as its root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localjury.errors import RecordError
from localjury.records.record import Record
from localjury.records.traces.files import json_traces
from localjury.records.traces.payloads import chat_messages, documents, text_or_none
from localjury.records.traces.spans import Span, TraceReading, View, kind_of, nanoseconds, records_of

#: The largest trace read (a JSON list's item or a JSONL line, observations included).
MAX_TRACE_BYTES = 1 << 28
_HINT = "give a Langfuse export: a JSON list of traces with their observations, or one trace a JSONL line"
#: The id of the span that stands for the trace itself (its input and output).
ROOT = "trace"


def view_of(span: Span) -> View | None:
    """An observation (or the trace itself, :data:`ROOT`) read into a view."""
    kind = str(span.attributes.get("type", "")).upper()
    value_in, value_out = span.attributes.get("input"), span.attributes.get("output")
    if kind == "GENERATION":
        return View(
            kind="llm", messages_in=chat_messages(value_in, "user"), messages_out=chat_messages(value_out, "assistant")
        )
    if kind == "RETRIEVER":
        return View(kind="retriever", documents=documents(value_out))
    return View(
        kind=kind_of(kind),
        text_in=text_or_none(value_in),
        text_out=text_or_none(value_out),
    )


def _spans(trace: dict[str, Any]) -> tuple[str, list[Span]]:
    """A trace's observations as spans under one standing for the trace itself."""
    trace_id = str(trace["id"])
    root = Span(trace_id, ROOT, None, str(trace.get("name") or ""), 0,
                {"type": "TRACE", "input": trace.get("input"), "output": trace.get("output")})  # fmt: skip
    spans = [root]
    for o in trace.get("observations") or []:
        attrs = {k: o.get(k) for k in ("type", "input", "output")}
        spans.append(Span(trace_id, str(o["id"]), str(o.get("parentObservationId") or ROOT), str(o.get("name") or ""),
                          nanoseconds(o.get("startTime")), attrs))  # fmt: skip
    return trace_id, spans


def iter_langfuse_records(path: str | Path, reading: TraceReading | None = None) -> Iterator[Record | RecordError]:
    """The records of a Langfuse export (see the module's docstring), each trace's or in its
    place the error that rejects it."""
    path = Path(path)
    traces = json_traces(path, "Langfuse export", _HINT, MAX_TRACE_BYTES, _spans)
    yield from records_of(traces, reading or TraceReading(), path.name, view_of)
