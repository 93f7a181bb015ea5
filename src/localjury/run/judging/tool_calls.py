"""Tool-call accuracy: computed from the record, no model asked (see :class:`ToolCallJudging`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from localjury.engines.base import Completion
from localjury.metrics.tool_calls import ToolCallAccuracy
from localjury.records.record import Record
from localjury.results.report import ModelJudgment, RecordResult, ToolCallResult
from localjury.run.config import OverflowPolicy
from localjury.run.judging.base import JudgingBase
from localjury.run.state import JuryModel, Request
from localjury.store import Stored


@dataclass(frozen=True)
class ToolCallJudging(JudgingBase):
    """A :class:`~localjury.metrics.tool_calls.ToolCallAccuracy`: no request to any model
    (:meth:`judged` is False, so no model is loaded for it and no sample is stored); the
    record's result is the exact match of its calls, its score their F1. A record lacking
    the reference calls or the conversation is its error, found before any model loads."""

    kind: ClassVar[str] = "tool_calls"
    extracts: ClassVar[bool] = False
    metric: ToolCallAccuracy

    def first_step(self, record: Record, first: JuryModel) -> Request | None:
        self.metric.match(record)  # raises the record's error
        return None

    def read_first_step(self, record: Record, stored: Stored | None, by: str, lost: str | None) -> Any:
        return None

    def judged(self, context: Any) -> bool:
        return False

    def requests(self, model: JuryModel, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        return []

    def unanimous(self, record: Record, context: Any, samples: list[Completion]) -> bool:
        return True

    def judge(
        self, name: str, record: Record, context: Any, samples: list[list[Completion]]
    ) -> tuple[ModelJudgment, Any]:
        raise AssertionError("a tool-call accuracy asks no model")

    def unjudged(self, name: str, error: str) -> ModelJudgment:
        return ModelJudgment(model=name, votes=[], reasons=[], abstentions=0, verdict=None, score=None, error=error)

    def result(
        self, record: Record, context: Any, judged: list[tuple[ModelJudgment, Any]], extracted_by: str | None
    ) -> RecordResult:
        match = self.metric.match(record)
        return RecordResult(
            record_id=record.id,
            metric=self.metric.name,
            score=match.f1,
            error=None,
            models=[],
            tool_calls=ToolCallResult(
                ordered=self.metric.ordered,
                reference=match.reference,
                made=match.made,
                matched=match.matched,
                precision=match.precision,
                recall=match.recall,
                missing=match.missing,
                unexpected=match.unexpected,
            ),
        )
