"""MLflow traces read from their JSON: ``Trace.to_json()`` (one trace, a ``.json`` file), a
JSON list of ``Trace.to_dict()``, or one a JSONL line. A trace is ``{"info": {"trace_id": ...},
"data": {"spans": [...]}}``; each span has base64 ``trace_id``/``span_id``/``parent_span_id``,
``start_time_unix_nano``, ``events`` and the ``attributes`` MLflow writes (``mlflow.spanType``,
``mlflow.spanInputs``, ``mlflow.spanOutputs``: read by :mod:`.conventions`, as they are in an
MLflow trace exported over OTLP). A record's trace id is MLflow's (``tr-...``), which MLflow's
``log_feedback`` takes back; span ids are hex, as MLflow shows them."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localjury.errors import RecordError
from localjury.records.record import Record
from localjury.records.traces.conventions import view_of
from localjury.records.traces.files import json_traces
from localjury.records.traces.spans import Span, TraceReading, records_of

#: The largest trace read (a ``.json`` file's trace, a list's item or a JSONL line).
MAX_TRACE_BYTES = 1 << 28
_HINT = "give MLflow traces as JSON: Trace.to_json() of one, a JSON list of Trace.to_dict(), or one a line"


def _hex(raw: Any, what: str) -> str:
    """A base64 id (as ``Span.to_dict`` writes them) as hex; a hex id as it is."""
    text = str(raw)
    if all(c in "0123456789abcdefABCDEF" for c in text) and len(text) in (16, 32):
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        raise ValueError(f"{what} {text[:60]!r} is neither hex nor base64") from None


def _spans(trace: dict[str, Any]) -> tuple[str, list[Span]]:
    """A trace's id (MLflow's) and its spans."""
    info, data = trace.get("info"), trace.get("data")
    if not isinstance(info, dict) or not isinstance(data, dict):
        raise ValueError(f"an MLflow trace has 'info' and 'data'; this object has {sorted(trace)[:5]}")
    trace_id = str(info.get("trace_id") or info.get("request_id") or "")
    spans = []
    for s in data.get("spans") or []:
        parent = s.get("parent_span_id") or s.get("parent_id")
        attributes = dict(s.get("attributes") or {})
        events = [(str(e.get("name", "")), e.get("attributes") or {}) for e in s.get("events") or []]
        spans.append(Span(trace_id or _hex(s["trace_id"], "trace_id"), _hex(s["span_id"], "span_id"),
                          _hex(parent, "parent_span_id") if parent else None, str(s.get("name") or ""),
                          int(s.get("start_time_unix_nano") or 0), attributes, events))  # fmt: skip
    if not trace_id and not spans:
        raise ValueError("a trace with neither info.trace_id nor spans")
    return trace_id or spans[0].trace_id, spans


def iter_mlflow_records(path: str | Path, reading: TraceReading | None = None) -> Iterator[Record | RecordError]:
    """The records of an MLflow trace file (see the module's docstring), each trace's or in its
    place the error that rejects it."""
    path = Path(path)
    traces = json_traces(path, "MLflow trace file", _HINT, MAX_TRACE_BYTES, _spans)
    yield from records_of(traces, reading or TraceReading(), path.name, view_of)
