"""What a run and a metric kind hand each other: the :class:`Judging` protocol the run stages
call, the :class:`Request` a kind asks a model, the :class:`Extraction` of a first step, a model's
:class:`Judged` judgment, and the run's shapes a kind sees (:class:`Juror`,
:class:`JudgingSettings`). :class:`~localjury.metrics.judging.BaseJudging` implements the protocol;
nothing here runs a model or reads a record."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from localjury.metrics.base import Metric
from localjury.metrics.neutralise import Neutraliser
from localjury.models.registry import ModelSpec
from localjury.records.record import Record
from localjury.results.record_result import ModelJudgment, RecordResult
from localjury.types import Completion, Message, OverflowPolicy, Scoring, Stored, TieBreak, Ungrounded
from localjury.votes.calibration import CalibrationFile
from localjury.votes.heads import DecisionHead

Key = tuple[str, str]
"""(record id, metric name)."""
Samples = list[list[Completion]] | str
"""A model's samples of a record, per prompt in the order of its requests; or, where it has
none, why (the record's error for that model)."""


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


@dataclass(frozen=True)
class Extraction:
    """A first step: one request to the extractor before the models judge, and how its one
    sample becomes the record's context (what the kind's other members are handed)."""

    request: Request
    parse: Callable[..., tuple[Any, str | None]]
    """``parse(text, finished=...)``: the context, or None and why the sample is not one."""
    what: str = "statement extraction"
    """What the step is, in the record's error when it fails."""

    def read(self, stored: Stored | None, by: str, lost: str | None) -> Any:
        """The context from the step's stored generation by model ``by``, or the record's
        error (a string): no generation (``lost`` says why, where known), a failed one, or a
        sample that does not parse."""
        if stored is None:
            return f"no {self.what} by {by!r}" + (f": {lost}" if lost else " in the judgment store")
        if isinstance(stored, str):
            return f"{self.what} by {by!r} failed: {stored}"
        (sample,) = stored
        context, problem = self.parse(sample.text, finished=sample.finished)
        if context is None:
            return f"{self.what} by {by!r} abstained: {problem}; raw: {sample.text!r}"
        return context


@dataclass(frozen=True)
class Judged:
    """One model's judgment of a record, as a kind's :meth:`~BaseJudging.judge` gives it."""

    judgment: ModelJudgment
    detail: Any = None
    """What the kind's :meth:`~BaseJudging.combine` needs beside the judgment (a composite's
    votes per statement); None for a model that could not judge."""
    unanimous: bool = False
    """Its samples already decide its majority: every one decided, all alike (adaptive
    strictness draws no more; see :meth:`~BaseJudging.unanimous`)."""


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

    def output_tokens(self, max_tokens: int) -> int:
        """The most tokens a sample may write: ``max_tokens`` and a thinking budget's."""
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

    @property
    def ungrounded(self) -> Ungrounded: ...


class Judging(Protocol):
    """How one metric is judged, as the run calls it: a :class:`BaseJudging` (see there).

    ``context`` is what a metric's first step gave for a record (a composite's statements),
    None for a metric judged in one step.
    """

    extracts: ClassVar[bool]
    """Its first step is the extractor's (its results name the extractor)."""

    @property
    def kind(self) -> str:
        """The ``kind`` of the metric; also the metric's kind in summaries and manifests."""
        ...

    @property
    def description(self) -> str:
        """The metric's line in summaries and manifests."""
        ...

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

    def first_step(self, record: Record, first: Juror) -> Extraction | None: ...

    def requests(self, model: Juror, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]: ...

    def unanimous(self, record: Record, context: Any, samples: list[Completion]) -> bool: ...

    def result(
        self, record: Record, context: Any, samples: Mapping[str, Samples]
    ) -> tuple[list[Judged], RecordResult]: ...
