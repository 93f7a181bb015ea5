"""A reasoning model's thinking in a record's text: the ``<think>…</think>`` block that Qwen3, QwQ,
the DeepSeek-R1 distills and Phi-4-reasoning write before their answer. A metric judges the
answer alone unless it asks to see the thinking (``thinking=True``)."""

from __future__ import annotations

import re
from itertools import islice
from typing import NamedTuple

from localjury.errors import RecordError
from localjury.records.conversation import ChatMessage
from localjury.records.record import Record
from localjury.types import THINK_CLOSE, THINK_OPEN

#: Blank space, as ``str.strip`` removes it (``\s`` matches what ``str.isspace`` holds).
_BLANK = re.compile(r"\s*")
#: A close and the blank space after it; a run of them. Possessive (``*+``): matched once, with
#: no state kept to backtrack into, whatever the run's length.
_CLOSE_BLANK = re.compile(rf"{re.escape(THINK_CLOSE)}\s*+")
_CLOSES = re.compile(rf"(?:{re.escape(THINK_CLOSE)}\s*+)*+")


class Split(NamedTuple):
    """A text cut into its thinking and its answer."""

    thinking: str | None
    """What was written between the tags (None: the text has no thinking block)."""
    answer: str
    """The rest: the text after the block, less the blank space that follows it."""
    start: int
    """Where the answer starts in the text (0 when there is no thinking)."""
    closed: bool
    """Whether the block was closed (an unclosed one ran out of tokens: no answer follows)."""


def split_thinking(text: str) -> Split:
    """Cut ``text`` into its leading thinking block and its answer.

    Only a block that opens the text (after blank space) counts, and it ends at the first
    ``</think>``: a model closes its thinking once, so what follows that close is the answer,
    even if it mentions the tags (the judge is never kept from a part of the answer). The one
    exception is a block with more openings in it: the closes that follow its first one at
    once (blank space between), as many as those openings, are its own (``<think><think>x
    </think></think>answer`` is the answer ``answer``), never a word of the answer. A text
    without an opening ``<think>`` is all answer: a template that writes the opening tag into
    the prompt (the R1 distills') leaves its outputs with only the close, and those are judged
    whole unless the tag is put back.

    Linear in the text's length and in constant memory beside the parts it returns, whatever
    its tags: the text is searched a bounded number of times, a run of closes matched once.
    """
    lead = _past(_BLANK, text, 0)
    if not text.startswith(THINK_OPEN, lead):
        return Split(None, text, 0, True)
    inner = lead + len(THINK_OPEN)
    end = text.find(THINK_CLOSE, inner)
    if end < 0:
        return Split(text[inner:], "", len(text), False)
    nested = text.count(THINK_OPEN, inner, end)
    close, at = end, _past(_BLANK, text, end + len(THINK_CLOSE))
    run = _past(_CLOSES, text, at) if nested else at
    if run > at and text.count(THINK_CLOSE, at, run) <= nested:  # each the close of a nested opening
        close, at = text.rfind(THINK_CLOSE, at, run), run
    elif run > at:  # more closes than nested openings: the block takes as many as it opened
        for own in islice(_CLOSE_BLANK.finditer(text, at, run), nested):
            close, at = own.start(), own.end()
    return Split(text[inner:close], text[at:], at, True)


def _past(pattern: re.Pattern[str], text: str, at: int) -> int:
    """Where the match of ``pattern`` (one that matches the empty string too) at ``at`` ends."""
    found = pattern.match(text, at)
    assert found is not None
    return found.end()


def answers_only(record: Record, metric: str) -> Record:
    """``record`` with each response (``response``, ``response_a``, ``response_b``, assistant
    turns) cut to its answer; the record itself when none holds a thinking block.

    Raises:
        RecordError: A response with thinking and no answer after it (a never-closed block:
            its model's token budget ran out), naming the field.
    """
    update: dict[str, object] = {}
    for field in ("response", "response_a", "response_b"):
        value = getattr(record, field)
        if value is not None and THINK_OPEN in value:
            split = split_thinking(value)
            if split.thinking is None:
                continue
            if not split.answer.strip():
                raise RecordError(_no_answer(metric, split), record_id=record.id, field=field)
            update[field] = split.answer
    if record.messages is not None and any(_thinks(m) for m in record.messages):
        turns = []
        for i, message in enumerate(record.messages):
            if not _thinks(message):
                turns.append(message)
                continue
            split = split_thinking(message.content or "")
            if not split.closed or not (split.answer.strip() or message.tool_calls):
                raise RecordError(_no_answer(metric, split), record_id=record.id, field=f"messages[{i}]")
            turns.append(message.model_copy(update={"content": split.answer or None}))
        update["messages"] = turns
    return record.model_copy(update=update) if update else record


def _thinks(message: ChatMessage) -> bool:
    return message.role == "assistant" and message.content is not None and THINK_OPEN in message.content


def _no_answer(metric: str, split: Split) -> str:
    if split.closed:
        why = "nothing follows its </think>"
    else:
        why = "its <think> block is never closed (the model's token budget ran out?)"
    return (
        f"metric {metric!r} judges the answer after a response's thinking, and this one has none: {why}; "
        "give the metric thinking=True to judge the thinking too"
    )
