"""Where a judge writes its decision (:class:`Decision`), and verdict probabilities read after
the fact from the top log-probabilities an engine returns with each output token (vLLM's
``logprobs``, an OpenAI-compatible server's ``top_logprobs``), for the engines whose decode
loop localjury does not run.

Every figure kept is a finite probability: a decision whose numbers are not (a log-probability
that is NaN, +inf or above 0, masses that are not finite or add up to nothing) gives no
figures, as a decision with no known alternative does, so that no NaN reaches a stored
probability or a score.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: How many alternatives per output token an engine is asked for; a verdict digit and its
#: opposite are nearly always among them.
TOP_LOGPROBS = 20
#: How far above 0 a log-probability may be and still count as one (float rounding of a
#: probability of 1); anything higher is no log-probability.
LOGPROB_SLACK = 1e-4


@dataclass(frozen=True)
class Decision:
    """Where a judge's output writes its decision: the JSON key, and the first character of
    each value it can write. A yes/no decision has two, the passing value's first (its figure
    is the probability of passing); a rubric's score has one per level of its scale, in order
    (its figure is the probability of each level)."""

    key: str
    choices: tuple[str, ...]

    @property
    def passing(self) -> str:
        """The first character of the passing value (of a yes/no decision)."""
        return self.choices[0]

    @property
    def failing(self) -> str:
        """The first character of the failing value (of a yes/no decision)."""
        return self.choices[1]

    @property
    def graded(self) -> bool:
        """A scale's score (more than two values), not a yes/no decision."""
        return len(self.choices) > 2

    def choice(self, text: str) -> int | None:
        """Which value a token writes (its index in ``choices``), judged by its text after any
        spaces and an opening quote; None for a token that writes none."""
        first = text.lstrip(' "')[:1]
        return self.choices.index(first) if first and first in self.choices else None

    def side(self, text: str) -> str | None:
        """Which side a token of a yes/no decision writes, ``"pass"`` or ``"fail"``; None for a
        token that writes neither."""
        index = self.choice(text)
        return None if index is None else "pass" if index == 0 else "fail" if index == 1 else None

    def figures(self, masses: Sequence[float]) -> tuple[float, ...]:
        """The figures kept at one decision from each value's probability mass there: the
        probability of passing (one figure) for a yes/no decision, the distribution over the
        scale's levels for a score; both renormalised over the values the schema allowed.
        None (an empty tuple) where a mass is not a finite number of at least 0, or where
        the values' masses add up to nothing."""
        if not all(math.isfinite(m) and m >= 0 for m in masses):
            return ()
        kept = masses if self.graded else masses[:2]
        total = sum(kept)
        if not total > 0:
            return ()
        return tuple(m / total for m in kept) if self.graded else (kept[0] / total,)


#: The Aspect Critic's ``"verdict": 1`` (pass) or ``0``.
VERDICT = Decision("verdict", ("1", "0"))
#: The Pairwise Critic's ``"preferred": "A"`` (the response shown first; "pass") or ``"B"``.
PREFERENCE = Decision("preferred", ("A", "B"))
#: The key of a rubric's score (:mod:`localjury.metrics.rubric`).
SCORE_KEY = "score"


def score_decision(levels: int) -> Decision | None:
    """A rubric's score on a scale of 1..``levels``: one decision while every level is one
    digit (up to 9); None for 10 levels, where "1" begins both 1 and 10, so that no single
    token decides the score and its probabilities are not read."""
    return Decision(SCORE_KEY, tuple(str(v) for v in range(1, levels + 1))) if 2 <= levels <= 9 else None


def decision_of(schema: dict[str, Any]) -> Decision | None:
    """The decision a metric's output schema asks for: a rubric's score where it has a
    ``score`` property (None for a 10-level scale, see :func:`score_decision`), a preference
    between A and B where it has a ``preferred`` property, else 0/1 verdicts (also those
    inside a composite's list)."""
    properties = schema.get("properties") or {}
    if SCORE_KEY in properties:
        return score_decision(len(properties[SCORE_KEY].get("enum") or ()))
    return PREFERENCE if PREFERENCE.key in properties else VERDICT


def verdict_probs_from_top(
    tokens: Sequence[str], tops: Sequence[Sequence[tuple[str, float]]], decision: Decision | None = VERDICT
) -> tuple[float, ...]:
    """The figures of each decision an output wrote: the probability of passing for a yes/no
    decision, the distribution over the levels for a rubric's score.

    A decision is written by the token after ``"<key>":`` (and any space or opening quote)
    whose text starts with one of the decision's values; the figures there come from the mass
    of the alternatives that write each value, renormalised over those that write any, among
    the top alternatives the engine returned (raw log-probabilities: the model's distribution
    at temperature 1). A decision where one of those is not a log-probability (NaN, +inf,
    above :data:`LOGPROB_SLACK`) gives no figures; -inf is a probability of 0.

    Args:
        tokens: The text of each output token, in order.
        tops: For each output token, (text, log-probability) of the top alternatives.
        decision: What the output decides (:data:`VERDICT`, :data:`PREFERENCE`, a score);
            None reads nothing.
    """
    if decision is None:
        return ()
    key = re.compile(rf'"{re.escape(decision.key)}"\s*:\s*"?$')
    text = ""
    out: list[float] = []
    for token, top in zip(tokens, tops, strict=True):
        if decision.choice(token) is not None and key.search(text[-40:]):
            chosen = [(decision.choice(alt), lp) for alt, lp in top]
            known = [(c, lp) for c, lp in chosen if c is not None]
            # NaN fails every comparison, this one too.
            if known and all(lp <= LOGPROB_SLACK for _, lp in known):
                peak = max(lp for _, lp in known)
                masses = [0.0] * len(decision.choices)
                for c, lp in known:
                    masses[c] += math.exp(lp - peak) if peak > -math.inf else 0.0
                out.extend(decision.figures(masses))
        text += token
    return tuple(out)
