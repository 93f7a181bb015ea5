"""MLflow traces read from their JSON: ``Trace.to_json()`` (one trace, a ``.json`` file), a
JSON list of ``Trace.to_dict()``, or one a JSONL line. A trace is ``{"info": {"trace_id": ...},
"data": {"spans": [...]}}``; each span has base64 ``trace_id``/``span_id``/``parent_span_id``
(MLflow 2's: ``context`` and ``parent_id``, in ``0x`` hex), ``start_time_unix_nano``,
``events`` and the ``attributes`` MLflow writes (``mlflow.spanType``, ``mlflow.spanInputs``,
``mlflow.spanOutputs``: read by :mod:`.conventions`, as they are in an MLflow trace exported
over OTLP). A record's trace id is MLflow's (``tr-...``), which MLflow's
``log_feedback`` takes back; span ids are hex, as MLflow shows them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localjury.errors import RecordError
from localjury.records.record import Record
from localjury.records.traces.conventions import view_of
from localjury.records.traces.files import json_traces
from localjury.records.traces.spans import Span, TraceReading, hex_id, records_of

#: The largest trace read (a ``.json`` file's trace, a list's item or a JSONL line).
MAX_TRACE_BYTES = 1 << 28
_HINT = "give MLflow traces as JSON: Trace.to_json() of one, a JSON list of Trace.to_dict(), or one a line"


def _spans(trace: dict[str, Any]) -> tuple[str, list[Span]]:
    """A trace's id (MLflow's) and its spans."""
    info, data = trace.get("info"), trace.get("data")
    if not isinstance(info, dict) or not isinstance(data, dict):
        raise ValueError(f"an MLflow trace has 'info' and 'data'; this object has {sorted(trace)[:5]}")
    trace_id = str(info.get("trace_id") or info.get("request_id") or "")
    spans = []
    for s in data.get("spans") or []:
        ids = s.get("context") or s  # MLflow 2's spans keep their ids in a context
        parent = s.get("parent_span_id") or s.get("parent_id")
        start = s.get("start_time_unix_nano") or s.get("start_time") or 0
        events = [(str(e.get("name", "")), e.get("attributes") or {}) for e in s.get("events") or []]
        spans.append(Span(trace_id or hex_id(ids["trace_id"], 16, "trace_id"), hex_id(ids["span_id"], 8, "span_id"),
                          hex_id(parent, 8, "parent_span_id") if parent else None, str(s.get("name") or ""),
                          int(start), dict(s.get("attributes") or {}), events))  # fmt: skip
    if not trace_id and not spans:
        raise ValueError("a trace with neither info.trace_id nor spans")
    return trace_id or spans[0].trace_id, spans


def iter_mlflow_records(path: str | Path, reading: TraceReading | None = None) -> Iterator[Record | RecordError]:
    """The records of an MLflow trace file (see the module's docstring), each trace's or in its
    place the error that rejects it."""
    path = Path(path)
    traces = json_traces(path, "MLflow trace file", _HINT, MAX_TRACE_BYTES, _spans)
    yield from records_of(traces, reading or TraceReading(), path.name, view_of)
