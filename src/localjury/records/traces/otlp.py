"""OpenTelemetry traces in OTLP JSON, as the OpenTelemetry Collector's file exporter writes them
(one ``ExportTraceServiceRequest`` a line), read as a stream: a first pass notes the last line of
each trace, the second holds a trace's spans only until that line is read."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localjury._files import Overlong, bounded_lines, open_regular_file
from localjury.errors import RecordError
from localjury.records.record import Record, raw_id
from localjury.records.traces.conventions import view_of
from localjury.records.traces.spans import Span, TraceReading, records_of

#: The largest line (one export request) read: a batch of spans over it is skipped, and the
#: traces that had spans in it are then incomplete (their own errors). 256 MiB: a 1 GB
#: attribute is refused rather than held.
MAX_BATCH_BYTES = 1 << 28
_HEX = {16: re.compile(r"[0-9a-fA-F]{32}"), 8: re.compile(r"[0-9a-fA-F]{16}")}
#: What to give instead of a file that is not one.
_HINT = "give an OTLP JSON file, as the OpenTelemetry Collector's file exporter writes it"


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


def iter_trace_records(path: str | Path, reading: TraceReading | None = None) -> Iterator[Record | RecordError]:
    """The records of an OTLP JSON file (:mod:`localjury.records.traces`), each trace's or in its
    place the error that rejects it; a line that cannot be read is an error of its own."""
    path = Path(path)
    yield from records_of(iter_spans_by_trace(path), reading or TraceReading(), path.name, view_of)
