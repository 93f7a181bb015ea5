"""OpenTelemetry traces in OTLP files, as the OpenTelemetry Collector's file exporter writes them:
JSON (``format: json``, one ``ExportTraceServiceRequest`` a line) or protobuf (``format: proto``,
each request's bytes preceded by their size, 4 bytes big-endian; decoded by ``opentelemetry-proto``,
the ``traces`` extra). Read as a stream: a first pass notes the last request holding each trace,
the second holds a trace's spans only until that request is read."""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from localjury._files import Overlong, bounded_lines, open_regular_file
from localjury.errors import ConfigError, MissingDependencyError, RecordError
from localjury.records.record import Record
from localjury.records.traces.conventions import view_of
from localjury.records.traces.spans import Span, SpanError, TraceReading, hex_id, records_of, spans_by_trace

#: The largest line (one export request) read: a batch of spans over it is skipped, and the
#: traces that had spans in it are then incomplete (their own errors). 256 MiB: a 1 GB
#: attribute is refused rather than held.
MAX_BATCH_BYTES = 1 << 28
#: What to give instead of a file that is not one.
_HINT = "give an OTLP file (JSON or protobuf), as the OpenTelemetry Collector's file exporter writes it"


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


def _spans(request: dict[str, Any]) -> Iterator[Span | SpanError]:
    for resource in request.get("resourceSpans") or request.get("resource_spans") or []:
        for scope in resource.get("scopeSpans") or resource.get("scope_spans") or []:
            for s in scope.get("spans") or []:
                trace_id = None
                try:
                    trace_id = hex_id(s.get("traceId"), 16, "traceId")
                    parent = s.get("parentSpanId") or None
                    yield Span(
                        trace_id=trace_id,
                        span_id=hex_id(s.get("spanId"), 8, "spanId"),
                        parent_id=hex_id(parent, 8, "parentSpanId") if parent else None,
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


def _over(what: str, size: int) -> str:
    return f"the {what} is {size:,} bytes, over the {MAX_BATCH_BYTES:,}-byte bound on a batch of spans; skipped unread"


def _json_lines(fh: IO[bytes], path: Path) -> Iterator[tuple[str, list[Span | SpanError] | str]]:
    """``format: json``: each line's spans, or what is wrong with the line."""
    for lineno, line in enumerate(bounded_lines(fh, path, "trace file", MAX_BATCH_BYTES), start=1):
        where = f"line {lineno}"
        if isinstance(line, Overlong):
            yield where, _over("line", line.size)
            continue
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except (ValueError, RecursionError) as exc:
            yield where, f"not JSON: {exc}"
            continue
        yield where, list(_spans(request)) if isinstance(request, dict) else "not an OTLP JSON object"


def _proto_value(v: Any) -> Any:
    """A protobuf ``AnyValue`` as Python."""
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_proto_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in v.kvlist_value.values}
    return None if kind is None else getattr(v, kind)


def _proto_spans(request: Any) -> Iterator[Span | SpanError]:
    """The spans of a decoded ``ExportTraceServiceRequest``, read from the message itself."""
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for s in scope.spans:
                trace_id = s.trace_id.hex() if len(s.trace_id) == 16 else None
                if trace_id is None or len(s.span_id) != 8 or len(s.parent_span_id) not in (0, 8):
                    yield SpanError(f"span {s.span_id.hex()[:40]!r}: its trace, span or parent span id is not "
                                    "16, 8 or 8 bytes", trace_id)  # fmt: skip
                    continue
                events = [(e.name, {kv.key: _proto_value(kv.value) for kv in e.attributes}) for e in s.events]
                yield Span(trace_id, s.span_id.hex(), s.parent_span_id.hex() or None, s.name, s.start_time_unix_nano,
                           {kv.key: _proto_value(kv.value) for kv in s.attributes}, events)  # fmt: skip


def _proto_messages(fh: IO[bytes], path: Path) -> Iterator[tuple[str, list[Span | SpanError] | str]]:
    """``format: proto``: each message's spans, or what is wrong with the message; a message
    over the bound is skipped unread."""
    try:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:
        raise MissingDependencyError(
            f"{path} holds OTLP protobuf, which is decoded by the opentelemetry-proto package: "
            "pip install 'localjury[traces]'"
        ) from None
    size_of_file = os.fstat(fh.fileno()).st_size
    number = 0
    try:
        while head := fh.read(4):
            number += 1
            where = f"message {number}"
            size = int.from_bytes(head, "big")
            if len(head) < 4 or fh.tell() + size > size_of_file:
                yield where, "the file ends inside it (cut short, or not OTLP protobuf as the file exporter writes it)"
                return
            if size > MAX_BATCH_BYTES:
                fh.seek(size, os.SEEK_CUR)
                yield where, _over("message", size)
                continue
            try:
                request = ExportTraceServiceRequest.FromString(fh.read(size))
            except DecodeError as exc:
                yield where, f"not an OTLP trace request: {exc}"
                continue
            yield where, list(_proto_spans(request))
    except OSError as exc:
        raise ConfigError(f"cannot read trace file {path}: {exc.strerror or exc}") from exc


def _batches(path: Path) -> Iterator[tuple[str, list[Span | SpanError] | str]]:
    """Each export request's spans and where it is (``line 3``, ``message 3``), or what is
    wrong with it. JSON when the file starts with ``{``; protobuf when its fifth byte starts a
    request's resource spans (field 1, length-delimited: ``0x0a``) after the 4-byte size.

    Raises:
        ConfigError: The file is neither, or cannot be read.
    """
    with open_regular_file(path, "trace file", _HINT) as fh:
        try:
            head = fh.read(4096)
            fh.seek(0)
        except OSError as exc:
            raise ConfigError(f"cannot read trace file {path}: {exc.strerror or exc}") from exc
        text = head.removeprefix(codecs.BOM_UTF8).lstrip()
        if not text or text.startswith(b"{"):
            yield from _json_lines(fh, path)
        elif len(head) > 4 and head[4] == 0x0A:
            yield from _proto_messages(fh, path)
        else:
            raise ConfigError(f"{path} is neither OTLP JSON nor OTLP protobuf; {_HINT}")


def iter_trace_records(path: str | Path, reading: TraceReading | None = None) -> Iterator[Record | RecordError]:
    """The records of an OTLP file, JSON or protobuf (:mod:`localjury.records.traces`), each
    trace's or in its place the error that rejects it; a request that cannot be read is an error
    of its own.

    Raises:
        MissingDependencyError: A protobuf file, without the ``opentelemetry-proto`` package.
    """
    path = Path(path)
    traces = spans_by_trace(lambda: _batches(path), path.name)
    yield from records_of(traces, reading or TraceReading(), path.name, view_of)
