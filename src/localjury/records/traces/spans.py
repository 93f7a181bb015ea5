"""What every trace source shares: a span, a span read through its convention (a view), the
choices of what a trace becomes (:class:`TraceReading`), the span tree, and the record(s) a
trace becomes (:func:`trace_records`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from localjury.errors import RecordError
from localjury.records.record import Record, parse_record

#: How a source reads a span: its view, or None when the span follows no known convention.
ViewOf = Callable[["Span"], "View | None"]


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


def json_text(value: Any) -> str:
    """A value as a message's text: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def text_or_none(value: Any) -> str | None:
    """:func:`json_text`, None kept as None."""
    return None if value is None else json_text(value)


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
            fields["response"] = text_or_none(root_view.text_out)
    else:
        source = root_view if root_view is not None and root_view.text_out is not None else None
        if source is None:
            raise ValueError("it has no answer: no LLM span with an output message, no output.value on its root span")
        fields["user_input"], fields["response"] = text_or_none(source.text_in), text_or_none(source.text_out)
    if documents:
        fields["retrieved_contexts"] = documents
    yield parse_record(fields, location=location)


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
            yield RecordError(f"trace {trace_id}: {exc}", record_id=trace_id, location=f"{where} trace {trace_id}")
