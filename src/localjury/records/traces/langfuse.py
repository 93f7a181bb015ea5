"""A Langfuse export read as traces: a JSON list of traces (or one trace a JSONL line), each
with its ``observations`` as Langfuse's public API returns them (``GET /api/public/traces/{id}``:
``id``, ``type``, ``name``, ``startTime``, ``parentObservationId``, ``input``, ``output``).

A ``GENERATION`` observation is an LLM span: its ``input`` the messages (a list in the OpenAI
chat shape, or a prompt string), its ``output`` the answer (a message, a string, or a completion
whose first choice holds it). A ``RETRIEVER`` observation's ``output`` documents (strings, or
objects with ``page_content``/``content``/``text``) are contexts. A trace without generations is
read from the trace's own ``input`` and ``output``, as its root."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from localjury._files import Overlong, bounded_lines, open_regular_file
from localjury.errors import RecordError
from localjury.records._tables import json_items
from localjury.records.record import Record, raw_id
from localjury.records.traces.spans import Span, TraceReading, View, json_text, records_of, text_or_none

#: The largest trace read (a JSON list's item or a JSONL line, observations included).
MAX_TRACE_BYTES = 1 << 28
_HINT = "give a Langfuse export: a JSON list of traces with their observations, or one trace a JSONL line"
#: The id of the span that stands for the trace itself (its input and output).
ROOT = "trace"


def _start(value: Any) -> int:
    """An ISO timestamp as nanoseconds since the epoch (0 when absent or unreadable)."""
    try:
        return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        return 0


def _messages(value: Any, role: str) -> list[dict[str, Any]]:
    """A generation's input or output as chat messages."""
    if isinstance(value, dict) and "choices" in value:
        value = (value["choices"] or [{}])[0].get("message")
    if isinstance(value, dict) and "messages" in value:
        value = value["messages"]
    if isinstance(value, dict) and "role" in value:
        value = [value]
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
        messages = []
        for m in value:
            message: dict[str, Any] = {
                "role": m["role"],
                "content": text_or_none(m.get("content")),
            }
            for key in ("tool_calls", "tool_call_id", "name"):
                if m.get(key):
                    message[key] = m[key]
            messages.append(message)
        return messages
    return [] if value is None else [{"role": role, "content": json_text(value)}]


def _documents(value: Any) -> list[str]:
    items = value if isinstance(value, list) else value.get("documents", []) if isinstance(value, dict) else []
    texts = []
    for item in items:
        if isinstance(item, dict):
            item = next((item[k] for k in ("page_content", "content", "text") if k in item), json_text(item))
        texts.append(json_text(item))
    return texts


def view_of(span: Span) -> View | None:
    """An observation (or the trace itself, :data:`ROOT`) read into a view."""
    kind = str(span.attributes.get("type", "")).upper()
    value_in, value_out = span.attributes.get("input"), span.attributes.get("output")
    if kind == "GENERATION":
        return View(kind="llm", messages_in=_messages(value_in, "user"), messages_out=_messages(value_out, "assistant"))
    if kind == "RETRIEVER":
        return View(kind="retriever", documents=_documents(value_out))
    return View(
        kind=kind.lower() if kind in ("TOOL", "AGENT", "CHAIN") else "other",
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
                          _start(o.get("startTime")), attrs))  # fmt: skip
    return trace_id, spans


def _traces(path: Path) -> Iterator[tuple[str, list[Span]] | RecordError]:
    with open_regular_file(path, "Langfuse export", _HINT) as fh:
        if path.suffix.lower() == ".json":
            rows, what = json_items(fh, path, MAX_TRACE_BYTES), "item"
        else:
            rows, what = bounded_lines(fh, path, "Langfuse export", MAX_TRACE_BYTES), "line"
        items = ((f"{path.name} {what} {i}", item) for i, item in enumerate(rows, 1))
        for location, item in items:
            if isinstance(item, Overlong):
                yield RecordError(f"a trace of {item.size:,} bytes, over the {MAX_TRACE_BYTES:,}-byte bound; skipped",
                                  record_id=raw_id(location), location=location)  # fmt: skip
                continue
            if not item.strip():
                continue
            try:
                trace = json.loads(item)
                yield _spans(trace)
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
                why = f"not a Langfuse trace with observations: {type(exc).__name__}: {exc}"
                yield RecordError(why, record_id=raw_id(location), location=location)


def iter_langfuse_records(path: str | Path, reading: TraceReading | None = None) -> Iterator[Record | RecordError]:
    """The records of a Langfuse export (see the module's docstring), each trace's or in its
    place the error that rejects it."""
    path = Path(path)
    yield from records_of(_traces(path), reading or TraceReading(), path.name, view_of)
