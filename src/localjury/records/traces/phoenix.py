"""A Phoenix export read as traces: the spans Phoenix's client returns, saved to a file.

- ``client.spans.get_spans(...)`` written as JSON (a list, or one span a JSONL line): each span
  ``context`` (``trace_id``, ``span_id``), ``parent_id``, ``span_kind``, ``start_time`` and its
  ``attributes`` flat (``llm.input_messages.0.message.role``);
- ``client.spans.get_spans_dataframe(...)`` written with ``to_parquet`` (or ``to_json(orient=
  "records", lines=True)``): columns ``context.trace_id``, ``context.span_id``, ``parent_id``,
  ``span_kind``, ``start_time`` and ``attributes.<name>``, whose values may be nested (a list of
  messages, each ``{"message.role": ..., "message.content": ...}``).

Phoenix stores OpenInference attributes, so a span is read by the OpenInference convention
(:mod:`.conventions`) once its attributes are flat again and its kind is back among them.
Spans of one trace may be anywhere in the file: it is read twice (:func:`.spans.spans_by_trace`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localjury.errors import ConfigError, RecordError
from localjury.records.record import Record
from localjury.records.traces.conventions import view_of
from localjury.records.traces.files import json_objects
from localjury.records.traces.spans import Span, SpanError, TraceReading, nanoseconds, records_of, spans_by_trace

#: The largest span read (a JSON item or line; a Parquet batch is :data:`ROWS` rows).
MAX_SPAN_BYTES = 1 << 28
#: Rows of a Parquet file read at a time.
ROWS = 1024
_HINT = "give the spans Phoenix's client returns, saved as JSON, JSON lines or Parquet"


def flat(prefix: str, value: Any, out: dict[str, Any]) -> dict[str, Any]:
    """``value``'s leaves under dotted names (``llm.input_messages.0.message.role``), into ``out``:
    mappings and lists of mappings are opened, lists of plain values kept, None left out."""
    if isinstance(value, dict):
        for key, item in value.items():
            flat(f"{prefix}.{key}" if prefix else str(key), item, out)
    elif isinstance(value, list) and any(isinstance(item, dict) for item in value):
        for index, item in enumerate(value):
            flat(f"{prefix}.{index}", item, out)
    elif value is not None:
        out[prefix] = value
    return out


def _span(row: dict[str, Any]) -> Span | SpanError:
    """One span (a ``get_spans`` item or a dataframe row)."""
    context = row["context"] if isinstance(row.get("context"), dict) else {}
    trace_id = row.get("context.trace_id") or context.get("trace_id")
    span_id = row.get("context.span_id") or context.get("span_id")
    if not trace_id or not span_id:
        return SpanError("a span without context.trace_id and context.span_id", str(trace_id) if trace_id else None)
    try:
        attributes = flat("", row.get("attributes") or {}, {})
        for key, value in row.items():
            if key.startswith("attributes."):
                flat(key.removeprefix("attributes."), value, attributes)
        if row.get("span_kind"):
            attributes.setdefault("openinference.span.kind", str(row["span_kind"]))
        events = [(str(e.get("name", "")), flat("", e.get("attributes") or {}, {})) for e in row.get("events") or []]
    except (AttributeError, TypeError) as exc:
        return SpanError(f"span {str(span_id)[:40]!r}: {exc}", str(trace_id))
    parent = row.get("parent_id")
    return Span(str(trace_id), str(span_id), str(parent) if parent else None, str(row.get("name") or ""),
                nanoseconds(row.get("start_time")), attributes, events)  # fmt: skip


def _parquet_batches(path: Path) -> Iterator[tuple[str, list[Span | SpanError] | str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        first = 1
        for batch in pq.ParquetFile(path).iter_batches(batch_size=ROWS):
            rows = batch.to_pylist()
            yield f"rows {first}-{first + len(rows) - 1}", [_span(row) for row in rows]
            first += len(rows)
    except (OSError, pa.ArrowException) as exc:
        raise ConfigError(f"cannot read Phoenix export {path} as Parquet: {exc}") from exc


def _json_batches(path: Path) -> Iterator[tuple[str, list[Span | SpanError] | str]]:
    for where, row in json_objects(path, "Phoenix export", _HINT, MAX_SPAN_BYTES):
        yield where, row if isinstance(row, str) else [_span(row)]


def iter_phoenix_records(path: str | Path, reading: TraceReading | None = None) -> Iterator[Record | RecordError]:
    """The records of a Phoenix export (see the module's docstring), each trace's or in its
    place the error that rejects it; a span that cannot be read is its trace's error.

    Raises:
        ConfigError: The file cannot be read (a Parquet file that is not one, a ``.json`` file
            that is not one list).
    """
    path = Path(path)
    parquet = path.suffix.lower() in (".parquet", ".pq")
    traces = spans_by_trace(lambda: _parquet_batches(path) if parquet else _json_batches(path), path.name)
    yield from records_of(traces, reading or TraceReading(), path.name, view_of)
