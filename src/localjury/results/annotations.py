"""A run's judgments of traces as the annotations the tracing tools import, one JSON object a
line: Phoenix span annotations, Langfuse scores, MLflow feedback. Nothing is sent anywhere; the
manual (docs/traces.md) shows the few lines of each tool's own client that load the file.

A result's record id is ``<trace id>/<span id>`` (:mod:`localjury.records.traces`; ``<trace
id>/trace`` for a whole trace of a Langfuse export, which Phoenix cannot take); its score,
pass or fail, and the reasons of the votes that decided it become the annotation's value, label
and explanation. A result without a score (an error, every vote an abstention) is left out and
counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from localjury._writes import open_atomic
from localjury.errors import ConfigError
from localjury.results.record_result import RecordResult
from localjury.votes.voting import passes

Tool = Literal["phoenix", "langfuse", "mlflow"]
TOOLS: tuple[Tool, ...] = ("phoenix", "langfuse", "mlflow")
_TRACE_SPAN = re.compile(r"(.+)/([^/]+)")
_OTEL_TRACE = re.compile(r"[0-9a-f]{32}")
#: The span part of a record id that stands for a whole trace (a Langfuse export's).
TRACE_LEVEL = "trace"


@dataclass
class Written:
    """What :func:`write_annotations` wrote and left out."""

    annotations: int
    unscored: list[str]
    """Record ids of results without a score (errors, abstentions): no annotation."""


def explanation(result: RecordResult) -> str:
    """The reasons behind the result: per model, the first reason of a sample that voted as the
    model decided ("model: reason" lines, one a model)."""
    lines = []
    for m in result.models:
        reason = next(
            (r for v, r in zip(m.votes, m.reasons, strict=False) if v is not None and v == m.verdict and r), None
        )
        if reason:
            lines.append(f"{m.model}: {reason}" if len(result.models) > 1 else reason)
    return "\n".join(lines)


def annotation(result: RecordResult, tool: Tool) -> dict[str, Any]:
    """One result as ``tool``'s annotation (its client's field names).

    Raises:
        ConfigError: The record id is not ``<trace id>/<span id>`` (the record did not come from a trace).
    """
    match = _TRACE_SPAN.fullmatch(result.record_id)
    if match is None:
        raise ConfigError(
            f"record {result.record_id!r}: its id is not '<trace id>/<span id>': "
            "annotations are written for records read from traces"
        )
    trace_id, span = match.groups()
    span_id = None if span == TRACE_LEVEL else span
    if tool == "phoenix" and span_id is None:
        raise ConfigError(f"record {result.record_id!r}: Phoenix annotates spans, and this record is a whole trace")
    score = result.score
    verdict = passes(score, result.rubric.threshold if result.rubric else None)
    label = None if verdict is None else "pass" if verdict else "fail"
    why = explanation(result)
    judges = ", ".join(m.model for m in result.models)
    if tool == "phoenix":
        # phoenix.client.Client().spans.log_span_annotations_dataframe(dataframe=...)
        return {"span_id": span_id, "annotation_name": result.metric, "annotator_kind": "LLM",
                "label": label, "score": score, "explanation": why, "metadata": {"judges": judges}}  # fmt: skip
    if tool == "langfuse":
        # Langfuse().create_score(**row)
        return {"trace_id": trace_id, "observation_id": span_id, "name": result.metric, "value": score,
                "data_type": "NUMERIC", "comment": why, "metadata": {"judges": judges, "label": label}}  # fmt: skip
    # mlflow.log_feedback(trace_id=..., span_id=..., name=..., value=..., rationale=..., source=AssessmentSource(...))
    mlflow_id = f"tr-{trace_id}" if _OTEL_TRACE.fullmatch(trace_id) else trace_id
    return {"trace_id": mlflow_id, "span_id": span_id, "name": result.metric, "value": score,
            "rationale": why, "source": {"source_type": "LLM_JUDGE", "source_id": judges},
            "metadata": {"label": label}}  # fmt: skip


def annotation_rows(results: Iterable[RecordResult], tool: Tool, unscored: list[str]) -> Iterator[dict[str, Any]]:
    """The annotations of the scored results; the ids of the others are appended to ``unscored``."""
    for result in results:
        if result.score is None:
            unscored.append(result.record_id)
        else:
            yield annotation(result, tool)


def write_annotations(results: Iterable[RecordResult], tool: Tool, out: Path) -> Written:
    """Write ``tool``'s annotations of ``results`` to ``out`` (JSON lines), replacing it whole
    only once every line is written."""
    if tool not in TOOLS:
        raise ConfigError(f"unknown tool {tool!r}; expected one of: {', '.join(TOOLS)}")
    unscored: list[str] = []
    count = 0
    with open_atomic(out) as fh:
        for row in annotation_rows(results, tool, unscored):
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return Written(count, unscored)
