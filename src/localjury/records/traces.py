"""Agent traces as records: OpenTelemetry spans in OTLP JSON, as the OpenTelemetry Collector's
file exporter writes them (one ``ExportTraceServiceRequest`` a line), read as a stream.

Each trace becomes one conversation record (``per="trace"``, the default) or one record per LLM
span (``per="llm-span"``). The spans may follow either convention in use today:

- **OpenInference** (Phoenix, Arize, the ``openinference-instrumentation-*`` packages):
  ``openinference.span.kind``, ``llm.input_messages.<i>.message.*`` and ``llm.output_messages.*``
  (roles, contents, tool calls), ``retrieval.documents.<i>.document.content``,
  ``input.value``/``output.value``.
- **GenAI** (the OpenTelemetry semantic conventions, OpenLLMetry): ``gen_ai.operation.name``;
  messages in the current form (``gen_ai.input.messages``/``gen_ai.output.messages``/
  ``gen_ai.system_instructions``, JSON with typed parts) or the older ones
  (``gen_ai.prompt.<i>.*``/``gen_ai.completion.<i>.*`` attributes; span events
  ``gen_ai.content.prompt``/``gen_ai.content.completion``, or ``gen_ai.<role>.message`` and
  ``gen_ai.choice`` events with their ``content``).

A trace's conversation is its last LLM span's input messages and output message (an
instrumented client sends the whole history, tool calls and tool results included); its
retriever spans' documents are the record's contexts (``contexts=False``: none). A trace with no
LLM messages is read from its root span: ``input.value`` the question, ``output.value`` the
answer. The record's id is ``<trace id>/<span id>``, the span judged (the root span for a trace,
the LLM span per LLM span), in hex as OTLP JSON writes them:
:mod:`localjury.results.annotations` turns the results back into the
annotations Phoenix, Langfuse and MLflow import.

Memory stays bounded: a first pass notes the last line of each trace, the second holds a
trace's spans only until that line is read. A trace that cannot become a record (a cycle, a
missing parent, no answer, no span of a known convention) is its own error; the others are read.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from localjury._files import Overlong, bounded_lines, open_regular_file
from localjury.errors import RecordError
from localjury.records.record import Record, parse_record, raw_id

#: The largest line (one export request) read: a batch of spans over it is skipped, and the
#: traces that had spans in it are then incomplete (their own errors). 256 MiB: a 1 GB
#: attribute is refused rather than held.
MAX_BATCH_BYTES = 1 << 28
_HEX = {16: re.compile(r"[0-9a-fA-F]{32}"), 8: re.compile(r"[0-9a-fA-F]{16}")}
#: What to give instead of a file that is not one.
_HINT = "give an OTLP JSON file, as the OpenTelemetry Collector's file exporter writes it"
_LLM_OPERATIONS = {"chat", "text_completion", "generate_content", "completion"}


class TraceReading(BaseModel):
    """What a trace becomes (``localjury traces show`` prints it for a file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    per: Literal["trace", "llm-span"] = "trace"
    """One record per trace, or one per LLM span (its input messages and its output)."""
    contexts: bool = True
    """Retriever spans' documents become the record's ``retrieved_contexts``."""
    answer: Literal["last-llm", "root"] = "last-llm"
    """Where a trace's final answer is: the last LLM span's output message, or the root span's
    ``output.value`` (an agent framework that post-processes the model's last answer)."""


@dataclass
class Span:
    """One span, reduced to what a record needs."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass
class View:
    """A span read through its convention."""

    kind: str
    """``llm``, ``tool``, ``retriever``, ``agent``, ``chain`` or ``other``."""
    messages_in: list[dict[str, Any]] = field(default_factory=list)
    messages_out: list[dict[str, Any]] = field(default_factory=list)
    text_in: str | None = None
    text_out: str | None = None
    documents: list[str] = field(default_factory=list)


# -- OTLP JSON --------------------------------------------------------------------------------


def _value(v: dict[str, Any]) -> Any:
    """An OTLP ``AnyValue`` as Python."""
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return _attributes(v["kvlistValue"].get("values", []))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: _value(kv.get("value") or {}) for kv in items}


def _hex_id(raw: Any, size: int, what: str) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lower-case hex: OTLP JSON writes hex; a
    protobuf JSON mapping writes base64, also read."""
    if isinstance(raw, str) and _HEX[size].fullmatch(raw):
        return raw.lower()
    try:
        data = base64.b64decode(raw, validate=True) if isinstance(raw, str) else b""
    except (binascii.Error, ValueError):
        data = b""
    if len(data) != size:
        raise ValueError(f"{what} {str(raw)[:60]!r} is neither {size * 2} hex digits nor {size} bytes in base64")
    return data.hex()


class SpanError(ValueError):
    """A span that cannot be read; ``trace_id`` where its trace id could be."""

    def __init__(self, message: str, trace_id: str | None) -> None:
        super().__init__(message)
        self.trace_id = trace_id


def _spans(request: dict[str, Any]) -> Iterator[Span | SpanError]:
    for resource in request.get("resourceSpans") or request.get("resource_spans") or []:
        for scope in resource.get("scopeSpans") or resource.get("scope_spans") or []:
            for s in scope.get("spans") or []:
                trace_id = None
                try:
                    trace_id = _hex_id(s.get("traceId"), 16, "traceId")
                    parent = s.get("parentSpanId") or None
                    yield Span(
                        trace_id=trace_id,
                        span_id=_hex_id(s.get("spanId"), 8, "spanId"),
                        parent_id=_hex_id(parent, 8, "parentSpanId") if parent else None,
                        name=str(s.get("name", "")),
                        start=int(s.get("startTimeUnixNano") or 0),
                        attributes=_attributes(s.get("attributes") or []),
                        events=[
                            (str(e.get("name", "")), _attributes(e.get("attributes") or []))
                            for e in s.get("events") or []
                        ],
                    )
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    yield SpanError(f"span {str(s.get('spanId'))[:40]!r}: {exc}", trace_id)


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Each line's request, or what is wrong with it."""
    with open_regular_file(path, "trace file", _HINT) as fh:
        for lineno, line in enumerate(bounded_lines(fh, path, "trace file", MAX_BATCH_BYTES), start=1):
            if isinstance(line, Overlong):
                yield (
                    lineno,
                    f"the line is {line.size:,} bytes, over the {MAX_BATCH_BYTES:,}-byte bound on a batch of spans; "
                    "skipped unread",
                )
                continue
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except (ValueError, RecursionError) as exc:
                yield lineno, f"not JSON: {exc}"
                continue
            yield lineno, request if isinstance(request, dict) else "not an OTLP JSON object"


def iter_spans_by_trace(path: Path) -> Iterator[tuple[str, list[Span]] | RecordError]:
    """Each trace's spans, a trace as soon as its last line is read; a line that cannot be
    read is an error of its own (its spans are missing from their traces)."""
    path = Path(path)
    last: dict[str, int] = {}
    for lineno, request in _lines(path):
        if isinstance(request, dict):
            for span in _spans(request):
                trace_id = span.trace_id
                if trace_id is not None:
                    last[trace_id] = lineno
    open_traces: dict[str, list[Span]] = {}
    damaged: dict[str, str] = {}
    for lineno, request in _lines(path):
        location = f"{path.name} line {lineno}"
        if not isinstance(request, dict):
            yield RecordError(request, record_id=raw_id(location), location=location)
            continue
        for span in _spans(request):
            if isinstance(span, Span):
                open_traces.setdefault(span.trace_id, []).append(span)
            elif span.trace_id is None:  # not even its trace is known: the line's error
                yield RecordError(str(span), record_id=raw_id(f"{location}: {span}"), location=location)
            else:
                damaged.setdefault(span.trace_id, f"{location}: {span}")
                open_traces.setdefault(span.trace_id, [])
        for trace_id in [t for t in open_traces if last.get(t, 0) <= lineno]:
            spans = open_traces.pop(trace_id)
            if trace_id in damaged:
                where = f"{path.name} trace {trace_id}"
                yield RecordError(
                    f"a span cannot be read ({damaged.pop(trace_id)})", record_id=trace_id, location=where
                )
            else:
                yield trace_id, spans
    for trace_id, spans in open_traces.items():  # pragma: no cover - every trace's last line is read
        yield trace_id, spans


# -- the tree ---------------------------------------------------------------------------------


def ordered(spans: list[Span]) -> list[Span]:
    """The trace's spans, parents before children and siblings by start time.

    Raises:
        ValueError: A span id twice, a parent that is not in the trace, a cycle, or several roots.
    """
    by_id: dict[str, Span] = {}
    for s in spans:
        if s.span_id in by_id:
            raise ValueError(f"span {s.span_id} appears twice")
        by_id[s.span_id] = s
    missing = sorted({s.parent_id for s in spans if s.parent_id and s.parent_id not in by_id})
    if missing:
        raise ValueError(f"its spans name parent span(s) {', '.join(missing[:3])} that are not in the file")
    roots = [s for s in spans if s.parent_id is None]
    children: dict[str, list[Span]] = {}
    for s in spans:
        if s.parent_id:
            children.setdefault(s.parent_id, []).append(s)
    out: list[Span] = []
    stack = sorted(roots, key=lambda s: s.start, reverse=True)
    while stack:
        s = stack.pop()
        out.append(s)
        stack.extend(sorted(children.get(s.span_id, []), key=lambda c: c.start, reverse=True))
    if len(out) < len(spans):
        cut = sorted(set(by_id) - {s.span_id for s in out})
        raise ValueError(f"its spans form a cycle (span {cut[0]} is its own ancestor)")
    if len(roots) > 1:
        raise ValueError(f"it has {len(roots)} root spans; a trace has one")
    return out


# -- the conventions --------------------------------------------------------------------------


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.<i>.rest`` attributes as a list of ``{rest: value}``, by index."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix):
            index, _, rest = key[len(prefix) :].partition(".")
            if index.isdigit() and rest:
                items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": str(name or ""), "arguments": _json_text(arguments or {})},
    }
    if call_id:
        call["id"] = str(call_id)
    return call


def _message(
    role: Any, content: str | None, tool_calls: list[dict[str, Any]], tool_call_id: Any = None
) -> dict[str, Any]:
    role = {"developer": "system", "model": "assistant", "function": "tool"}.get(str(role), str(role))
    message: dict[str, Any] = {"role": role, "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if tool_call_id:
        message["tool_call_id"] = str(tool_call_id)
    return message


def _openinference_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    messages = []
    for m in _indexed(attrs, prefix):
        content = m.get("message.content")
        if content is None:
            texts = [
                str(p["message_content.text"]) for p in _indexed(m, "message.contents.") if "message_content.text" in p
            ]
            content = "\n".join(texts) if texts else None
        calls = [
            _tool_call(c.get("tool_call.id"), c.get("tool_call.function.name"), c.get("tool_call.function.arguments"))
            for c in _indexed(m, "message.tool_calls.")
        ]
        messages.append(_message(m.get("message.role"), content, calls, m.get("message.tool_call_id")))
    return messages


def _openinference(attrs: dict[str, Any]) -> View:
    kind = str(attrs.get("openinference.span.kind", "")).lower()
    view = View(kind=kind if kind in ("llm", "tool", "retriever", "agent", "chain") else "other")
    view.messages_in = _openinference_messages(attrs, "llm.input_messages.")
    view.messages_out = _openinference_messages(attrs, "llm.output_messages.")
    view.text_in, view.text_out = attrs.get("input.value"), attrs.get("output.value")
    view.documents = [
        str(d["document.content"]) for d in _indexed(attrs, "retrieval.documents.") if "document.content" in d
    ]
    return view


def _parts_messages(raw: Any, role: str | None = None) -> list[dict[str, Any]]:
    """GenAI's current form: a JSON list of messages, each a role and typed parts (text,
    tool_call, tool_call_response); ``gen_ai.system_instructions`` is a list of parts."""
    items = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise ValueError("messages are not a JSON list")
    if role is not None:
        items = [{"role": role, "parts": items}]
    messages = []
    for m in items:
        texts, calls, answered = [], [], None
        for part in m.get("parts") or []:
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "tool_call":
                calls.append(_tool_call(part.get("id"), part.get("name"), part.get("arguments")))
            elif kind == "tool_call_response":
                answered = part.get("id")
                texts.append(_json_text(part.get("response", part.get("result", ""))))
        msg_role = "tool" if answered is not None else m.get("role")
        messages.append(_message(msg_role, "\n".join(texts) if texts else None, calls, answered))
    return messages


def _flat_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """GenAI's older form (OpenLLMetry): ``gen_ai.prompt.<i>.role``/``.content``/``.tool_calls.<j>.*``."""
    messages = []
    for m in _indexed(attrs, prefix):
        calls = [_tool_call(c.get("id"), c.get("name"), c.get("arguments")) for c in _indexed(m, "tool_calls.")]
        messages.append(_message(m.get("role", "assistant"), m.get("content"), calls, m.get("tool_call_id")))
    return messages


def _event_messages(events: list[tuple[str, dict[str, Any]]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """GenAI's span-event forms: ``gen_ai.content.prompt``/``gen_ai.content.completion`` events
    holding the messages as JSON (``gen_ai.prompt``/``gen_ai.completion``), or one event a
    message (``gen_ai.<role>.message``, ``gen_ai.choice``) with its ``content``."""
    messages_in: list[dict[str, Any]] = []
    messages_out: list[dict[str, Any]] = []
    for name, attrs in events:
        if name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
            raw = attrs.get("gen_ai.prompt" if name.endswith("prompt") else "gen_ai.completion", "[]")
            items = json.loads(raw) if isinstance(raw, str) else raw
            target = messages_in if name.endswith("prompt") else messages_out
            for m in items if isinstance(items, list) else []:
                functions = [(c.get("id"), c.get("function") or {}) for c in m.get("tool_calls") or []]
                calls = [_tool_call(call_id, f.get("name"), f.get("arguments")) for call_id, f in functions]
                target.append(_message(m.get("role", "assistant"), m.get("content"), calls, m.get("tool_call_id")))
        elif (name.startswith("gen_ai.") and name.endswith(".message")) or name == "gen_ai.choice":
            role = "assistant" if name == "gen_ai.choice" else name.removeprefix("gen_ai.").removesuffix(".message")
            message = _message(attrs.get("role", role), _text(attrs.get("content")), [], attrs.get("id"))
            (messages_out if name == "gen_ai.choice" else messages_in).append(message)
    return messages_in, messages_out


def _genai(attrs: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> View:
    operation = str(attrs.get("gen_ai.operation.name", ""))
    llm = operation in _LLM_OPERATIONS or any(k.startswith(("gen_ai.prompt.", "gen_ai.input.messages")) for k in attrs)
    view = View(
        kind="llm" if llm else "tool" if operation == "execute_tool" else "agent" if "agent" in operation else "other"
    )
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        if "gen_ai.system_instructions" in attrs:
            view.messages_in += _parts_messages(attrs["gen_ai.system_instructions"], role="system")
        view.messages_in += _parts_messages(attrs.get("gen_ai.input.messages", "[]"))
        view.messages_out = _parts_messages(attrs.get("gen_ai.output.messages", "[]"))
    elif any(k.startswith("gen_ai.prompt.") for k in attrs):
        view.messages_in = _flat_messages(attrs, "gen_ai.prompt.")
        view.messages_out = _flat_messages(attrs, "gen_ai.completion.")
    else:
        view.messages_in, view.messages_out = _event_messages(events)
        view.kind = "llm" if view.messages_out and view.kind == "other" else view.kind
    if view.kind == "tool":
        view.text_in, view.text_out = attrs.get("gen_ai.tool.call.arguments"), attrs.get("gen_ai.tool.call.result")
    return view


def view_of(span: Span) -> View | None:
    """The span through its convention; None when it follows neither."""
    attrs = span.attributes
    if "openinference.span.kind" in attrs:
        return _openinference(attrs)
    if any(k.startswith("gen_ai.") for k in attrs):
        return _genai(attrs, span.events)
    return None


# -- records ----------------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    return None if value is None else _json_text(value)


def trace_records(trace_id: str, spans: list[Span], reading: TraceReading, where: str) -> Iterator[Record]:
    """The record(s) one trace becomes.

    Raises:
        ValueError: Its spans do not make a tree, follow no known convention, or hold no answer.
        RecordError: What they hold is not a valid record (the record's own checks).
    """
    tree = ordered(spans)
    views = [(s, v) for s in tree if (v := view_of(s)) is not None]
    if not views:
        raise ValueError("none of its spans follows the OpenInference or the GenAI conventions")
    documents = [d for _, v in views if v.kind == "retriever" for d in v.documents] if reading.contexts else []
    llms = [(s, v) for s, v in views if v.kind == "llm" and v.messages_out]
    location = f"{where} trace {trace_id}"
    if reading.per == "llm-span":
        if not llms:
            raise ValueError("it has no LLM span with an output message")
        for s, v in llms:
            one: dict[str, Any] = {"id": f"{trace_id}/{s.span_id}", "messages": v.messages_in + v.messages_out[:1]}
            if documents:
                one["retrieved_contexts"] = documents
            yield parse_record(one, location=f"{location} span {s.span_id}")
        return
    root, root_view = tree[0], view_of(tree[0])
    fields: dict[str, Any] = {"id": f"{trace_id}/{root.span_id}"}
    if llms:
        fields["messages"] = llms[-1][1].messages_in + llms[-1][1].messages_out[:1]
        if reading.answer == "root":
            if root_view is None or root_view.text_out is None:
                raise ValueError(f"its root span {root.span_id} has no output.value (--answer root)")
            fields["response"] = _text(root_view.text_out)
    else:
        source = root_view if root_view is not None and root_view.text_out is not None else None
        if source is None:
            raise ValueError("it has no answer: no LLM span with an output message, no output.value on its root span")
        fields["user_input"], fields["response"] = _text(source.text_in), _text(source.text_out)
    if documents:
        fields["retrieved_contexts"] = documents
    yield parse_record(fields, location=location)


def iter_trace_records(path: str | Path, reading: TraceReading | None = None) -> Iterator[Record | RecordError]:
    """The records of an OTLP JSON file (see the module's docstring), each trace's or in its
    place the error that rejects it; a line that cannot be read is an error of its own."""
    path = Path(path)
    reading = reading or TraceReading()
    for item in iter_spans_by_trace(path):
        if isinstance(item, RecordError):
            yield item
            continue
        trace_id, spans = item
        try:
            yield from trace_records(trace_id, spans, reading, path.name)
        except RecordError as exc:
            yield exc
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:
            yield RecordError(f"trace {trace_id}: {exc}", record_id=trace_id, location=f"{path.name} trace {trace_id}")
