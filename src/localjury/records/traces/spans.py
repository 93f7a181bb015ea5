"""What every trace source shares: a span, a span read through its convention (a view), the
choices of what a trace becomes (:class:`TraceReading`), the span tree, and the record(s) a
trace becomes (:func:`trace_records`)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, model_validator

from localjury.errors import RecordError
from localjury.records.record import Record, parse_record, raw_id
from localjury.records.traces.payloads import message, text_or_none, tool_call

#: How a source reads a span: its view, or None when the span follows no known convention.
ViewOf = Callable[["Span"], "View | None"]
#: A source's file read in batches of spans, each with where it is (``line 3``), or in place of
#: its spans what is wrong with the batch; called once for each pass over the file.
Batches = Callable[[], Iterator[tuple[str, "list[Span | SpanError] | str"]]]


#: The kinds of span a view names.
Kind = Literal["llm", "tool", "retriever", "agent", "chain", "other"]
KINDS: tuple[Kind, ...] = get_args(Kind)
_HEX = {16: re.compile(r"[0-9a-fA-F]{32}"), 8: re.compile(r"[0-9a-fA-F]{16}")}


def kind_of(name: Any) -> Kind:
    """A convention's name for a span's kind (``LLM``, ``tool``) as a :data:`Kind`; ``other``
    for one that is none of them."""
    lowered = str(name).lower()
    return next((k for k in KINDS if k == lowered), "other")


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
    turns: tuple[Kind, ...] = ()
    """The span kinds a trace's turns are made of, in the order the spans ran; none (the
    default): the last LLM span's input messages and output, which hold the whole conversation
    when the client is instrumented. An ``llm`` span adds its output message (the first one its
    input messages too); a ``tool`` span a tool call and its result; any other kind its input as
    a user turn and, after its children's turns, its output as an assistant turn. One record per
    trace only (``per="trace"``)."""

    @model_validator(mode="after")
    def _turns_per_trace(self) -> TraceReading:
        if self.turns and self.per != "trace":
            raise ValueError("turns are chosen for one record per trace, not per LLM span")
        return self


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


class SpanError(ValueError):
    """A span that cannot be read; ``trace_id`` where its trace id could be."""

    def __init__(self, message: str, trace_id: str | None) -> None:
        super().__init__(message)
        self.trace_id = trace_id


@dataclass
class View:
    """A span read through its convention."""

    kind: Kind
    messages_in: list[dict[str, Any]] = field(default_factory=list)
    messages_out: list[dict[str, Any]] = field(default_factory=list)
    text_in: str | None = None
    text_out: str | None = None
    documents: list[str] = field(default_factory=list)


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
        raise ValueError(f"its spans form a cycle: {len(cut)} of them (span {cut[0]}, ...) have no root above them")
    if len(roots) > 1:
        raise ValueError(f"it has {len(roots)} root spans; a trace has one")
    return out


def hex_id(raw: Any, size: int, what: str) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lower-case hex: OTLP JSON writes hex (MLflow's
    older traces ``0x`` and hex); a protobuf JSON mapping (and MLflow's trace JSON) base64."""
    if isinstance(raw, str) and _HEX[size].fullmatch(raw.removeprefix("0x")):
        return raw.removeprefix("0x").lower()
    try:
        data = base64.b64decode(raw, validate=True) if isinstance(raw, str) else b""
    except (binascii.Error, ValueError):
        data = b""
    if len(data) != size:
        raise ValueError(f"{what} {str(raw)[:60]!r} is neither {size * 2} hex digits nor {size} bytes in base64")
    return data.hex()


def nanoseconds(value: Any) -> int:
    """A span's start (an ISO timestamp, a datetime, or nanoseconds) as nanoseconds since the
    epoch; 0 when absent or unreadable (siblings then keep the file's order)."""
    if isinstance(value, int):
        return value
    try:
        moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return int(moment.timestamp() * 1e9)
    except ValueError:
        return 0


def trace_records(
    trace_id: str, spans: list[Span], reading: TraceReading, where: str, view_of: ViewOf
) -> Iterator[Record]:
    """The record(s) one trace becomes, its spans read by ``view_of``.

    Raises:
        ValueError: Its spans do not make a tree, follow no known convention, or hold no answer.
        RecordError: What they hold is not a valid record (the record's own checks).
    """
    tree = ordered(spans)
    views = [(s, v) for s in tree if (v := view_of(s)) is not None]
    if not views:
        raise ValueError("none of its spans follows the OpenInference, GenAI or MLflow conventions")
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
    if reading.turns:
        fields["messages"] = turns_of(tree, {s.span_id: v for s, v in views}, set(reading.turns))
        if not fields["messages"]:
            raise ValueError(f"none of its spans is of a kind given as turns ({', '.join(reading.turns)})")
        if reading.answer == "root" and root_view is not None and root_view.text_out is not None:
            fields["response"] = text_or_none(root_view.text_out)
    elif llms:
        fields["messages"] = llms[-1][1].messages_in + llms[-1][1].messages_out[:1]
        if reading.answer == "root":
            if root_view is None or root_view.text_out is None:
                raise ValueError(f"its root span {root.span_id} has no output.value (--answer root)")
            fields["response"] = text_or_none(root_view.text_out)
    else:
        source = root_view if root_view is not None and root_view.text_out is not None else None
        if source is None:
            raise ValueError("it has no answer: no LLM span with an output message, no output.value on its root span")
        fields["user_input"], fields["response"] = text_or_none(source.text_in), text_or_none(source.text_out)
    if documents:
        fields["retrieved_contexts"] = documents
    yield parse_record(fields, location=location)


def spans_by_trace(batches: Batches, name: str) -> Iterator[tuple[str, list[Span]] | RecordError]:
    """Each trace's spans, a trace as soon as the last batch holding it is read: a first pass
    over ``batches()`` notes that batch, the second holds a trace only until it. A batch that
    cannot be read is an error of its own (its spans are missing from their traces); a span that
    cannot be read, its trace's error. ``name`` (the file's) begins each error's location."""
    last: dict[str, int] = {}
    for number, (_, spans) in enumerate(batches()):
        for span in spans if isinstance(spans, list) else []:
            if span.trace_id is not None:
                last[span.trace_id] = number
    open_traces: dict[str, list[Span]] = {}
    damaged: dict[str, str] = {}
    for number, (where, spans) in enumerate(batches()):
        location = f"{name} {where}"
        if not isinstance(spans, list):
            yield RecordError(spans, record_id=raw_id(location), location=location)
            continue
        for span in spans:
            if isinstance(span, Span):
                open_traces.setdefault(span.trace_id, []).append(span)
            elif span.trace_id is None:  # not even its trace is known: the batch's error
                yield RecordError(str(span), record_id=raw_id(f"{location}: {span}"), location=location)
            else:
                damaged.setdefault(span.trace_id, f"{location}: {span}")
                open_traces.setdefault(span.trace_id, [])
        for trace_id in [t for t in open_traces if last.get(t, 0) <= number]:
            spans_of_trace = open_traces.pop(trace_id)
            if trace_id in damaged:
                where_trace = f"{name} trace {trace_id}"
                yield RecordError(
                    f"a span cannot be read ({damaged.pop(trace_id)})", record_id=trace_id, location=where_trace
                )
            else:
                yield trace_id, spans_of_trace
    for trace_id, spans_of_trace in open_traces.items():  # pragma: no cover - every trace's last batch is read
        yield trace_id, spans_of_trace


def turns_of(tree: list[Span], views: dict[str, View], kinds: set[str]) -> list[dict[str, Any]]:
    """The turns the spans of ``kinds`` make (see :attr:`TraceReading.turns`); ``tree`` is in
    :func:`ordered`'s order, parents first; ``views`` by span id."""
    turns: list[dict[str, Any]] = []
    closing: list[tuple[str, dict[str, Any]]] = []  # (span id, its output turn) until its subtree ends
    above: dict[str, str | None] = {s.span_id: s.parent_id for s in tree}

    def within(span: Span, ancestor: str) -> bool:
        parent = span.parent_id
        while parent is not None and parent != ancestor:
            parent = above.get(parent)
        return parent == ancestor

    for span in tree:
        while closing and not within(span, closing[-1][0]):
            turns.append(closing.pop()[1])
        view = views.get(span.span_id)
        if view is None or view.kind not in kinds:
            continue
        if view.kind == "llm":
            turns += (view.messages_in if not turns else []) + view.messages_out[:1]
        elif view.kind == "tool":
            call_id = f"call_{span.span_id}"
            turns.append(message("assistant", None, [tool_call(call_id, span.name, view.text_in)]))
            turns.append(message("tool", text_or_none(view.text_out), [], call_id))
        else:
            if view.text_in is not None:
                turns.append(message("user", text_or_none(view.text_in), []))
            if view.text_out is not None:
                closing.append((span.span_id, message("assistant", text_or_none(view.text_out), [])))
    turns += [turn for _, turn in reversed(closing)]
    return turns


def records_of(
    traces: Iterable[tuple[str, list[Span]] | RecordError], reading: TraceReading, where: str, view_of: ViewOf
) -> Iterator[Record | RecordError]:
    """Each trace's records, or in their place the error that rejects the trace (naming it);
    a source's own errors (a line that cannot be read) pass through."""
    for item in traces:
        if isinstance(item, RecordError):
            yield item
            continue
        trace_id, spans = item
        try:
            yield from trace_records(trace_id, spans, reading, where, view_of)
        except RecordError as exc:
            yield exc
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:
            yield RecordError(str(exc), record_id=trace_id, location=f"{where} trace {trace_id}")
