"""How a run judges a metric: the :class:`Judging` protocol every kind of metric follows, the
:class:`BaseJudging` a kind extends, and the table of kinds, :data:`KINDS`.

A kind of metric is one module of this package: its metric (prompt program, parsing) and its
judging (its requests, how samples become a model's judgment and judgments a result),
registered in one line, ``@judges(TheMetric)`` above the judging class. A kind judged in one
step writes only what differs from :class:`BaseJudging` (its ``requests`` and ``judge``, and
``unanimous``, ``unjudged`` or ``result`` where they differ from one yes/no verdict per sample);
:mod:`~localjury.metrics.rubric` and :mod:`~localjury.metrics.tool_calls` are short examples.

The run stages (:mod:`~localjury.run.plan`, :mod:`~localjury.run.generate`,
:mod:`~localjury.run.assemble`) only call a :class:`Judging`; they never look at a metric's
class. What the run hands a judging, it sees through the shapes named here (:class:`Juror`,
:class:`JudgingSettings`), so that nothing in ``metrics/`` imports the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from localjury.errors import ConfigError
from localjury.metrics.base import Metric, ParsedSample
from localjury.models.registry import ModelSpec
from localjury.records.neutralise import Neutraliser
from localjury.records.record import Record
from localjury.results.record_result import InvalidSample, ModelJudgment, RecordResult
from localjury.types import Completion, Message, Stored
from localjury.votes.calibration import CalibrationFile, Calibrator, fits_by_metric
from localjury.votes.heads import DecisionHead
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

#: What a prompt longer than the model's context does: the record's error for that model, or
#: its conversation turns and retrieved contexts cut until it fits (:mod:`~localjury.metrics.prompt_fit`).
OverflowPolicy = Literal["error", "truncate"]
Key = tuple[str, str]
"""(record id, metric name)."""


@dataclass(frozen=True)
class Request:
    """One prompt to run with one model: n samples under a schema."""

    key: Key
    messages: list[Message]
    schema: dict[str, Any]
    n: int
    max_tokens: int
    temperature: float
    first_sample: int = 0
    turns_cut: int = 0
    """The conversation turns cut to fit the model's context (not part of the store key)."""
    revision: str | None = None
    """Where the metric comes from and its version (a rubrics file's entry): part of the store
    key, so that a new version of an entry is judged again."""
    quotes: tuple[str, ...] | None = None
    """The record's texts the output's quotes must be spans of (a metric that asks for quoted
    evidence; empty when the record has none: the quotes are then an empty list); part of the
    store key. None for a metric that asks for no quotes."""
    head: DecisionHead | None = None
    """Decide by this decision head instead of sampling (:mod:`~localjury.metrics.head_critic`;
    its hash is in ``revision``, so in the store key)."""


class Juror(Protocol):
    """A jury model as a judging asks it (the run's :class:`~localjury.run.context.JuryModel`)."""

    @property
    def spec(self) -> ModelSpec:
        """Its models.yaml entry (its name, its context length)."""
        ...

    @property
    def identity(self) -> str:
        """What its generations are keyed by: its files' hash (a decision head is bound to it)."""
        ...

    @property
    def temperature(self) -> float:
        """Its sampling temperature in this run."""
        ...

    @property
    def max_tokens(self) -> int:
        """Its output token budget per sample in this run."""
        ...

    @property
    def neutralise(self) -> Neutraliser:
        """What record text goes through before it reaches this model's prompts."""
        ...


class JudgingSettings(Protocol):
    """The run's settings a judging is built with (the run's :class:`~localjury.run.config.SamplingConfig`)."""

    @property
    def strictness(self) -> int | None: ...

    @property
    def tie_break(self) -> TieBreak | None: ...

    @property
    def scoring(self) -> Scoring: ...

    @property
    def threshold(self) -> float: ...

    @property
    def calibration(self) -> CalibrationFile | None: ...

    @property
    def with_reasons(self) -> bool: ...


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

    def first_step(self, record: Record, first: Juror) -> Request | None:
        """The request that comes before the models judge (a statement extraction by ``first``,
        the extractor), or None. Raises the record's ``RecordError`` when it cannot be judged."""
        ...

    def read_first_step(self, record: Record, stored: Stored | None, by: str, lost: str | None) -> Any:
        """The context from the first step's stored generation by model ``by``, or an error string."""
        ...

    def judged(self, context: Any) -> bool:
        """Whether the models have anything to judge for this context."""
        ...

    def requests(self, model: Juror, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
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
class BaseJudging:
    """What every judging is built with (:func:`judging_for`), and the defaults of a metric
    judged in one step, one yes/no verdict per sample: the record's error is whatever rendering
    the metric's prompt raises, every record is judged, all k samples abstain where a model
    could not judge, and the record's score is the mean of the models' scores. A kind writes
    :meth:`requests` and :meth:`judge`, and whatever else of the :class:`Judging` differs."""

    kind: ClassVar[str] = ""
    """The ``kind`` of the metrics it judges (set by :func:`judges`)."""
    extracts: ClassVar[bool] = False
    """Its first step is the extractor's (its results name the extractor)."""
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
    with_reasons: bool = False
    """A model decided by a decision head also draws its usual samples, reported beside the head's decision."""

    def first_step(self, record: Record, first: Juror) -> Request | None:
        """None: the models judge the record in one step. The metric's prompt is rendered once
        (``metric.messages``), so that a record it cannot judge is its error before any model loads."""
        self.metric.messages(record, first.neutralise)  # raises the record's error
        return None

    def read_first_step(self, record: Record, stored: Stored | None, by: str, lost: str | None) -> Any:
        return None

    def judged(self, context: Any) -> bool:
        return True

    def requests(self, model: Juror, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        raise NotImplementedError(f"{type(self).__name__} asks the models nothing")

    def unanimous(self, record: Record, context: Any, samples: list[Completion]) -> bool:
        """False: under adaptive strictness every sample is drawn."""
        return False

    def judge(
        self, name: str, record: Record, context: Any, samples: list[list[Completion]]
    ) -> tuple[ModelJudgment, Any]:
        raise NotImplementedError(f"{type(self).__name__} reads no samples")

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

    def verdict_judgment(self, name: str, parsed: Sequence[ParsedSample], p_pass: list[float | None]) -> ModelJudgment:
        """Model ``name``'s judgment from its parsed samples of one yes/no criterion and their
        verdict probabilities: calibrated where the model has a fit, by its confidence under
        probability scoring, else the majority of its valid votes (an abstention for each
        sample that did not parse)."""
        votes = [p.vote for p in parsed]
        conf = confidence(p_pass)
        cal = self.calibrators.get(name)
        graded = None if cal is None else conf if cal.source == "p_pass" else vote_share(votes)
        score: float | None
        verdict: int | None
        if cal is not None and graded is not None:
            score = cal.calibrated(graded)
            verdict = int(score > cal.threshold)
        elif self.scoring == "probability" and conf is not None:
            verdict, score = probability_verdict(conf, self.threshold), conf
        else:
            verdict = model_verdict(votes, self.tie)
            score = model_score(verdict)
        return ModelJudgment(
            model=name,
            votes=votes,
            reasons=[p.reason for p in parsed],
            drawn=len(parsed),
            abstentions=sum(p.vote is None for p in parsed),
            verdict=verdict,
            score=score,
            p_pass=p_pass,
            confidence=conf,
            calibrated=cal is not None and graded is not None,
            invalid=invalid_samples(parsed, [p.vote is None for p in parsed]),
            evidence=[p.quotes for p in parsed] if any(p.quotes is not None for p in parsed) else None,
        )


def agree(values: Sequence[object]) -> bool:
    """Whether every value is known (no abstention) and all are the same: first samples that
    already decide their majority (adaptive strictness)."""
    return None not in values and len(set(values)) == 1


def invalid_samples(parsed: Sequence[Any], abstained: Sequence[bool], start: int = 0) -> list[InvalidSample]:
    """The parsed samples that abstained, each with its problem and raw text; their indices
    counted from ``start``."""
    return [
        InvalidSample(sample=start + j, problem=p.problem or "invalid", raw=p.raw)
        for j, (p, out) in enumerate(zip(parsed, abstained, strict=True))
        if out
    ]


J = TypeVar("J", bound=BaseJudging)

#: The judging of each kind of metric, by the metric's ``kind`` (filled by :func:`judges`).
KINDS: dict[str, type[BaseJudging]] = {}
#: The metric class each kind was registered for, by kind (named in :func:`judging_for`'s error).
_REGISTERED: dict[str, str] = {}


def judges(metric: type[Metric]) -> Callable[[type[J]], type[J]]:
    """Register the decorated judging as the one of ``metric``'s kind (its ``kind``), for
    every metric of that kind.

    Raises:
        TypeError: ``metric`` has no ``kind``, or another judging has it already.
    """
    kind = metric.kind
    if not kind:
        raise TypeError(f"{metric.__name__} has no `kind` to be judged as")

    def register(judging: type[J]) -> type[J]:
        held = KINDS.get(kind)
        if held is not None and held.__qualname__ != judging.__qualname__:
            raise TypeError(f"kind {kind!r} is judged by {held.__qualname__} already")
        judging.kind = kind
        KINDS[kind] = judging
        _REGISTERED[kind] = metric.__name__
        return judging

    return register


def judging_for(metric: Metric, sampling: JudgingSettings) -> Judging:
    """The metric's judging, with the run's strictness and tie-break where it sets them, and
    each model's calibration: a judge profile's own fits, else a calibration file's fits of
    this metric (a judge metric's: calibration fits yes/no verdicts).

    Raises:
        ConfigError: The metric is of no kind a run can judge.
    """
    judging = KINDS.get(metric.kind or "")
    if judging is None:
        names = sorted(_REGISTERED.values())
        raise ConfigError(
            f"metric {metric.name!r} is a {type(metric).__name__}; expected a {', '.join(names[:-1])} or {names[-1]}"
        )
    calibration = sampling.calibration
    if metric.calibrators:  # a judge profile's fits (an AlignedCritic)
        calibrators = {c.model: c for c in metric.calibrators}
    elif calibration is not None and metric.kind == "judge":
        calibrators = dict(fits_by_metric(calibration.calibrators).get(metric.name, {}))
    else:
        calibrators = {}
    return judging(
        metric,
        sampling.strictness or metric.strictness,
        sampling.tie_break or metric.tie_break,
        sampling.scoring,
        sampling.threshold,
        calibrators,
        sampling.with_reasons,
    )
