"""What ``localjury align`` measured of each way of asking a model the criterion (prompting, or a
decision head read one way or another): each way's agreement with the labels by cross-validation,
and the model's winner, as a judge profile's ``decisions:`` list holds them
(:mod:`localjury.bench.decision_ways` scores them; :mod:`localjury.votes.heads` holds the heads)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DecisionWay(BaseModel):
    """One way of deciding, as cross-validation scored it against the labels."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    way: str
    """``zero-shot votes``, ``zero-shot calibrated``, ``aligned votes``, ``aligned calibrated``, ``head layer N``,
    ``head layers A+B+C`` (a head on several blocks), either with ``over the response`` (a head on the
    response's mean state) or ``after the reason`` (a head on the state where the judge, having written its
    reason, is about to write its verdict) after it, or ``length only`` (a head on the record's lengths: a
    baseline, never the winner); of graded labels, ``prompted score`` and ``prompted expected score`` (the
    rubric asked) beside the graded heads."""
    kappa: float | None = None
    """Cohen's kappa of its verdicts against the labels (null or left out: undefined, one label only
    or nothing decided); of graded labels, the quadratically weighted kappa of its scores rounded."""
    kappa_ci: list[float] | None = None
    """Its 95% bootstrap interval."""
    auroc: float | None = None
    """The AUROC of its probability (a head's), where it has one."""
    accuracy: float | None = Field(default=None, exclude_if=lambda value: value is None)
    """Of labeled pairs: the share of pairs it picked right (a preference head's, in both orders by
    construction); left out for a yes/no criterion's ways."""
    spearman: float | None = Field(default=None, exclude_if=lambda value: value is None)
    """Of graded labels (a rubric's scores): Spearman's rho of its scores against them, by which a
    graded profile's ways are ranked; left out for the other ways."""
    spearman_ci: list[float] | None = Field(default=None, exclude_if=lambda value: value is None)
    """Its 95% bootstrap interval."""
    records: int = Field(ge=0)
    """Records it decided (a prompting way's abstentions left out)."""


class DecisionReport(BaseModel):
    """How one model is best asked the criterion, by cross-validation on the labels."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: str
    """The model's name in models.yaml."""
    ways: list[DecisionWay] = []
    """Every way measured, best first (by kappa; of graded labels, by Spearman's rho)."""
    winner: str
    """The way the profile uses for this model."""
    why: str
    """Why it won, or why no head was kept."""
    artifact: str | None = None
    """A warning where the record's length alone could explain the best head (``align``'s
    length-only baseline)."""
