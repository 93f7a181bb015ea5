"""Rubric judging: each model grades a response on a scale (see :class:`RubricJudging`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from localjury.engines.base import Completion
from localjury.metrics.rubric import Rubric, aggregate, expected_score, normalised
from localjury.records.record import Record
from localjury.results.report import InvalidSample, ModelJudgment, RecordResult, RubricResult
from localjury.run.config import OverflowPolicy
from localjury.run.fit import fit_counted
from localjury.run.judging.base import VerdictJudging
from localjury.run.state import JuryModel, Request
from localjury.votes.voting import confidence, final_score


@dataclass(frozen=True)
class RubricJudging(VerdictJudging):
    """A :class:`~localjury.metrics.rubric.Rubric`: one prompt, one score per sample.

    A model's scale score is the mean (or median, the rubric's ``aggregate``) of its valid
    sampled scores, or under ``scoring="probability"`` the mean of its samples' expected
    scores (where its engine gives them; else the sampled scores'); its ``score`` that
    normalised to 0..1, its verdict whether the normalised score reaches the rubric's
    threshold. Each sample's vote is whether its sampled score reaches the threshold, and its
    ``p_pass`` the probability mass of the levels that do. The record's score is the mean of the models' normalised
    scores, and its :class:`~localjury.results.report.RubricResult` the jury's mean on the scale.
    Adaptive strictness stops when the first samples agree on one score. ``calibrators`` are
    taken (every judging is built alike) and not used.
    """

    kind: ClassVar[str] = "rubric"
    metric: Rubric  # type: ignore[assignment]

    @property
    def pass_at(self) -> float:
        """The normalised score a model passes at: the rubric's threshold (the run's
        ``threshold`` is the confidence of yes/no metrics under probability scoring)."""
        return self.metric.threshold

    def requests(self, model: JuryModel, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        budget = model.max_tokens
        render = partial(self.metric.messages, neutralise=model.neutralise)
        messages, cut = fit_counted(on_overflow, model, record, budget, render(record), render)
        key = (record.id, self.metric.name)
        schema = self.metric.json_schema()
        revision = self.metric.revision
        return [Request(key, messages, schema, self.k, budget, model.temperature, turns_cut=cut, revision=revision)]

    def unanimous(self, record: Record, context: Any, samples: list[Completion]) -> bool:
        scores = [self.metric.parse(c.text, finished=c.finished).score for c in samples]
        return None not in scores and len(set(scores)) == 1

    def judge(
        self, name: str, record: Record, context: Any, samples: list[list[Completion]]
    ) -> tuple[ModelJudgment, Any]:
        (drawn,) = samples
        n = self.metric.n
        parsed = [self.metric.parse(c.text, finished=c.finished) for c in drawn]
        scores = [p.score for p in parsed]
        expected = [
            expected_score(c.verdict_probs, n) if p.score is not None else None
            for c, p in zip(drawn, parsed, strict=True)
        ]
        passing = [v for v in range(1, n + 1) if self._passes(v)]
        p_pass = [
            sum(c.verdict_probs[v - 1] for v in passing) if e is not None and c.verdict_probs else None
            for c, e in zip(drawn, expected, strict=True)
        ]
        by_probability = self.scoring == "probability" and any(e is not None for e in expected)
        scale = aggregate(expected, "mean") if by_probability else aggregate(scores, self.metric.aggregate)
        score = normalised(scale, n)
        invalid = [
            InvalidSample(sample=j, problem=p.problem or "invalid", raw=p.raw)
            for j, p in enumerate(parsed)
            if p.score is None
        ]
        judgment = ModelJudgment(
            model=name,
            votes=[None if s is None else int(self._passes(s)) for s in scores],
            reasons=[p.reason for p in parsed],
            drawn=len(drawn),
            abstentions=len(invalid),
            verdict=None if score is None else int(score >= self.pass_at),
            score=score,
            p_pass=p_pass,
            confidence=confidence(p_pass),
            invalid=invalid,
            scores=scores,
            expected=expected,
            scale_score=scale,
        )
        return judgment, None

    def _passes(self, level: float) -> bool:
        """Whether a score on the scale reaches the pass threshold."""
        return (normalised(level, self.metric.n) or 0.0) >= self.pass_at

    def unjudged(self, name: str, error: str) -> ModelJudgment:
        judgment = super().unjudged(name, error)
        return judgment.model_copy(update={"scores": [None] * self.k, "expected": [None] * self.k})

    def result(
        self, record: Record, context: Any, judged: list[tuple[ModelJudgment, Any]], extracted_by: str | None
    ) -> RecordResult:
        result = super().result(record, context, judged, extracted_by)
        models = result.models
        rubric = RubricResult(
            levels=self.metric.n,
            score=final_score([j.scale_score for j in models]),
            expected=final_score([aggregate(j.expected or [], "mean") for j in models]),
            threshold=self.pass_at,
        )
        return result.model_copy(update={"rubric": rubric})
