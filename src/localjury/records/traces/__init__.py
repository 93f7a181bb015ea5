"""Agent traces as records, read from files (nothing is fetched):

- **OTLP** (:mod:`.otlp`), JSON or protobuf, as the OpenTelemetry Collector's file exporter
  writes it, its spans following OpenInference, the GenAI conventions or MLflow's attributes
  (:mod:`.conventions`);
- **a Phoenix export** (:mod:`.phoenix`): the spans Phoenix's client returns, as JSON or Parquet;
- **a Langfuse export** (:mod:`.langfuse`): traces with their observations, as Langfuse's public
  API returns them;
- **MLflow traces** (:mod:`.mlflow`): ``Trace.to_json()``, one or a list.

Each trace becomes one conversation record or, with ``TraceReading(per="llm-span")``, one record
per LLM span (:mod:`.spans`). A trace's conversation is its last LLM span's input messages and
output message (an instrumented client sends the whole history, tool calls and tool results
included), or the turns the spans of chosen kinds make (``TraceReading(turns=...)``); its
retriever spans' documents are the record's contexts. A trace with no LLM messages is read from
its root span: its input the question, its output the answer. The record's id is ``<trace
id>/<span id>``, the span judged (the root span for a trace, the LLM span per LLM span):
:mod:`localjury.results.annotations` turns the results back into the annotations Phoenix,
Langfuse and MLflow import.

A trace that cannot become a record (a cycle, a missing parent, no answer, no span of a known
convention) is its own error; the others are read.
"""

from collections.abc import Callable, Iterator
from pathlib import Path

from localjury.errors import RecordError
from localjury.records.record import Record
from localjury.records.traces.langfuse import iter_langfuse_records
from localjury.records.traces.mlflow import iter_mlflow_records
from localjury.records.traces.otlp import iter_trace_records
from localjury.records.traces.phoenix import iter_phoenix_records
from localjury.records.traces.spans import TraceReading

#: Each source's reader, by the name ``localjury traces show --from`` takes.
READERS: dict[str, Callable[[str | Path, TraceReading | None], Iterator[Record | RecordError]]] = {
    "otlp": iter_trace_records,
    "phoenix": iter_phoenix_records,
    "langfuse": iter_langfuse_records,
    "mlflow": iter_mlflow_records,
}

__all__ = [
    "READERS",
    "TraceReading",
    "iter_langfuse_records",
    "iter_mlflow_records",
    "iter_phoenix_records",
    "iter_trace_records",
]
