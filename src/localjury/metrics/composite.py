"""Composite metrics: statements extracted by one prompt program, each judged by a second.

Both stages run as whole-dataset batches: first every record's extraction (by one model,
the extractor), then every record's verification (by every model of the jury, with
strictness k). Voting is per statement: within a model, the majority of its k samples'
verdicts on that statement; the model's score is the share of its decided statements that
are supported; the final score is the mean over the models that did not abstain, as for
the Aspect Critic.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from localjury.errors import MetricError
from localjury.metrics._quoted import Quotable, locate_quotes, quotable_texts
from localjury.metrics.base import Message, Metric, PromptProgram, bind_input, check_inputs
from localjury.metrics.evidence import MAX_QUOTES, QuoteText
from localjury.metrics.judging import BaseJudging, invalid_samples
from localjury.metrics.neutralise import DEFAULT, Neutraliser
from localjury.metrics.prompt_fit import fit_prompt
from localjury.metrics.protocol import Extraction, Judged, Juror, Request, Samples
from localjury.records.record import Record
from localjury.results.record_result import ModelJudgment, Quote, RecordResult, StatementJudgment, StatementResult
from localjury.types import QUOTE_KEY, OverflowPolicy, TieBreak
from localjury.votes.voting import final_score, model_score, model_verdict, share_supported

#: At most this many statements are extracted from one response (part of the schema).
MAX_STATEMENTS = 10
#: Upper bound of one statement's length, in characters (part of the schema).
STATEMENT_MAX_CHARS = 200
#: Upper bound of the reason given for one statement's verdict (part of the schema).
STATEMENT_REASON_MAX_CHARS = 150
#: Output tokens allowed per statement to verify (statement copy, reason, JSON), on top of
#: the model's max_tokens floor: a verification of c statements gets this times c.
TOKENS_PER_STATEMENT = 160
#: Output tokens for an extraction (up to MAX_STATEMENTS statements), when above max_tokens.
EXTRACTION_TOKENS = 800


class Statements(BaseModel):
    """The first stage's output: atomic statements."""

    model_config = ConfigDict(extra="forbid")

    statements: list[Annotated[str, Field(min_length=1, max_length=STATEMENT_MAX_CHARS)]] = Field(
        max_length=MAX_STATEMENTS
    )
    """Atomic, self-contained statements, each understandable without the others."""


class StatementVerdict(BaseModel):
    """The verdict on one statement."""

    model_config = ConfigDict(extra="forbid")

    statement: str = Field(max_length=STATEMENT_MAX_CHARS)
    """The statement judged, copied (informative: statements are matched by position)."""
    reason: str = Field(max_length=STATEMENT_REASON_MAX_CHARS)
    """Why it is or is not supported, written before the verdict."""
    verdict: Literal[0, 1]
    """1 when the statement is supported, 0 when it is not."""


class StatementVerdicts(BaseModel):
    """The second stage's output: one verdict per statement, in the statements' order."""

    model_config = ConfigDict(extra="forbid")

    verdicts: list[StatementVerdict]
    """One entry per statement given, in the same order."""


class QuotedStatementVerdict(BaseModel):
    """The verdict on one statement, with the context's quotes that bear on it first."""

    model_config = ConfigDict(extra="forbid")

    statement: str = Field(max_length=STATEMENT_MAX_CHARS)
    """The statement judged, copied (informative: statements are matched by position)."""
    evidence: list[QuoteText] = Field(max_length=MAX_QUOTES, json_schema_extra={QUOTE_KEY: True})
    """Up to three quotes of the context that support or contradict it; empty when the context
    says nothing of it. Each an exact span of the context on engines that constrain quotes."""
    reason: str = Field(max_length=STATEMENT_REASON_MAX_CHARS)
    """Why it is or is not supported, written before the verdict."""
    verdict: Literal[0, 1]
    """1 when the statement is supported, 0 when it is not."""


class QuotedStatementVerdicts(BaseModel):
    """The second stage's output with quoted evidence: one verdict per statement, in order."""

    model_config = ConfigDict(extra="forbid")

    verdicts: list[QuotedStatementVerdict]
    """One entry per statement given, in the same order."""


class VerifyProgram(PromptProgram[Any, Any]):
    """A verification program: its schema asks for exactly one verdict per statement given,
    so that the k samples' verdicts line up statement by statement."""

    def json_schema(self, inp: Any = None) -> dict[str, Any]:
        schema = copy.deepcopy(super().json_schema())
        if inp is not None:
            count = len(inp.statements)
            schema["properties"]["verdicts"].update(minItems=count, maxItems=count)
        return schema

    def check(self, value: Any, inp: Any) -> str | None:
        if inp is not None and len(value.verdicts) != len(inp.statements):
            return f"gives {len(value.verdicts)} verdicts for {len(inp.statements)} statements"
        return None


@dataclass(frozen=True)
class Verification:
    """One verification sample parsed: per statement a vote and its reason, or an abstention."""

    votes: list[int | None]
    reasons: list[str | None]
    raw: str
    problem: str | None = None
    quotes: list[list[Quote]] | None = None
    """Per statement, its evidence located in the context (a verification that quotes)."""


class CompositeMetric(Metric):
    """Extract statements from a record, then judge each statement; score = share supported.

    Stage 1 (``extract``): one sample per record at temperature 0, drawn by the run's
    extractor model (``evaluate(extractor=...)``, default the first model of the jury);
    every model of the jury then judges those *same* statements, so that votes can be
    compared and combined statement by statement.

    Stage 2 (``verify``): each model draws ``strictness`` samples per record, each with one
    verdict per statement. Per statement, the model's verdict is the majority of its valid
    votes (ties per ``tie_break``). A model's score is supported / decided statements (null
    when it decided none); the final score is the mean of the non-null model scores. No
    statements extracted -> null score.

    Args:
        name: The metric name written in results.
        extract: Program whose output model has ``statements: list[str]``.
        verify: A :class:`VerifyProgram` whose input model has ``statements: list[str]``.
        extract_sources: For the extraction input: input field -> record field.
        verify_sources: For the verification input: input field -> record field.
        constants: Input values fixed by the metric, for either stage.
        strictness: Samples per model in the verification stage (k).
        tie_break: What an even split on a statement gives.
        description: One line for summaries.
        quote_from: The verification input's fields whose text its quotes must be exact spans
            of (a verification whose output quotes, as :data:`NLI_STATEMENT_QUOTED` does).
    """

    kind: ClassVar[str | None] = "composite"

    def __init__(
        self,
        name: str,
        *,
        extract: PromptProgram[Any, Any],
        verify: VerifyProgram,
        extract_sources: Mapping[str, str] | None = None,
        verify_sources: Mapping[str, str] | None = None,
        constants: Mapping[str, Any] | None = None,
        strictness: int = 1,
        tie_break: TieBreak = "fail",
        description: str = "",
        quote_from: Sequence[str] = (),
    ) -> None:
        super().__init__(name, strictness=strictness, tie_break=tie_break)
        self.quote_from = tuple(quote_from)
        if "statements" not in extract.output_model.model_fields:
            raise MetricError(f"metric {name!r}: the extraction output model needs a `statements` list")
        if not isinstance(verify, VerifyProgram):
            raise MetricError(f"metric {name!r}: the verification program must be a VerifyProgram")
        if "statements" not in verify.input_model.model_fields:
            raise MetricError(f"metric {name!r}: the verification input model needs a `statements` field")
        check_inputs(extract.input_model, name, constants=constants, sources=extract_sources)
        check_inputs(verify.input_model, name, constants=constants, sources=verify_sources, computed=("statements",))
        self.extract = extract
        self.verify = verify
        self.extract_sources = dict(extract_sources or {})
        self.verify_sources = dict(verify_sources or {})
        self.constants = dict(constants or {})
        self._description = description

    @property
    def description(self) -> str:
        return self._description

    # -- stage 1 -----------------------------------------------------------------------------
    def extract_messages(self, record: Record, neutralise: Neutraliser = DEFAULT) -> list[Message]:
        """Messages that ask for the record's statements; RecordError naming a missing field."""
        inp = bind_input(
            self.extract.input_model,
            record,
            self.name,
            constants=self.constants,
            sources=self.extract_sources,
            thinking=self.thinking,
        )
        return self.extract.messages(inp, neutralise)

    def extract_schema(self) -> dict[str, Any]:
        """The schema of the extraction output."""
        return self.extract.json_schema()

    def parse_statements(self, text: str, *, finished: bool = True) -> tuple[list[str] | None, str | None]:
        """The extracted statements (blank and repeated ones dropped), or None and the problem."""
        parsed = self.extract.parse(text, finished=finished)
        if parsed.value is None:
            return None, parsed.problem
        seen: dict[str, None] = {}
        for s in parsed.value.statements:
            if s.strip():
                seen.setdefault(s.strip(), None)
        return list(seen), None

    # -- stage 2 -----------------------------------------------------------------------------
    def verify_input(self, record: Record, statements: Sequence[str]) -> Any:
        """The verification input for a record and its statements."""
        return bind_input(
            self.verify.input_model,
            record,
            self.name,
            constants=self.constants,
            sources=self.verify_sources,
            extra={"statements": list(statements)},
            thinking=self.thinking,
        )

    def verify_messages(
        self, record: Record, statements: Sequence[str], neutralise: Neutraliser = DEFAULT
    ) -> list[Message]:
        """Messages that ask for a verdict on each statement (the statements, extracted by a
        model from record text, are neutralised like the record)."""
        return self.verify.messages(self.verify_input(record, statements), neutralise)

    def verify_schema(self, record: Record, statements: Sequence[str]) -> dict[str, Any]:
        """The verification schema: exactly one verdict per statement."""
        return self.verify.json_schema(self.verify_input(record, statements))

    def quotable(self, record: Record) -> list[Quotable]:
        """The texts of ``record`` the verification's quotes may come from, each with its place;
        empty for a verification that does not quote."""
        if not self.quote_from:
            return []
        return quotable_texts(self.verify_input(record, []), self.quote_from, self.verify_sources, record)

    def parse_verification(
        self, text: str, record: Record, statements: Sequence[str], *, finished: bool = True
    ) -> Verification:
        """One verification sample as per-statement votes; an abstention on every statement
        when it does not parse or does not give one verdict per statement."""
        parsed = self.verify.parse(text, finished=finished, inp=self.verify_input(record, statements))
        if parsed.value is None:
            none: list[int | None] = [None] * len(statements)
            return Verification(votes=none, reasons=[None] * len(statements), raw=text, problem=parsed.problem)
        verdicts = parsed.value.verdicts
        quotes = None
        if self.quote_from:
            texts = self.quotable(record)
            quotes = []
            for v in verdicts:
                located = locate_quotes(getattr(v, "evidence", []), texts)
                if isinstance(located, str):
                    none = [None] * len(statements)
                    return Verification(votes=none, reasons=[None] * len(statements), raw=text, problem=located)
                quotes.append(located)
        return Verification(
            votes=[int(v.verdict) for v in verdicts],
            reasons=[v.reason for v in verdicts],
            raw=text,
            quotes=quotes,
        )


class StatementsJudging(BaseJudging):
    """A :class:`CompositeMetric`: the extractor breaks the record into statements (one
    sample, temperature 0); each model verifies all of them in k samples; the majority per
    statement and model, the share supported per model, the mean over the models. A record
    with no statement asks no model (its score is null)."""

    extracts: ClassVar[bool] = True
    metric: CompositeMetric

    def first_step(self, record: Record, first: Juror) -> Extraction | None:
        self.metric.verify_input(record, [])  # a missing context is the record's error, before any load
        messages = self.metric.extract_messages(record, first.neutralise)
        request = Request(
            (record.id, self.metric.name),
            messages,
            self.metric.extract_schema(),
            n=1,
            max_tokens=max(first.max_tokens, EXTRACTION_TOKENS),
            temperature=0.0,
        )
        return Extraction(request, self.metric.parse_statements)

    def requests(self, model: Juror, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        statements: list[str] = context
        if not statements:
            return []
        budget = max(model.max_tokens, 64 + TOKENS_PER_STATEMENT * len(statements))
        render = partial(self.metric.verify_messages, statements=statements, neutralise=model.neutralise)
        fitted = fit_prompt(on_overflow, model, record, budget, render(record), render)
        verify, cut = fitted.messages, fitted.turns_cut
        schema = self.metric.verify_schema(record, statements)
        key = (record.id, self.metric.name)
        # Quotes only of what the prompt shows: not of what a cut to fit the context removed.
        quotes = tuple(q.text for q in self.metric.quotable(fitted.shown)) if self.metric.quote_from else None
        return [Request(key, verify, schema, self.k, budget, model.temperature, turns_cut=cut, quotes=quotes)]

    def judge(self, name: str, record: Record, context: Any, samples: Samples) -> Judged:
        if isinstance(samples, str):
            judgment = ModelJudgment(
                model=name, votes=[], reasons=[], abstentions=self.k, verdict=None, score=None, error=samples
            )
            return Judged(judgment)
        (drawn,) = samples
        checks = [self.metric.parse_verification(c.text, record, context, finished=c.finished) for c in drawn]
        verdicts: list[int | None] = []
        per_statement: list[StatementJudgment] = []
        # A sample's verdict probabilities, one per statement in order, where it wrote them all.
        probs = [c.verdict_probs if c.verdict_probs and len(c.verdict_probs) == len(context) else None for c in drawn]
        quoted = any(p.quotes is not None for p in checks)
        for i in range(len(context)):
            votes = [p.votes[i] for p in checks]
            verdict = model_verdict(votes, self.tie)
            verdicts.append(verdict)
            p_pass = [ps[i] if ps is not None and v is not None else None for ps, v in zip(probs, votes, strict=True)]
            evidence = [p.quotes[i] if p.quotes is not None else None for p in checks] if quoted else None
            reasons = [p.reasons[i] for p in checks]
            per_statement.append(
                StatementJudgment(
                    model=name, votes=votes, reasons=reasons, verdict=verdict, p_pass=p_pass, evidence=evidence
                )
            )
        invalid = invalid_samples(checks, [p.problem is not None for p in checks])
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
        # Unanimous where every sample parsed and each statement's votes agree.
        unanimous = not any(p.problem for p in checks) and all(len(set(s.votes)) == 1 for s in per_statement)
        return Judged(judgment, per_statement, unanimous)

    def combine(self, record: Record, context: Any, judged: list[Judged]) -> RecordResult:
        statements: list[str] = context
        by_statement = [[j.detail[i] for j in judged if j.detail is not None] for i in range(len(statements))]
        return RecordResult(
            record_id=record.id,
            metric=self.metric.name,
            score=final_score([j.judgment.score for j in judged]),
            error=None,
            models=[j.judgment for j in judged],
            statements=[
                StatementResult(statement=text, score=final_score([model_score(j.verdict) for j in js]), models=js)
                for text, js in zip(statements, by_statement, strict=True)
            ],
        )
