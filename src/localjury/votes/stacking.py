"""A jury that weighs its members: their probabilities combined by a logistic regression learned
from labels (``localjury align`` with two models or more), reported beside the jury's mean.

A member's probability of a record (:func:`member_probability`) is what its judgment says: its
decision head's probability where a head decided, else its confidence (mean verdict
probability), else its share of passing votes. The stack reads their log-odds and gives
``p = sigmoid(log_odds . weights + bias)``; the record passes where ``p >= 0.5``.

A record's score stays the mean of its models' scores (DESIGN.md §1): a stacked jury is
reported beside it, never in its place, in each result's ``stacked`` and in the run summary.
``align`` keeps one only where it beats that mean by cross-validation
(:func:`localjury.bench.align_jury.jury_decision`). Pure functions; no engine, no run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, model_validator

from localjury.results.record_result import ModelJudgment, StackedDecision
from localjury.votes.decision_report import DecisionWay
from localjury.votes.voting import vote_share

if TYPE_CHECKING:
    import numpy as np

#: A member probability is clipped to [LOW, 1 - LOW] before its log-odds: a head's 1.0 is finite.
LOW = 1e-4
#: The ways a jury's decision compares: the run's mean of its members' scores, and the stack.
MEAN, STACKED = "jury mean", "stacked jury"


def log_odds(p: float) -> float:
    """``log(p / (1 - p))``, ``p`` clipped to [:data:`LOW`, 1 - :data:`LOW`]."""
    q = min(max(p, LOW), 1 - LOW)
    return math.log(q / (1 - q))


def member_probability(judgment: ModelJudgment | None) -> float | None:
    """A member's probability that the record passes: its head's, else its confidence, else its
    share of passing votes; None where it abstained (or was not in the run)."""
    if judgment is None or judgment.verdict is None:
        return None
    if judgment.head is not None and judgment.head.probability is not None:
        return judgment.head.probability
    return judgment.confidence if judgment.confidence is not None else vote_share(judgment.votes)


class StackedJury(BaseModel):
    """The members' weights, learned from labels."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    members: list[str] = Field(min_length=2)
    """The models it combines, by their names in models.yaml."""
    weights: list[float]
    """Each member's weight on its log-odds, in ``members``' order."""
    bias: float
    c: float = Field(gt=0)
    """The regularisation chosen by grouped cross-validation (scikit-learn's C)."""
    labels: int = Field(ge=0)
    """The labeled records it was fitted on."""

    @model_validator(mode="after")
    def _one_weight_each(self) -> StackedJury:
        if len(set(self.members)) < len(self.members):
            raise ValueError(f"a stacked jury's members are distinct; {self.members} has one twice")
        if len(self.weights) != len(self.members):
            raise ValueError(f"{len(self.weights)} weights for {len(self.members)} members")
        return self

    def probability(self, judgments: Sequence[ModelJudgment]) -> tuple[float | None, list[str]]:
        """The stack's probability that the record passes from its members' judgments, and the
        members that gave none (abstained, or not in the run): then the probability is None."""
        by_model = {j.model: j for j in judgments}
        given = {m: member_probability(by_model.get(m)) for m in self.members}
        p = {m: q for m, q in given.items() if q is not None}
        if len(p) < len(given):
            return None, [m for m in self.members if m not in p]
        z = self.bias + sum(w * log_odds(p[m]) for m, w in zip(self.members, self.weights, strict=True))
        return 1 / (1 + math.exp(-z)) if z > -700 else 0.0, []


class JuryDecision(BaseModel):
    """How the jury's members are best combined, by cross-validation on the labels: the mean a
    run takes, or the stack (kept only where it wins)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    ways: list[DecisionWay]
    """The mean and the stack, each scored on the records every member decided, best first."""
    winner: str
    """:data:`MEAN` or :data:`STACKED`."""
    why: str
    """Why it won."""
    left_out: int = Field(default=0, ge=0)
    """Labeled records left out of the comparison: some member gave no probability."""
    stack: StackedJury | None = None
    """The stack, fitted on every compared record: only where it won."""

    @model_validator(mode="after")
    def _stack_won(self) -> JuryDecision:
        if (self.stack is not None) != (self.winner == STACKED):
            raise ValueError(f"a jury decision holds its stack where the stack won, and only there ({self.winner})")
        return self


def fit_stack(
    probabilities: np.ndarray, gold: Sequence[int], groups: Sequence[str], members: Sequence[str], seed: int = 0
) -> StackedJury:
    """The stack fitted on every record (``probabilities``: a row a record, a column a member), its
    C chosen by grouped cross-validation, its standardisation folded into plain weights."""
    import numpy as np

    from localjury.votes.heads import fit_logistic, linear

    model, chose = fit_logistic(features(probabilities), np.asarray(gold), np.asarray(groups), seed)
    weights, bias = linear(model)
    return StackedJury(members=list(members), weights=[float(w) for w in weights], bias=bias, c=chose["C"],
                       labels=len(gold))  # fmt: skip


def features(probabilities: np.ndarray) -> np.ndarray:
    """The members' log-odds (:func:`log_odds`, vectorised)."""
    import numpy as np

    q = np.clip(np.asarray(probabilities, dtype=float), LOW, 1 - LOW)
    return np.log(q / (1 - q))


def stacked_of(stack: StackedJury | None, judgments: Sequence[ModelJudgment]) -> StackedDecision | None:
    """A record's stacked jury from its members' judgments, or None without a stack."""
    if stack is None:
        return None
    p, missing = stack.probability(judgments)
    return StackedDecision(probability=p, verdict=None if p is None else int(p >= 0.5), missing=missing)
