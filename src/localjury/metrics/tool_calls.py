"""Tool-call accuracy: the calls an agent run made against the calls it was expected to make,
matched exactly, without a judge.

A call matches a reference call when their names are equal and their arguments are equal as
parsed JSON (:func:`json_equal`): the order of an object's keys does not count, a number is
a number (``1`` equals ``1.0``, as JSON has one number type), ``true`` is not ``1``, and a
list keeps its order. Each call matches at most one reference call.

- ``ordered=True`` (the default, as RAGAS's ``ToolCallAccuracy``): the matched calls must be
  in the reference's order; the matched count is the longest common subsequence of the two
  lists of calls.
- ``ordered=False``: any order; the matched count is the size of the two lists' multiset
  intersection (the equality is an equivalence, so a greedy match is a largest one).

Score = F1 of the matched calls: precision = matched / calls made, recall = matched /
reference calls, F1 = 2 matched / (made + reference). F1 rather than the share of the
reference matched (recall alone) because recall does not see extra calls (an agent that calls
every tool twice would score 1.0), and precision alone does not see missing ones; F1 is
RAGAS's ``ToolCallF1`` made order-aware. No calls expected and none made scores 1.0. The
precision, recall and the unmatched calls on both sides are in the result's ``tool_calls``.

Arguments are compared exactly: a free-text argument worded differently from the reference
(``"weather in Paris"`` against ``"Paris weather"``) does not match. A judged comparison of
such arguments is not part of this metric (a ``JudgeMetric`` over the conversation with the
reference calls as a criterion can ask it).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from localjury.errors import RecordError
from localjury.metrics.base import Metric
from localjury.metrics.judging import BaseJudging
from localjury.metrics.protocol import Extraction, Judged, Juror
from localjury.records.conversation import FunctionCall, tool_calls_made
from localjury.records.record import Record
from localjury.results.record_result import RecordResult, ToolCallResult


def json_equal(a: Any, b: Any) -> bool:
    """Whether two parsed JSON values are equal: objects whatever their key order, numbers by
    value (``1 == 1.0``), booleans only to booleans, lists item by item in order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def json_key(value: Any) -> Hashable:
    """A hashable form of a parsed JSON value: two values have equal keys exactly where
    :func:`json_equal` holds (a NaN, equal to nothing, gets a key of its own), so that calls are
    matched through a dict rather than each against every other."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        # Python's == and hash agree across int and float (1 == 1.0, exactly for large ones).
        return ("number", value) if value == value else ("nan", object())
    if isinstance(value, dict):
        return ("object", frozenset((k, json_key(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(json_key(v) for v in value))
    return (type(value).__name__, value)


@dataclass(frozen=True)
class _Call:
    """A call with its arguments parsed, for matching."""

    name: str
    arguments: Any
    text: str
    key: Hashable = field(compare=False)

    @classmethod
    def of(cls, call: FunctionCall) -> _Call:
        arguments = json.loads(call.arguments)
        return cls(call.name, arguments, f"{call.name}({call.arguments})", (call.name, json_key(arguments)))

    def matches(self, other: _Call) -> bool:
        return self.name == other.name and json_equal(self.arguments, other.arguments)


@dataclass(frozen=True)
class CallMatch:
    """How the calls made matched the reference calls."""

    reference: int
    """Reference calls."""
    made: int
    """Calls the conversation made."""
    matched: int
    """Calls matched (each call at most once)."""
    missing: list[str]
    """Reference calls no call matched, as ``name(arguments)``."""
    unexpected: list[str]
    """Calls made that matched no reference call, as ``name(arguments)``."""

    @property
    def precision(self) -> float | None:
        """Matched / made; None when no call was made."""
        return self.matched / self.made if self.made else None

    @property
    def recall(self) -> float | None:
        """Matched / reference; None when no call was expected."""
        return self.matched / self.reference if self.reference else None

    @property
    def f1(self) -> float:
        """2 matched / (made + reference); 1.0 when none was expected and none made."""
        total = self.made + self.reference
        return 2 * self.matched / total if total else 1.0


def match_calls(reference: list[FunctionCall], made: list[FunctionCall], *, ordered: bool = True) -> CallMatch:
    """Match the calls ``made`` against the ``reference`` calls (see the module's docstring)."""
    ref = [_Call.of(c) for c in reference]
    act = [_Call.of(c) for c in made]
    pairs = _in_order(ref, act) if ordered else _any_order(ref, act)
    ref_matched = {i for i, _ in pairs}
    act_matched = {j for _, j in pairs}
    return CallMatch(
        reference=len(ref),
        made=len(act),
        matched=len(pairs),
        missing=[c.text for i, c in enumerate(ref) if i not in ref_matched],
        unexpected=[c.text for j, c in enumerate(act) if j not in act_matched],
    )


def _in_order(ref: list[_Call], act: list[_Call]) -> list[tuple[int, int]]:
    """A longest common subsequence of the two lists, as (reference index, made index) pairs."""
    n, m = len(ref), len(act)
    longest = [[0] * (m + 1) for _ in range(n + 1)]  # longest[i][j]: of ref[i:] and act[j:]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if ref[i].matches(act[j]):
                longest[i][j] = longest[i + 1][j + 1] + 1
            else:
                longest[i][j] = max(longest[i + 1][j], longest[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if ref[i].matches(act[j]) and longest[i][j] == longest[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif longest[i + 1][j] >= longest[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _any_order(ref: list[_Call], act: list[_Call]) -> list[tuple[int, int]]:
    """Each reference call matched to the first call made that matches it and is still free."""
    free: dict[Hashable, deque[int]] = {}  # the calls made, by key, each key's in order
    for j, call in enumerate(act):
        free.setdefault(call.key, deque()).append(j)
    pairs = []
    for i, call in enumerate(ref):
        waiting = free.get(call.key)
        if waiting:
            pairs.append((i, waiting.popleft()))
    return pairs


class ToolCallAccuracy(Metric):
    """Did the agent make the expected tool calls, with the expected arguments?

    Computed, not judged: the conversation's tool calls (every assistant turn's, in order)
    are matched exactly against the record's ``reference_tool_calls`` (see
    :func:`match_calls`); the score is the F1 of the matched calls, the same for every model
    (no model is asked, so nothing is sampled, voted or abstained). A record without
    ``reference_tool_calls`` or without ``messages`` is that record's error, naming the field.
    A score above 0.5 passes (the summary's pass rate, ``--fail-under``).

    Args:
        name: The metric name written in results (default ``tool_call_accuracy``).
        ordered: The matched calls must come in the reference's order (default); False
            matches them in any order.
    """

    kind: ClassVar[str | None] = "tool_calls"

    def __init__(self, name: str = "tool_call_accuracy", *, ordered: bool = True) -> None:
        super().__init__(name)
        self.ordered = ordered

    @property
    def description(self) -> str:
        order = "in the reference's order" if self.ordered else "in any order"
        return f"F1 of the tool calls matching reference_tool_calls exactly (name and JSON arguments), {order}"

    def match(self, record: Record) -> CallMatch:
        """Match the record's calls against its reference calls.

        Raises:
            RecordError: The record has no ``reference_tool_calls`` or no ``messages``.
        """
        if record.reference_tool_calls is None:
            raise RecordError(
                f"metric {self.name!r} needs this field: the calls the agent is expected to make, "
                '[{"name": ..., "arguments": {...}}, ...] (an empty list when none)',
                record_id=record.id,
                field="reference_tool_calls",
                location=record._location,
            )
        if record.messages is None:
            raise RecordError(
                f"metric {self.name!r} needs this field: the conversation whose tool calls it checks",
                record_id=record.id,
                field="messages",
                location=record._location,
            )
        return match_calls(record.reference_tool_calls, tool_calls_made(record.messages), ordered=self.ordered)

    def __repr__(self) -> str:
        return f"ToolCallAccuracy(name={self.name!r}, ordered={self.ordered})"


class ToolCallJudging(BaseJudging):
    """A :class:`ToolCallAccuracy`: no request to any model (it writes no ``requests``, so no
    model is loaded for it and no sample is stored); the record's result is the exact match of
    its calls, its score their F1. A record lacking the reference calls or the conversation is
    its error, found before any model loads."""

    metric: ToolCallAccuracy

    def first_step(self, record: Record, first: Juror) -> Extraction | None:
        self.metric.match(record)  # raises the record's error
        return None

    def combine(self, record: Record, context: Any, judged: list[Judged]) -> RecordResult:
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
