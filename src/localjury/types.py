"""The values that cross from one stage to another: a leaf module, imported by the metrics,
the engines, the store and the run alike, so that none of them imports another for a type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal, TypedDict, get_args

from pydantic import BeforeValidator

#: JSON-schema keyword that marks an array of strings as quotes: an engine that constrains by a
#: prompt's quotable texts (a :class:`~localjury.engines.base.GenerateCall`'s ``quotes``) lets each
#: item be only an exact span of one of them (:mod:`localjury.engines.constrain.quotes`). Ignored by
#: JSON-schema validators.
QUOTE_KEY = "x-localjury-quote"


class Message(TypedDict):
    """One chat turn."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one batched call."""

    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    first_sample: int = 0
    """Index of the first sample drawn: a call for samples m..k-1 of a prompt (adaptive
    strictness draws them after the first m) sets it to m, so that an engine that seeds per
    (run seed, prompt, sample index) draws the same samples as one call for all k."""


@dataclass(frozen=True)
class Completion:
    """One sampled output."""

    text: str
    n_tokens: int
    """Output tokens generated, the end-of-sequence token excluded."""
    finished: bool
    """True when the model ended the output itself; False when max_tokens cut it off."""
    verdict_probs: tuple[float, ...] | None = None
    """At each place the output wrote a 0/1 verdict, in order, the probability the model gave
    to 1 there, renormalised over the verdict tokens the schema allowed (its distribution at
    temperature 1, before top-p); for a rubric's score, the probability of each level of its
    scale (1..N, N figures); for a request a decision head decides, the head's output (its
    probability, a graded head's score normalised to 0..1). None when the engine cannot tell (see each engine)."""
    thinking: str | None = None
    """What the judge thought before its answer (``text``), under a thinking budget, or as a
    server's reasoning parser separated it; None where it did not think."""


@dataclass(frozen=True)
class Usage:
    """What one engine call did with its prompts' tokens."""

    prompt_tokens: int
    """Tokens of the call's prompts, as the engine encoded them, each prompt once (its n samples
    share it)."""
    reused_tokens: int = 0
    """Of those, tokens the engine did not compute because it reused their KV cache: the prefix
    every prompt of the call shares, prefilled once (transformers, llamacpp), or vLLM's
    prefix-cache hits."""


#: What a stored generation is: the samples, or why the prompt could not run at all.
Stored = list[Completion] | str

#: The delimiters of a reasoning model's thinking block (Qwen3, QwQ, the DeepSeek-R1 distills,
#: Phi-4-reasoning), in a record's response and in a thinking judge's output.
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
#: Tokens the close of a thinking block and the blank space after it may take beyond its budget:
#: at most one a byte of ``\n</think>`` and a few more.
THINK_CLOSE_TOKENS = 16


def thinking_tokens(budget: int) -> int:
    """The most tokens a sample with a thinking ``budget`` writes beside its answer: the
    thinking, its close and the blank space after it."""
    return budget + 2 * THINK_CLOSE_TOKENS


ProgressFn = Callable[[int], None]
"""Called with the number of prompts just completed."""


def _thinking_off(value: object) -> object:
    # `off` (YAML reads `thinking: off` as False) is 0: no thinking.
    return 0 if value is False or value == "off" else value


Thinking = Annotated[int | None, BeforeValidator(_thinking_off)]
"""A thinking budget setting (models.yaml's ``thinking``, ``--thinking``): tokens, 0 or ``off``
for none, None for the entry's own."""


TieBreak = Literal["fail", "pass", "abstain"]
"""What an even split of a model's valid votes gives (:func:`localjury.votes.voting.model_verdict`)."""
TIE_BREAKS: tuple[str, ...] = get_args(TieBreak)

Scoring = Literal["votes", "probability"]
"""How a model's score is made: the majority of its votes, or its confidence."""
SCORINGS: tuple[str, ...] = get_args(Scoring)

Ungrounded = Literal["flag", "abstain"]
"""What a sample whose reason cites what the record does not hold becomes
(:meth:`~localjury.metrics.judging.BaseJudging.held_to`): flagged, its vote kept; or an abstention."""
UNGROUNDED: tuple[str, ...] = get_args(Ungrounded)

#: What a prompt longer than the model's context does: the record's error for that model, or
#: its conversation turns and retrieved contexts cut until it fits (:mod:`~localjury.metrics.prompt_fit`).
OverflowPolicy = Literal["error", "truncate"]
OVERFLOW_POLICIES: tuple[str, ...] = get_args(OverflowPolicy)

#: Where a decision head reads a judge prompt's hidden states: at its last token (``last``), or
#: averaged over the tokens of the record's response (``response``: the text of the prompt's last
#: ``<response>`` block).
Pooling = Literal["last", "response"]


def frame_span(prompt: str, tag: str) -> tuple[int, int]:
    """The characters of the text inside ``prompt``'s last ``<tag>`` block (each tag on a line
    of its own, as a metric frames a record's field): the record's own, since a prompt shows its
    worked examples before the record, and record text cannot open or close a frame tag (the
    :class:`~localjury.metrics.neutralise.Neutraliser` breaks them).

    Raises:
        ValueError: The prompt has no such block.
    """
    opening, closing = f"<{tag}>\n", f"\n</{tag}>"
    start = prompt.rfind(opening)
    end = prompt.find(closing, start) if start >= 0 else -1
    if end < 0:
        raise ValueError(f"the prompt has no <{tag}> block")
    return start + len(opening), end


def check_tie_break(value: str) -> TieBreak:
    """Return ``value`` as a tie-break policy, or raise ValueError naming the choices."""
    if value not in TIE_BREAKS:
        raise ValueError(f"unknown tie-break policy {value!r}; expected one of: {', '.join(TIE_BREAKS)}")
    return value  # type: ignore[return-value]
