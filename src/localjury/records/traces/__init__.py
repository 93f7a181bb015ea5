"""Agent traces as records, read from files (nothing is fetched):

- **OTLP JSON** (:mod:`.otlp`), as the OpenTelemetry Collector's file exporter writes it, its
  spans following OpenInference or the GenAI conventions (:mod:`.conventions`);
- **a Langfuse export** (:mod:`.langfuse`): traces with their observations, as Langfuse's public
  API returns them.

Each trace becomes one conversation record or, with ``TraceReading(per="llm-span")``, one record
per LLM span (:mod:`.spans`). A trace's conversation is its last LLM span's input messages and
output message (an instrumented client sends the whole history, tool calls and tool results
included); its retriever spans' documents are the record's contexts. A trace with no LLM
messages is read from its root span: its input the question, its output the answer. The
record's id is ``<trace id>/<span id>``, the span judged (the root span for a trace, the LLM span
per LLM span): :mod:`localjury.results.annotations` turns the results back into the
annotations Phoenix, Langfuse and MLflow import.

A trace that cannot become a record (a cycle, a missing parent, no answer, no span of a known
convention) is its own error; the others are read.
"""

from localjury.records.traces.langfuse import iter_langfuse_records
from localjury.records.traces.otlp import iter_trace_records
from localjury.records.traces.spans import TraceReading

__all__ = ["TraceReading", "iter_langfuse_records", "iter_trace_records"]
