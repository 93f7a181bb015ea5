"""Pairwise judging: each model compares two responses in both orders (see :class:`PairwiseJudging`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from localjury.engines.base import Completion
from localjury.metrics.pairwise import ORDERS, PairwiseCritic, corrected
from localjury.records.record import Record
from localjury.results.report import InvalidSample, ModelJudgment, RecordResult
from localjury.run.config import OverflowPolicy
from localjury.run.fit import fit
from localjury.run.judging.base import VerdictJudging
from localjury.run.state import JuryModel, Request
from localjury.votes.voting import (
    confidence,
    final_score,
    model_score,
    model_verdict,
    position_consistency,
    probability_verdict,
)


@dataclass(frozen=True)
class PairwiseJudging(VerdictJudging):
    """A :class:`~localjury.metrics.pairwise.PairwiseCritic`: two requests per model and
    record (order AB and order BA, k samples each). A model's preference is the majority of
    its 2k order-corrected valid votes (1: response_a), an even split per ``tie``; its score
    1.0 for response_a, 0.0 for response_b; the record's score the mean over the models.

    Each sample's ``p_pass`` is the probability the judge gave to preferring response_a where
    it wrote its preference (the probability of "A" in order AB, of "B" in order BA), and the
    model's ``confidence`` their mean; under ``scoring="probability"`` the model's score is
    that confidence and its preference ``confidence > threshold``. ``calibrators`` are taken
    (every judging is built alike) and not used: calibration fits judge metrics only. A
    record's error, adaptive strictness (per order) and the one-step plumbing are the Aspect
    Critic's.
    """

    kind: ClassVar[str] = "pairwise"
    metric: PairwiseCritic  # type: ignore[assignment]

    def requests(self, model: JuryModel, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        budget = model.max_tokens
        schema = self.metric.json_schema()
        out = []
        for order in ORDERS:
            render = partial(self.metric.messages, order=order, neutralise=model.neutralise)
            messages = fit(on_overflow, model, record, budget, render(record), render)
            key = (record.id, f"{self.metric.name} [{order}]")
            out.append(Request(key, messages, schema, self.k, budget, model.temperature))
        return out

    def judge(
        self, name: str, record: Record, context: Any, samples: list[list[Completion]]
    ) -> tuple[ModelJudgment, Any]:
        order_votes: dict[str, list[int | None]] = {}
        votes: list[int | None] = []
        reasons: list[str | None] = []
        p_pass: list[float | None] = []
        invalid: list[InvalidSample] = []
        for order, drawn in zip(ORDERS, samples, strict=True):
            parsed = [self.metric.parse(c.text, finished=c.finished) for c in drawn]
            start = len(votes)  # sample indices count over both orders, AB's first
            invalid += [
                InvalidSample(sample=start + j, problem=p.problem or "invalid", raw=p.raw)
                for j, p in enumerate(parsed)
                if p.vote is None
            ]
            order_votes[order] = [p.vote for p in parsed]
            votes += [corrected(p.vote, order) for p in parsed]
            reasons += [p.reason for p in parsed]
            p_pass += [
                _corrected_p(c.verdict_probs[0], order) if p.vote is not None and c.verdict_probs else None
                for c, p in zip(drawn, parsed, strict=True)
            ]
        conf = confidence(p_pass)
        verdict: int | None
        score: float | None
        if self.scoring == "probability" and conf is not None:
            verdict, score = probability_verdict(conf, self.threshold), conf
        else:
            verdict = model_verdict(votes, self.tie)
            score = model_score(verdict)
        judgment = ModelJudgment(
            model=name,
            votes=votes,
            reasons=reasons,
            drawn=len(votes),
            abstentions=len(invalid),
            verdict=verdict,
            score=score,
            p_pass=p_pass,
            confidence=conf,
            invalid=invalid,
            order_votes=order_votes,
            position_consistent=position_consistency(order_votes["AB"], order_votes["BA"]),
        )
        return judgment, None

    def unjudged(self, name: str, error: str) -> ModelJudgment:
        n = 2 * self.k
        return ModelJudgment(
            model=name, votes=[None] * n, reasons=[None] * n, abstentions=n, verdict=None, score=None, error=error
        )

    def result(
        self, record: Record, context: Any, judged: list[tuple[ModelJudgment, Any]], extracted_by: str | None
    ) -> RecordResult:
        models = [j for j, _ in judged]
        known = [j.position_consistent for j in models if j.position_consistent is not None]
        return RecordResult(
            record_id=record.id,
            metric=self.metric.name,
            score=final_score([j.score for j in models]),
            error=None,
            confidence=final_score([j.confidence for j in models]),
            models=models,
            position_consistency=sum(known) / len(known) if known else None,
        )


def _corrected_p(p_first: float, order: str) -> float:
    """The probability of preferring the shown-first response (A) as the probability of
    preferring the record's response_a."""
    return p_first if order == "AB" else 1.0 - p_first
