"""Votes -> per-model verdict -> model score -> final score (DESIGN.md §1). Pure functions.

A vote is 1 (pass), 0 (fail) or ``None`` (an abstention: the sample did not parse or was
cut off). Abstentions never count as votes and are never turned into 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from localjury.types import TieBreak, check_tie_break

Vote = int | None


def model_verdict(votes: Sequence[Vote], tie_break: TieBreak = "fail") -> int | None:
    """Decide one model's verdict from its k samples by majority of the valid votes.

    Args:
        votes: The k samples' votes: 1, 0, or None for an abstained sample.
        tie_break: What an equal split of valid votes gives: ``"fail"`` (0), ``"pass"`` (1)
            or ``"abstain"`` (None).

    Returns:
        1 or 0, or None when the model abstains (no valid vote, or a tie under ``"abstain"``).
    """
    check_tie_break(tie_break)
    valid = [v for v in votes if v is not None]
    if not valid:
        return None
    passes = sum(1 for v in valid if v == 1)
    fails = len(valid) - passes
    if passes != fails:
        return 1 if passes > fails else 0
    return {"fail": 0, "pass": 1, "abstain": None}[tie_break]


def position_consistency(votes_ab: Sequence[Vote], votes_ba: Sequence[Vote]) -> bool | None:
    """Whether a pairwise judge's majorities in the two orders agree once order-corrected.

    Each order's votes are as the judge gave them (1: the response shown as "A"); in order
    AB that is response_a, in order BA response_b, so the orders agree when their majorities
    differ. None when either order has no majority (an even split, or no valid vote).
    """
    ab, ba = model_verdict(votes_ab, "abstain"), model_verdict(votes_ba, "abstain")
    return None if ab is None or ba is None else ab != ba


def model_score(verdict: int | None) -> float | None:
    """Map a verdict to a model score: PASS -> 1.0, FAIL -> 0.0, abstained -> None."""
    return None if verdict is None else float(verdict)


def final_score(scores: Sequence[float | None]) -> float | None:
    """Mean of the scores of the models that did not abstain; None when all abstain."""
    valid = [s for s in scores if s is not None and not math.isnan(s)]
    if not valid:
        return None
    return sum(valid) / len(valid)


def share_supported(verdicts: Sequence[int | None]) -> float | None:
    """A composite metric's model score: the share of decided statements that are supported
    (verdict 1); statements the model abstained on are left out; None when none is decided."""
    decided = [v for v in verdicts if v is not None]
    if not decided:
        return None
    return sum(decided) / len(decided)


def passes(score: float | None, at: float | None = None) -> bool | None:
    """Whether a final score is a pass: a strict jury majority (score > 0.5), or for a rubric's
    normalised score reaching its threshold ``at``; None if no score."""
    if score is None:
        return None
    return score > 0.5 if at is None else score >= at


def vote_share(votes: Sequence[Vote]) -> float | None:
    """The share of the valid votes that pass; None without a valid vote."""
    valid = [v for v in votes if v is not None]
    return sum(valid) / len(valid) if valid else None


def confidence(p_pass: Sequence[float | None]) -> float | None:
    """A model's confidence in a pass: the mean verdict probability (``p_pass``) of its
    samples that have one; None when none has."""
    known = [p for p in p_pass if p is not None]
    return sum(known) / len(known) if known else None


def probability_verdict(conf: float | None, threshold: float = 0.5) -> int | None:
    """A model's verdict under probability scoring: 1 when its confidence is above
    ``threshold``, else 0; None without a confidence."""
    return None if conf is None else int(conf > threshold)
