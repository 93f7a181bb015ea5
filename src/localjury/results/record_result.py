"""What a run writes of each (record, metric): the result models, and the results file read
back (printed as tables by :mod:`localjury.results.tables`; the run's summary and a dry run's plan are
in :mod:`localjury.results.summary`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from localjury._files import MAX_LINE_BYTES, json_lines
from localjury.errors import ConfigError
from localjury.types import Pooling


class InvalidSample(BaseModel):
    """A sample that abstained, with the raw text the judge produced."""

    sample: int
    """Index of the sample among the model's k samples."""
    problem: str
    """Why it does not count as a vote."""
    raw: str
    """What the model generated."""


class Quote(BaseModel):
    """One quote of a judgment's evidence, located in the record: an exact span of one of its
    texts (``record.response[start:end] == text`` for ``field`` ``response``)."""

    model_config = ConfigDict(extra="forbid")

    text: str
    """The quote, as the judge wrote it."""
    field: str
    """The record text it comes from: ``response`` (a conversation record's: its last assistant
    turn), ``reference``, ``retrieved_contexts[i]`` (0-based), or ``conversation[i]``, the
    i-th turn (0-based) of those shown to the judge of a conversation."""
    start: int
    """Character offset of its first occurrence in that text."""
    end: int
    """Character offset just past it."""


class ModelJudgment(BaseModel):
    """One model's judgment of one (record, metric)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """The model's name in models.yaml."""
    votes: list[int | None]
    """The samples' votes: 1, 0, or null for a sample that abstained (empty for composite
    metrics, whose votes are per statement, under ``RecordResult.statements``; for pairwise
    metrics the 2k order-corrected votes, 1 for response_a, order AB's first)."""
    drawn: int = 0
    """Samples drawn: k (2k for pairwise metrics, k per order), or k // 2 + 1 (per order)
    under adaptive strictness when those were unanimous."""
    reasons: list[str | None]
    """The k samples' reasons (null where the sample abstained; empty for composite metrics)."""
    abstentions: int
    """How many of the k samples abstained."""
    verdict: int | None
    """Majority of the valid votes (ties per tie_break); null when the model abstains, and
    always null for composite metrics (their verdicts are per statement)."""
    score: float | None
    """1.0 for PASS, 0.0 for FAIL; for composite metrics the share of the model's decided
    statements that are supported; for pairwise metrics 1.0 when it prefers response_a, 0.0
    for response_b; null when the model abstains."""
    error: str | None = None
    """Why this model could not judge this record at all (e.g. the prompt exceeds its context)."""
    p_pass: list[float | None] = []
    """Per sample, the probability the model gave to verdict 1 where it wrote its verdict
    (after its reasoning; renormalised over the verdict tokens the schema allowed); for
    pairwise metrics the probability of preferring response_a, in the order of ``votes``;
    null where the sample abstained or the engine gives no probabilities."""
    confidence: float | None = None
    """The mean ``p_pass`` of the valid samples; null when none has one. Under probability
    scoring it is the model's score."""
    calibrated: bool = False
    """The score is the calibrated graded score and the verdict the fitted threshold's
    (``run --calibration``)."""
    invalid: list[InvalidSample] = []
    """The abstained samples' raw outputs."""
    order_votes: dict[str, list[int | None]] | None = None
    """Pairwise metrics: each order's votes as the judge gave them, by order ("AB": response_a
    shown as A; "BA": response_b shown as A), 1 for "A", 0 for "B", null where a sample
    abstained. ``votes`` holds the same votes order-corrected (1: prefers response_a), AB's first."""
    position_consistent: bool | None = None
    """Pairwise metrics: whether the majorities of the two orders, order-corrected, agree;
    null when either order has no majority (an even split, or no valid vote)."""
    scores: list[int | None] | None = None
    """Rubrics: the samples' sampled scores on the scale (null where a sample abstained);
    ``votes`` then holds whether each reaches the rubric's threshold (1) or not (0)."""
    expected: list[float | None] | None = None
    """Rubrics: per sample, the expected score (the levels weighted by their probabilities where
    it wrote its score); null where the sample abstained or the engine gives no probabilities."""
    scale_score: float | None = None
    """Rubrics: the mean or median sampled score (by probability: the mean expected score)."""
    evidence: list[list[Quote] | None] | None = None
    """Judges asked for quoted evidence (``--evidence``): per sample, its quotes located in the
    record (null where the sample abstained); an empty list where it found nothing to quote."""
    ungrounded: list[list[str]] | None = Field(None, exclude_if=lambda value: value is None)
    """Per sample, what its reason cites (numbers, quotations) that the record does not hold
    (:meth:`localjury.metrics.judging.BaseJudging.held_to`; empty where it cites nothing of the
    kind). Such a sample's vote stands under the run's ``ungrounded: flag`` (the default); under
    ``abstain`` it is an abstention that says what it cited. Left out where no sample's reason
    cites any."""
    thinking: list[str | None] | None = Field(None, exclude_if=lambda value: value is None)
    """A judge that thinks (``thinking`` in models.yaml, or a server's reasoning parser): each
    sample's thinking, in the order the samples were drawn (null where a sample wrote none).
    Left out of the results of a judge that does not think."""
    head: HeadDecision | None = Field(None, exclude_if=lambda value: value is None)
    """A model decided by a judge profile's decision head: its layer and probability (its one
    vote is the head's verdict, with no reason: nothing was sampled). Left out otherwise."""
    details: dict[str, Any] | None = Field(None, exclude_if=lambda value: value is None)
    """What a kind of metric of its own adds to a model's judgment (its details model, dumped,
    defined in its module: this file names no kind's). Left out for the built-in kinds."""


class HeadDecision(BaseModel):
    """How a decision head decided a record (:mod:`localjury.votes.heads`)."""

    model_config = ConfigDict(extra="forbid")

    layer: int
    """The transformer block whose output it read (the first, for a head on several blocks)."""
    more_layers: list[int] = Field(default=[], exclude_if=lambda value: not value)
    """The further blocks a head on several blocks read; left out for a head on one."""
    pooling: Pooling = Field(default="last", exclude_if=lambda value: value == "last")
    """Where it read the prompt's states: ``response``, their mean over the response's tokens;
    left out for the last token's (``last``)."""
    after_reason: bool = Field(default=False, exclude_if=lambda value: not value)
    """It read the state where the judge, having written its reason (the judgment's), was about to
    write its verdict; left out where not."""
    probability: float | None = Field(None, exclude_if=lambda value: value is None)
    """Its probability that the response meets the criterion (a preference head's: that
    ``response_a`` is the better response); left out for a graded head."""
    score: float | None = Field(None, exclude_if=lambda value: value is None)
    """A graded head's score on the rubric's scale 1..N (:mod:`localjury.votes.graded`); left out
    for the other heads."""
    head_sha256: str
    """The head's hash (its weights, layer and binding)."""
    votes: list[int | None] | None = Field(None, exclude_if=lambda value: value is None)
    """With ``--with-reasons``: the votes of the model's usual samples, drawn beside the head's decision
    and not counted in it (null where a sample abstained; a pairwise criterion's in both orders, in the
    record's frame: 1 prefers ``response_a``). Left out otherwise."""
    reasons: list[str | None] | None = Field(None, exclude_if=lambda value: value is None)
    """With ``--with-reasons``: those samples' reasons."""

    def said(self, digits: int = 3) -> str:
        """What the head said, for people: ``p 0.971``, or a graded head's ``score 3.42``."""
        return f"score {self.score:.2f}" if self.score is not None else f"p {self.probability or 0:.{digits}f}"


class StackedDecision(BaseModel):
    """A judge profile's stacked jury on one record (:mod:`localjury.votes.stacking`): its members'
    probabilities combined by the weights ``align`` learned. Reported beside the score, which stays
    the mean of the models' scores."""

    model_config = ConfigDict(extra="forbid")

    probability: float | None
    """Its probability that the record passes; null where a member gave none (``missing``)."""
    verdict: int | None
    """1 where ``probability`` is at least 0.5, else 0; null without a probability."""
    missing: list[str] = Field(default=[], exclude_if=lambda value: not value)
    """The members that abstained or were not in the run; left out where none."""


class StatementJudgment(BaseModel):
    """One model's votes on one statement of a composite metric."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """The model's name in models.yaml."""
    votes: list[int | None]
    """The k samples' votes on this statement (null where a sample abstained)."""
    reasons: list[str | None]
    """The k samples' reasons for this statement."""
    verdict: int | None
    """Majority of the valid votes (ties per tie_break); null when the model abstains."""
    p_pass: list[float | None] = []
    """Per sample, the probability the model gave to verdict 1 (supported) on this statement;
    null where the sample abstained or the engine gives no probabilities."""
    evidence: list[list[Quote] | None] | None = None
    """A verification with quoted evidence: per sample, its quotes of the context on this
    statement, located (null where the sample abstained)."""


class StatementResult(BaseModel):
    """One statement of a composite metric, with every model's votes on it."""

    model_config = ConfigDict(extra="forbid")

    statement: str
    """The statement, as extracted."""
    score: float | None
    """Mean of the models' verdicts on it (1 supported, 0 not); null when all abstain."""
    models: list[StatementJudgment]
    """Each model's votes and verdict on this statement."""


class ToolCallResult(BaseModel):
    """Tool-call accuracy: how the conversation's tool calls matched the reference calls."""

    model_config = ConfigDict(extra="forbid")

    ordered: bool
    """The matched calls had to come in the reference's order."""
    reference: int
    """Reference calls (``reference_tool_calls``)."""
    made: int
    """Tool calls the conversation made."""
    matched: int
    """Calls matched exactly (name, and arguments as parsed JSON), each at most once."""
    precision: float | None
    """matched / made; null when no call was made."""
    recall: float | None
    """matched / reference; null when no call was expected."""
    missing: list[str]
    """Reference calls no call matched, as ``name(arguments)``."""
    unexpected: list[str]
    """Calls made that matched no reference call, as ``name(arguments)``."""


class RubricResult(BaseModel):
    """A rubric's result on its scale (``RecordResult.score`` is the same normalised to 0..1)."""

    model_config = ConfigDict(extra="forbid")

    levels: int
    """The scale is 1..levels."""
    score: float | None
    """The mean of the models' scale scores; null when every model abstains."""
    expected: float | None
    """The mean of the models' mean expected scores; null when none has one."""
    threshold: float
    """The normalised score (``RecordResult.score``) at which the record passes."""


class RecordResult(BaseModel):
    """The jury's result for one (record, criterion): one line of results.jsonl."""

    model_config = ConfigDict(extra="forbid")

    record_id: str
    """The record's id."""
    metric: str
    """The aspect's or criterion's name."""
    score: float | None
    """Mean of the non-abstaining models' scores; null when all abstain or the record is bad."""
    error: str | None
    """Why the record could not be judged, naming the field; null when it was."""
    confidence: float | None = None
    """Mean of the models' confidences (their mean ``p_pass``); null when none has one."""
    models: list[ModelJudgment]
    """Each model's votes, reasons and verdict (empty when the record is bad)."""
    statements: list[StatementResult] | None = None
    """Composite metrics: the statements judged, each with its per-model votes and verdicts
    (an empty list when the response yields no statements: then the score is null); null
    for single-step metrics."""
    extracted_by: str | None = None
    """Composite metrics: the model that extracted the statements."""
    position_consistency: float | None = None
    """Pairwise metrics: the share of the models with a majority in both orders whose two
    majorities agree; null for other metrics, or when no model has both."""
    tool_calls: ToolCallResult | None = None
    """Tool-call accuracy: the calls matched, missing and unexpected; null for other metrics."""
    rubric: RubricResult | None = None
    """Rubrics: the jury's scores on the scale; null for other metrics."""
    turns_cut: int | None = None
    """Conversation records under ``on_overflow="truncate"``: the most middle turns cut to
    fit a jury model's context (each prompt shows its cut as ``[… N turns cut …]``); null
    when none was cut."""
    stacked: StackedDecision | None = Field(None, exclude_if=lambda value: value is None)
    """A judge profile's stacked jury (``align`` learned how to weigh its members): its probability
    and verdict, beside the score; left out without one."""
    details: dict[str, Any] | None = Field(None, exclude_if=lambda value: value is None)
    """What a kind of metric of its own adds to the record's result (its details model, dumped,
    defined in its module: this file names no kind's, and needs no edit for a new one). Left out
    for the built-in kinds, whose fields above are the results file's format."""


#: The longest line of a results file read back: the bound on every JSON Lines line
#: (:data:`localjury._files.MAX_LINE_BYTES`). A result holds what its judges wrote (reasons,
#: thinking, quotes, abstained outputs), never a record's texts, so a run's line stays far
#: below it; a longer one is read past, never held whole, and refused.
MAX_RESULT_LINE_BYTES = MAX_LINE_BYTES
_RESULTS_HINT = "give the path of a results file (the .jsonl that `localjury run --out` writes)"
#: The fix for a line that is not a result: the file was edited, cut, or is another JSONL file.
NOT_A_RESULT_FIX = "check that the file is one that `localjury run --out` wrote (a run writes it anew)"
_JSON_KINDS = {list: "a JSON array", str: "a JSON string", bool: "JSON true or false", int: "a JSON number",
               float: "a JSON number"}  # fmt: skip


def read_results(path: Path, on_bad: Callable[[int, str], None] | None = None) -> Iterator[RecordResult]:
    """Read a results file back, one bounded line at a time (a regular file only: a FIFO is
    refused, never waited on; see :func:`localjury._files.json_lines`).

    Args:
        path: The results file.
        on_bad: Called with the number of each line that is valid JSON but not a result and
            why, and the reading goes on; by default such a line raises.

    Yields:
        Each line's result, in order.

    Raises:
        ConfigError: The file is not a regular file or cannot be read; a line is over
            :data:`MAX_RESULT_LINE_BYTES` or not valid JSON (the reading stops there); or a line
            is not a result and ``on_bad`` is None. The message names the file and the line.
    """
    for n, value in json_lines(path, "results file", _RESULTS_HINT, MAX_RESULT_LINE_BYTES):
        # JSON's \ud800 escapes parse to lone surrogates, which no terminal or file can take,
        # and pydantic keeps them in strings: a result the run wrote has none.
        why, result = _lone_surrogate(value), None
        if why is None:
            try:
                result = RecordResult.model_validate(value)
            except ValidationError as exc:
                why = _why(value, exc)
        if result is not None:
            yield result
        elif on_bad is None:
            raise ConfigError(f"{path}, line {n} is not a result ({why}); {NOT_A_RESULT_FIX}")
        else:
            on_bad(n, str(why))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: object) -> str | None:
    """Where the first text (a string or a key) with a lone surrogate is in a parsed line, and
    which surrogate; None when there is none."""
    # Each item's place as a chain (its parent's chain, its key): built into words only once found.
    stack: list[tuple[tuple[Any, ...], object]] = [((), value)]
    while stack:
        chain, item = stack.pop()
        if isinstance(item, str) and (found := _SURROGATE.search(item)):
            return f"{_place(chain)}: not valid Unicode (a lone surrogate, \\u{ord(found.group()):04x})"
        if isinstance(item, dict):
            for key, child in item.items():
                if _SURROGATE.search(key):
                    return f"{_place(chain)}: a key that is not valid Unicode (a lone surrogate)"
                stack.append(((chain, key), child))
        elif isinstance(item, list):
            stack.extend(((chain, i), child) for i, child in enumerate(item))
    return None


def _place(chain: tuple[Any, ...]) -> str:
    """A place in a line from its chain of keys (see :func:`_lone_surrogate`), for a message."""
    parts: list[str] = []
    while chain:
        chain, key = chain
        parts.append(str(key))
    return _shown(".".join(reversed(parts)))


def _shown(where: str) -> str:
    """A place in a line, for a message: the line's own text, cut and escaped."""
    where = where.encode("utf-8", "backslashreplace").decode("utf-8") or "the line"
    return where if len(where) <= 80 else where[:80] + "…"


def _why(value: object, exc: ValidationError) -> str:
    """What is wrong with a parsed line, in a few words: what JSON it holds where it is not an
    object, else the first field that does not validate (and how many more)."""
    if not isinstance(value, dict):
        return f"{'JSON null' if value is None else _JSON_KINDS.get(type(value), 'a JSON value')}, not an object"
    first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
    more = exc.error_count() - 1
    where = _shown(".".join(str(part) for part in first["loc"]))
    return f"{where}: {first['msg']}" + (f"; {more} more problem{'s' * (more > 1)}" if more else "")


#: Fields that hold verdict probabilities: floats read from the logits, which a batch of
#: another shape rounds differently (a sharded run, another chunk size).
PROBABILITY_FIELDS = frozenset({"p_pass", "confidence", "expected"})


def same_results(a: Any, b: Any, *, tolerance: float = 1e-4) -> bool:
    """Whether two runs' results (``RecordResult``s, or their dumps) are the same: every vote,
    reason, verdict, score and error equal, and every verdict probability within
    ``tolerance`` (it is the only figure float rounding across batch shapes can move)."""

    def same(x: Any, y: Any, prob: bool) -> bool:
        if isinstance(x, BaseModel):
            x = x.model_dump()
        if isinstance(y, BaseModel):
            y = y.model_dump()
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k], k in PROBABILITY_FIELDS) for k in x)
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(same(u, v, prob) for u, v in zip(x, y, strict=True))
        if prob and isinstance(x, float) and isinstance(y, float):
            return abs(x - y) <= tolerance
        return bool(x == y)

    return same(list(a), list(b), False)
