"""Composite metrics: the extractor breaks each record into statements, every model verifies
them (see :class:`StatementsJudging`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from localjury.engines.base import Completion
from localjury.metrics.composite import EXTRACTION_TOKENS, TOKENS_PER_STATEMENT, CompositeMetric
from localjury.records.record import Record
from localjury.results.report import InvalidSample, ModelJudgment, RecordResult, StatementJudgment, StatementResult
from localjury.run.config import OverflowPolicy
from localjury.run.fit import fit_prompt
from localjury.run.judging.base import JudgingBase
from localjury.run.state import JuryModel, Request
from localjury.store import Stored
from localjury.votes.voting import final_score, model_score, model_verdict, share_supported


@dataclass(frozen=True)
class StatementsJudging(JudgingBase):
    """A :class:`~localjury.metrics.composite.CompositeMetric`: the extractor breaks the
    record into statements (one sample, temperature 0); each model verifies all of them in
    k samples; the majority per statement and model, the share supported per model, the
    mean over the models."""

    kind: ClassVar[str] = "composite"
    extracts: ClassVar[bool] = True
    metric: CompositeMetric

    def first_step(self, record: Record, first: JuryModel) -> Request | None:
        self.metric.verify_input(record, [])  # a missing context is the record's error, before any load
        messages = self.metric.extract_messages(record, first.neutralise)
        return Request(
            (record.id, self.metric.name),
            messages,
            self.metric.extract_schema(),
            n=1,
            max_tokens=max(first.max_tokens, EXTRACTION_TOKENS),
            temperature=0.0,
        )

    def read_first_step(self, record: Record, stored: Stored | None, by: str, lost: str | None) -> Any:
        if stored is None:
            return f"no statement extraction by {by!r}" + (f": {lost}" if lost else " in the judgment store")
        if isinstance(stored, str):
            return f"statement extraction by {by!r} failed: {stored}"
        (sample,) = stored
        statements, problem = self.metric.parse_statements(sample.text, finished=sample.finished)
        if statements is None:
            return f"statement extraction by {by!r} abstained: {problem}; raw: {sample.text!r}"
        return statements

    def judged(self, context: Any) -> bool:
        return bool(context)

    def requests(self, model: JuryModel, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        statements: list[str] = context
        budget = max(model.max_tokens, 64 + TOKENS_PER_STATEMENT * len(statements))
        render = partial(self.metric.verify_messages, statements=statements, neutralise=model.neutralise)
        fitted = fit_prompt(on_overflow, model, record, budget, render(record), render)
        verify, cut = fitted.messages, fitted.turns_cut
        schema = self.metric.verify_schema(record, statements)
        key = (record.id, self.metric.name)
        # Quotes only of what the prompt shows: not of what a cut to fit the context removed.
        quotes = tuple(text for _, text in self.metric.quotable(fitted.shown)) if self.metric.quote_from else None
        return [Request(key, verify, schema, self.k, budget, model.temperature, turns_cut=cut, quotes=quotes)]

    def unanimous(self, record: Record, context: Any, samples: list[Completion]) -> bool:
        parsed = [self.metric.parse_verification(c.text, record, context, finished=c.finished) for c in samples]
        if any(p.problem for p in parsed):
            return False
        return all(len({p.votes[i] for p in parsed}) == 1 for i in range(len(context)))

    def judge(
        self, name: str, record: Record, context: Any, samples: list[list[Completion]]
    ) -> tuple[ModelJudgment, Any]:
        (drawn,) = samples
        checks = [self.metric.parse_verification(c.text, record, context, finished=c.finished) for c in drawn]
        verdicts: list[int | None] = []
        per_statement: list[StatementJudgment] = []
        # A sample's verdict probabilities, one per statement in order, where it wrote them all.
        probs = [c.verdict_probs if c.verdict_probs and len(c.verdict_probs) == len(context) else None for c in drawn]
        for i in range(len(context)):
            votes = [p.votes[i] for p in checks]
            verdict = model_verdict(votes, self.tie)
            verdicts.append(verdict)
            reasons = [p.reasons[i] for p in checks]
            p_pass = [ps[i] if ps is not None and v is not None else None for ps, v in zip(probs, votes, strict=True)]
            quoted = any(p.quotes is not None for p in checks)
            evidence = [p.quotes[i] if p.quotes is not None else None for p in checks] if quoted else None
            per_statement.append(
                StatementJudgment(
                    model=name, votes=votes, reasons=reasons, verdict=verdict, p_pass=p_pass, evidence=evidence
                )
            )
        invalid = [
            InvalidSample(sample=j, problem=p.problem or "invalid", raw=p.raw)
            for j, p in enumerate(checks)
            if p.problem is not None
        ]
        judgment = ModelJudgment(
            model=name,
            votes=[],
            reasons=[],
            drawn=len(drawn),
            abstentions=len(invalid),
            verdict=None,
            score=share_supported(verdicts),
            invalid=invalid,
        )
        return judgment, per_statement

    def unjudged(self, name: str, error: str) -> ModelJudgment:
        return ModelJudgment(
            model=name, votes=[], reasons=[], abstentions=self.k, verdict=None, score=None, error=error
        )

    def result(
        self, record: Record, context: Any, judged: list[tuple[ModelJudgment, Any]], extracted_by: str | None
    ) -> RecordResult:
        statements: list[str] = context
        by_statement = [[d[i] for _, d in judged if d is not None] for i in range(len(statements))]
        return RecordResult(
            record_id=record.id,
            metric=self.metric.name,
            score=final_score([j.score for j, _ in judged]),
            error=None,
            models=[j for j, _ in judged],
            statements=[
                StatementResult(statement=text, score=final_score([model_score(j.verdict) for j in js]), models=js)
                for text, js in zip(statements, by_statement, strict=True)
            ],
            extracted_by=extracted_by,
        )
