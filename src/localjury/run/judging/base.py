"""One judging protocol per kind of metric: what a run asks the models and how it reads them.

The run stages (:mod:`~localjury.run.plan`, :mod:`~localjury.run.generate`,
:mod:`~localjury.run.assemble`) only call a :class:`Judging`; they never look at a metric's
class. A new kind of metric is one new implementation (here, or in a module of its own like
:mod:`~localjury.run.judging.pairwise` and :mod:`~localjury.run.judging.statements`), registered in
:data:`localjury.run.judging.kinds.KINDS` under the metric's ``kind``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Protocol

from localjury.engines.base import Completion
from localjury.metrics.base import JudgeMetric, Metric, ParsedSample
from localjury.records.record import Record
from localjury.results.report import InvalidSample, ModelJudgment, RecordResult
from localjury.run.config import OverflowPolicy
from localjury.run.fit import fit_prompt
from localjury.run.state import JuryModel, Request
from localjury.store import Stored
from localjury.votes.calibration import Calibrator
from localjury.votes.voting import (
    Scoring,
    TieBreak,
    confidence,
    final_score,
    model_score,
    model_verdict,
    probability_verdict,
    vote_share,
)


class Judging(Protocol):
    """How one metric is judged: its requests, when its samples are unanimous, and how a
    model's samples become that model's judgment and the models' judgments a result.

    ``context`` is what a metric's first step gave for a record (a composite's statements),
    None for a metric judged in one step.
    """

    kind: ClassVar[str]
    """The ``kind`` of the metrics it judges; also the metric's kind in summaries and manifests."""
    extracts: ClassVar[bool]
    """Its first step is the extractor's (its results name the extractor)."""

    @property
    def metric(self) -> Metric:
        """The metric judged."""
        ...

    @property
    def k(self) -> int:
        """Samples per model (strictness)."""
        ...

    @property
    def tie(self) -> TieBreak:
        """What an even split of valid votes gives."""
        ...

    def first_step(self, record: Record, first: JuryModel) -> Request | None:
        """The request that comes before the models judge (a statement extraction by ``first``,
        the extractor), or None. Raises the record's ``RecordError`` when it cannot be judged."""
        ...

    def read_first_step(self, record: Record, stored: Stored | None, by: str, lost: str | None) -> Any:
        """The context from the first step's stored generation by model ``by``, or an error string."""
        ...

    def judged(self, context: Any) -> bool:
        """Whether the models have anything to judge for this context."""
        ...

    def requests(self, model: JuryModel, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        """``model``'s requests of k samples each for the record: one per prompt it is asked
        (one; a pairwise metric's two orders), each with its own ``key``."""
        ...

    def unanimous(self, record: Record, context: Any, samples: list[Completion]) -> bool:
        """Whether these first samples of one prompt already decide its majority (adaptive strictness)."""
        ...

    def judge(
        self, name: str, record: Record, context: Any, samples: list[list[Completion]]
    ) -> tuple[ModelJudgment, Any]:
        """Model ``name``'s judgment from its samples (each prompt's, in the order of
        :meth:`requests`), and what :meth:`result` needs beside it."""
        ...

    def unjudged(self, name: str, error: str) -> ModelJudgment:
        """Model ``name``'s judgment when it has no samples for the record."""
        ...

    def result(
        self, record: Record, context: Any, judged: list[tuple[ModelJudgment, Any]], extracted_by: str | None
    ) -> RecordResult:
        """The record's result from each model's judgment (and its detail; None for an unjudged one)."""
        ...


@dataclass(frozen=True)
class JudgingBase:
    """What every judging is built with (:func:`localjury.run.judging.kinds.judging_for`)."""

    metric: Any
    k: int
    """Samples per model (strictness)."""
    tie: TieBreak
    """What an even split of valid votes gives."""
    scoring: Scoring = "votes"
    """How a model's samples become its score: by votes, or by its mean verdict probability."""
    threshold: float = 0.5
    """The confidence above which a model passes under probability scoring."""
    calibrators: Mapping[str, Calibrator] = field(default_factory=dict)
    """Each calibrated model's fit for this metric, by model name."""


class OneVerdictJudging(JudgingBase):
    """What a judging of one yes/no verdict per sample shares: all k samples abstain where a
    model could not judge, and the record's score is the mean of the models' scores."""

    def unjudged(self, name: str, error: str) -> ModelJudgment:
        k = self.k
        return ModelJudgment(
            model=name, votes=[None] * k, reasons=[None] * k, abstentions=k, verdict=None, score=None, error=error
        )

    def result(
        self, record: Record, context: Any, judged: list[tuple[ModelJudgment, Any]], extracted_by: str | None
    ) -> RecordResult:
        models = [j for j, _ in judged]
        return RecordResult(
            record_id=record.id,
            metric=self.metric.name,
            score=final_score([j.score for j in models]),
            error=None,
            confidence=final_score([j.confidence for j in models]),
            models=models,
            statements=None,
            extracted_by=extracted_by,
        )


@dataclass(frozen=True)
class VerdictJudging(OneVerdictJudging):
    """A :class:`~localjury.metrics.base.JudgeMetric` (the Aspect Critic): one prompt, one
    verdict per sample, the majority per model, the mean over the models."""

    kind: ClassVar[str] = "judge"
    extracts: ClassVar[bool] = False
    metric: JudgeMetric

    def first_step(self, record: Record, first: JuryModel) -> Request | None:
        self.metric.messages(record, first.neutralise)  # raises the record's error
        return None

    def read_first_step(self, record: Record, stored: Stored | None, by: str, lost: str | None) -> Any:
        return None

    def judged(self, context: Any) -> bool:
        return True

    def requests(self, model: JuryModel, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        budget = model.max_tokens
        render = partial(self.metric.messages, neutralise=model.neutralise)
        fitted = fit_prompt(on_overflow, model, record, budget, render(record), render)
        messages, cut = fitted.messages, fitted.turns_cut
        schema = self.metric.json_schema()
        key = (record.id, self.metric.name)
        revision = getattr(self.metric, "revision", None)  # a rubrics file's criterion
        # Quotes only of what the prompt shows: not of what a cut to fit the context removed.
        quotes = tuple(text for _, text in self.metric.quotable(fitted.shown)) if self.metric.quote_from else None
        return [
            Request(
                key,
                messages,
                schema,
                self.k,
                budget,
                model.temperature,
                turns_cut=cut,
                revision=revision,
                quotes=quotes,
            )
        ]

    def unanimous(self, record: Record, context: Any, samples: list[Completion]) -> bool:
        votes = [self._parse(c, record).vote for c in samples]
        return None not in votes and len(set(votes)) == 1

    def _parse(self, sample: Completion, record: Record) -> ParsedSample:
        """One sample parsed; its quotes located in ``record`` where the metric asks for quotes."""
        if self.metric.quote_from:
            return self.metric.parse(sample.text, finished=sample.finished, record=record)
        return self.metric.parse(sample.text, finished=sample.finished)

    def judge(
        self, name: str, record: Record, context: Any, samples: list[list[Completion]]
    ) -> tuple[ModelJudgment, Any]:
        (drawn,) = samples
        parsed = [self._parse(c, record) for c in drawn]
        p_pass = [
            c.verdict_probs[0] if p.vote is not None and c.verdict_probs else None
            for c, p in zip(drawn, parsed, strict=True)
        ]
        return verdict_judgment(self, name, parsed, p_pass), None


def verdict_judgment(
    judging: JudgingBase, name: str, parsed: Sequence[ParsedSample], p_pass: list[float | None]
) -> ModelJudgment:
    """Model ``name``'s judgment from its parsed samples of one yes/no criterion and their
    verdict probabilities: calibrated where ``judging`` has the model's fit, by its confidence
    under probability scoring, else the majority of its valid votes (an abstention for each
    sample that did not parse)."""
    votes = [p.vote for p in parsed]
    conf = confidence(p_pass)
    cal = judging.calibrators.get(name)
    graded = None if cal is None else conf if cal.source == "p_pass" else vote_share(votes)
    score: float | None
    verdict: int | None
    if cal is not None and graded is not None:
        score = cal.calibrated(graded)
        verdict = int(score > cal.threshold)
    elif judging.scoring == "probability" and conf is not None:
        verdict, score = probability_verdict(conf, judging.threshold), conf
    else:
        verdict = model_verdict(votes, judging.tie)
        score = model_score(verdict)
    invalid = [
        InvalidSample(sample=j, problem=p.problem or "invalid", raw=p.raw)
        for j, p in enumerate(parsed)
        if p.vote is None
    ]
    judgment = ModelJudgment(
        model=name,
        votes=votes,
        reasons=[p.reason for p in parsed],
        drawn=len(parsed),
        abstentions=len(invalid),
        verdict=verdict,
        score=score,
        p_pass=p_pass,
        confidence=conf,
        calibrated=cal is not None and graded is not None,
        invalid=invalid,
        evidence=[p.quotes for p in parsed] if any(p.quotes is not None for p in parsed) else None,
    )
    return judgment
