"""Metrics are declared, not coded: a prompt program, and how its outputs become votes.

A :class:`PromptProgram` is an ``instruction``, a pydantic input model, a pydantic output
model and few-shot ``examples`` as (input, output) pairs. It renders chat messages (the
instruction, the examples as user/assistant turns, then the input), derives the JSON schema
the engine constrains every sample to from the output model, and parses a sample back into
the output model; what does not parse is an abstention with its raw text, never an error.

A :class:`JudgeMetric` is one program whose output carries a 0/1 ``verdict``: the Aspect
Critic is one, and a user declares a new one in a few lines. Composite metrics chain two
programs (see :mod:`localjury.metrics.composite`).

Nothing here imports an engine: a metric renders messages; the engine turns them into its
model's prompt format and constrains the output to the schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from localjury.errors import MetricError
from localjury.metrics._binding import bind_input, check_inputs
from localjury.metrics._quoted import Quotable, locate_quotes, quotable_texts, quote_field
from localjury.metrics._text_bounds import check_metric_texts
from localjury.metrics.neutralise import DEFAULT, Neutraliser, render_conversation
from localjury.records.conversation import CONVERSATION_TAGS, ChatMessage, Scope
from localjury.records.record import Record
from localjury.results.record_result import Quote
from localjury.types import Message, TieBreak, check_tie_break
from localjury.votes.calibration import Calibrator
from localjury.votes.stacking import StackedJury

#: Upper bound of a judgment's ``reason``; part of the schema, so a generation cannot run
#: out of tokens mid-string when max_tokens leaves room for it.
REASON_MAX_CHARS = 200

#: The most samples a model may draw per judgment: majority votes settle well before this,
#: and a typo (k=1000) would otherwise run for hours.
MAX_STRICTNESS = 64

InT = TypeVar("InT", bound=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel)


class Judgment(BaseModel):
    """The judge's output for one sample: its reasoning first, then its verdict."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(max_length=REASON_MAX_CHARS)
    """One or two sentences of reasoning, written before the verdict."""
    verdict: Literal[0, 1]
    """1 when the response meets the criterion, 0 when it does not."""


class VerdictFirstJudgment(BaseModel):
    """The judge's output when it answers first and explains after (``verdict_first``)."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal[0, 1]
    """1 when the response meets the criterion, 0 when it does not."""
    reason: str = Field(max_length=REASON_MAX_CHARS)
    """One or two sentences that justify the verdict, written after it."""


@dataclass(frozen=True)
class Parsed(Generic[OutT]):
    """One sample parsed into the output model, or an abstention with the reason it is one."""

    value: OutT | None
    raw: str
    problem: str | None = None
    """Why the sample abstained (does not parse, cut off by the token budget)."""


@dataclass(frozen=True)
class ParsedSample:
    """One sample of a judge metric: a vote and its reason, or an abstention with the raw text."""

    vote: int | None
    reason: str | None
    raw: str
    problem: str | None = None
    """Why the sample abstained (does not parse, cut off by the token budget)."""
    quotes: list[Quote] | None = None
    """Its evidence located in the record, when the metric asks for quotes."""
    ungrounded: list[str] | None = None
    """What its reason cites that the record does not hold, where it cites any
    (:meth:`~localjury.metrics.judging.BaseJudging.held_to`): its vote stands under a run's
    ``ungrounded: flag``, and is None under ``abstain``."""


def _render_value(name: str, value: Any, neutralise: Neutraliser) -> str:
    if isinstance(value, str):
        body = neutralise(value)
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        body = "\n".join(f'<item index="{i}">\n{neutralise(v)}\n</item>' for i, v in enumerate(value, start=1))
    else:
        body = neutralise(json.dumps(value, ensure_ascii=False, default=str))
    return f"<{name}>\n{body}\n</{name}>"


class PromptProgram(Generic[InT, OutT]):
    """One prompt program: instruction, input model, output model and few-shot examples.

    The user turn renders each non-empty field of the input, in the input model's field
    order, as a tagged block (``<name>...</name>``; lists as numbered ``<item>`` blocks).
    Put the fields shared by many prompts first, so prompts share a cacheable prefix. Every
    value goes through a :class:`~localjury.metrics.neutralise.Neutraliser` (the judge's, when the
    run knows it): record text cannot close a block or open a chat turn.

    Args:
        instruction: The system message: what the judge is asked and how to answer.
        input_model: A pydantic model of what one prompt shows the judge.
        output_model: A pydantic model of the answer; its JSON schema constrains every sample.
        examples: Few-shot (input, output) pairs, shown as user/assistant turns.
    """

    def __init__(
        self,
        instruction: str,
        input_model: type[InT],
        output_model: type[OutT],
        examples: Sequence[tuple[InT, OutT]] = (),
    ) -> None:
        if not instruction or not instruction.strip():
            raise MetricError("a prompt program needs a non-empty instruction")
        for i, (inp, out) in enumerate(examples, start=1):
            if not isinstance(inp, input_model) or not isinstance(out, output_model):
                raise MetricError(
                    f"example {i} must be ({input_model.__name__}, {output_model.__name__}), "
                    f"got ({type(inp).__name__}, {type(out).__name__})"
                )
        check_metric_texts("a prompt program", {
            "instruction": instruction,
            "examples": [(inp.model_dump(), out.model_dump()) for inp, out in examples],
        })  # fmt: skip
        self.instruction = instruction.strip()
        self.input_model = input_model
        self.output_model = output_model
        self.examples = list(examples)
        turns = CONVERSATION_TAGS if "conversation" in input_model.model_fields else ()  # in every field
        self._tags = tuple(input_model.model_fields) + turns

    def render_input(self, inp: InT, neutralise: Neutraliser = DEFAULT) -> str:
        """The user turn for one input: its fields as tagged blocks, absent ones (None, []) left
        out, each value neutralised (``neutralise``: the judge's neutraliser)."""
        neutralise = neutralise.with_tags(self._tags)
        blocks = []
        for name, value in inp.model_dump().items():
            if value is None or value == []:
                continue
            turns = getattr(inp, name)
            if isinstance(turns, list) and all(isinstance(m, ChatMessage) for m in turns):
                blocks.append(f"<{name}>\n{render_conversation(turns, neutralise)}\n</{name}>")
            else:
                blocks.append(_render_value(name, value, neutralise))
        return "\n".join(blocks)

    def render_output(self, out: OutT, neutralise: Neutraliser = DEFAULT) -> str:
        """An example answer, as the judge is asked to write it, every string in it neutralised
        as record text is (``neutralise``): a worked example's reason or quote may be labeled
        data, and cannot close the turn or open another."""
        return json.dumps(neutralise.with_tags(self._tags).json_value(out.model_dump()), ensure_ascii=False)

    def messages(self, inp: InT, neutralise: Neutraliser = DEFAULT) -> list[Message]:
        """Instruction, examples, then the input: the instruction and examples are a prefix
        shared by every prompt of this program."""
        turns: list[Message] = [{"role": "system", "content": self.instruction}]
        for ex_in, ex_out in self.examples:
            turns.append({"role": "user", "content": self.render_input(ex_in, neutralise)})
            turns.append({"role": "assistant", "content": self.render_output(ex_out, neutralise)})
        turns.append({"role": "user", "content": self.render_input(inp, neutralise)})
        return turns

    def json_schema(self, inp: InT | None = None) -> dict[str, Any]:
        """The JSON schema every sample is constrained to (override to depend on the input)."""
        return self.output_model.model_json_schema()

    def parse(self, text: str, *, finished: bool = True, inp: InT | None = None) -> Parsed[OutT]:
        """Parse one sample; anything that does not validate is an abstention, not an error."""
        try:
            value = self.output_model.model_validate_json(text)
        except ValidationError as exc:
            if not finished:
                return Parsed(None, text, "cut off by the token budget (max_tokens)")
            return Parsed(None, text, "does not match the schema: " + "; ".join(e["msg"] for e in exc.errors()[:3]))
        problem = self.check(value, inp)
        if problem:
            return Parsed(None, text, problem)
        return Parsed(value, text)

    def check(self, value: OutT, inp: InT | None) -> str | None:
        """A further check of a parsed output against its input; a message makes it an abstention."""
        return None


class Metric:
    """Anything a run can judge: a name, samples per model (strictness), a tie-break.

    ``kind`` names how a run judges it (:data:`localjury.metrics.kinds.KINDS`): ``"judge"``
    for a :class:`JudgeMetric`, ``"composite"`` for a ``CompositeMetric``, ``"pairwise"``
    for a ``PairwiseCritic``, ``"rubric"`` for a ``Rubric``, ``"checklist"`` for a criterion
    of a ``Checklist``, ``"tool_calls"`` for a ``ToolCallAccuracy`` (computed, no judge). The
    other attributes below are what a run reads of any metric; a subclass that has them sets them.
    """

    kind: ClassVar[str | None] = None
    judging: ClassVar[Any] = None
    """The judging class of a metric of a kind outside the registry (a user's kind: a subclass of
    :class:`~localjury.metrics.judging.BaseJudging`); None for the registry's kinds."""
    quote_from: tuple[str, ...] = ()
    """The input fields whose text the output's quotes must be spans of; none by default."""
    revision: str | None = None
    """Where the metric comes from and its version (a rubrics file's entry, ``name@version``):
    part of the store key of every judgment of it, so that a new version is judged again."""
    source: dict[str, Any] | None = None
    """A rubrics file's entry: the file, its SHA-256, the entry's version and line (the manifest
    records it)."""
    profile: dict[str, Any] | None = None
    """The judge profile it comes from, as the manifest records it (an ``AlignedCritic``)."""
    calibrators: Sequence[Calibrator] = ()
    """Its own fitted calibrations, one per model (a judge profile's); none by default, when a
    run's calibration file gives them."""
    stack: StackedJury | None = None
    """A judge profile's stacked jury (:mod:`localjury.votes.stacking`), reported beside each
    record's score; none by default."""
    thinking: bool = False
    """Whether the judge sees a response's thinking (a reasoning model's leading
    ``<think>…</think>`` block); by default it is left out and the answer alone judged."""

    def __init__(self, name: str, *, strictness: int = 1, tie_break: TieBreak = "fail") -> None:
        if not name or not name.strip():
            raise MetricError("a metric needs a non-empty name")
        check_metric_texts(f"metric {name[:80]!r}", {"name": name})
        if not isinstance(strictness, int) or isinstance(strictness, bool) or not 1 <= strictness <= MAX_STRICTNESS:
            raise MetricError(f"strictness must be an integer from 1 to {MAX_STRICTNESS}, got {strictness!r}")
        self.name = name
        self.strictness = strictness
        try:
            self.tie_break = check_tie_break(tie_break)
        except ValueError as exc:
            raise MetricError(str(exc)) from None

    @property
    def description(self) -> str:
        """One line for summaries: the criterion, or what the metric measures."""
        return ""

    def quotable(self, record: Record) -> list[Quotable]:
        """The texts of ``record`` the metric's quotes may come from, each with its place in the
        record; none for a metric that asks for no quotes."""
        return []


class JudgeMetric(Metric):
    """A single-step metric: one prompt program whose output carries a 0/1 ``verdict``.

    Each model draws ``strictness`` samples of the program's output for each record in one
    request; a sample's vote is its ``verdict``; the model's verdict is the majority of its
    valid votes (ties per ``tie_break``; unparseable samples abstain); the final score is
    the mean of the non-abstaining models' scores (PASS 1.0, FAIL 0.0).

    Args:
        name: The metric name written in results.
        instruction: What the judge is asked; say what verdict 1 and 0 mean.
        input_model: What a prompt shows the judge. Fields named like record fields
            (``user_input``, ``response``, ``retrieved_contexts``, ``reference``) are filled
            from the record; others from ``constants``.
        output_model: The answer; must have a ``verdict`` field with values 0 and 1
            (default :class:`Judgment`, ``{"reason", "verdict"}``).
        examples: Few-shot (input, output) pairs.
        constants: Input values fixed by the metric (e.g. a criterion).
        sources: Input field -> record field, where their names differ.
        strictness: Samples per model (k).
        tie_break: ``"fail"`` (default), ``"pass"`` or ``"abstain"`` for an even split.
        description: One line for summaries.
        scope: For conversation records and an input model with a ``conversation`` field:
            ``"last_turn"`` (default) judges the last assistant turn as the response, the
            turns before it shown as context; ``"conversation"`` judges every turn.
        quote_from: The input fields whose text the output's quotes (a list marked
            :data:`~localjury.types.QUOTE_KEY`, as in :class:`EvidenceJudgment`) must be
            exact spans of: engines that can constrain them to those texts do (transformers,
            llamacpp, vLLM with its guidance backend), and a sample quoting anything else
            abstains.
    """

    kind: ClassVar[str | None] = "judge"

    def __init__(
        self,
        name: str,
        *,
        instruction: str,
        input_model: type[BaseModel],
        output_model: type[BaseModel] = Judgment,
        examples: Sequence[tuple[BaseModel, BaseModel]] = (),
        constants: Mapping[str, Any] | None = None,
        sources: Mapping[str, str] | None = None,
        strictness: int = 1,
        tie_break: TieBreak = "fail",
        description: str = "",
        scope: Scope = "last_turn",
        quote_from: Sequence[str] = (),
    ) -> None:
        super().__init__(name, strictness=strictness, tie_break=tie_break)
        unknown = [f for f in quote_from if f not in input_model.model_fields]
        if unknown:
            raise MetricError(f"metric {name!r}: quote_from names {unknown[0]!r}, which is no field of its input model")
        self.quote_from = tuple(quote_from)
        if scope not in get_args(Scope):
            raise MetricError(
                f"metric {name!r}: unknown scope {scope!r}; expected one of: {', '.join(get_args(Scope))}"
            )
        self.scope: Scope = scope
        verdict = output_model.model_fields.get("verdict")
        if verdict is None or verdict.annotation not in (Literal[0, 1], Literal[1, 0]):
            raise MetricError(f"metric {name!r}: the output model needs a field `verdict: Literal[0, 1]`")
        check_inputs(input_model, name, constants=constants, sources=sources)
        check_metric_texts(f"metric {name!r}", {**(constants or {}), "description": description})
        self.program: PromptProgram[BaseModel, BaseModel] = PromptProgram(
            instruction, input_model, output_model, examples
        )
        self.constants = dict(constants or {})
        self.sources = dict(sources or {})
        self._description = description

    @property
    def description(self) -> str:
        return self._description

    @property
    def output_model(self) -> type[BaseModel]:
        """The pydantic model every sample is parsed into."""
        return self.program.output_model

    def bind(self, record: Record) -> BaseModel:
        """The program's input for ``record``; RecordError naming the field if it lacks one."""
        return bind_input(
            self.program.input_model,
            record,
            self.name,
            constants=self.constants,
            sources=self.sources,
            scope=self.scope,
            thinking=self.thinking,
        )

    def messages(self, record: Record, neutralise: Neutraliser = DEFAULT) -> list[Message]:
        """Return the chat messages that ask the judge about ``record`` (its text passed
        through ``neutralise``, the judge's neutraliser)."""
        return self.program.messages(self.bind(record), neutralise)

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema the engine constrains every sample to."""
        return self.program.json_schema()

    def quotable(self, record: Record) -> list[Quotable]:
        """The texts of ``record`` this metric's quotes may come from, each with its place
        (:func:`quotable_texts`); empty for a metric that asks for no quotes."""
        if not self.quote_from:
            return []
        return quotable_texts(self.bind(record), self.quote_from, self.sources, record)

    def parse(self, text: str, *, finished: bool = True, record: Record | None = None) -> ParsedSample:
        """Parse one sample into a vote; anything that does not validate is an abstention, not a 0.

        For a metric that asks for quotes, given the ``record``, each quote is located in it;
        a sample with a quote the record does not hold abstains (an engine that constrains
        quotes never writes one)."""
        parsed = self.program.parse(text, finished=finished)
        if parsed.value is None:
            return ParsedSample(vote=None, reason=None, raw=text, problem=parsed.problem)
        value = parsed.value
        reason = getattr(value, "reason", None)
        quotes = None
        field = quote_field(self.output_model) if self.quote_from and record is not None else None
        if field is not None and record is not None:
            located = locate_quotes(getattr(value, field), self.quotable(record))
            if isinstance(located, str):
                return ParsedSample(vote=None, reason=None, raw=text, problem=located)
            quotes = located
        return ParsedSample(
            vote=int(value.verdict),  # type: ignore[attr-defined]
            reason=reason if isinstance(reason, str) else None,
            raw=text,
            quotes=quotes,
        )
