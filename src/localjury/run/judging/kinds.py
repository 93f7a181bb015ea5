"""Which judging each kind of metric gets: the one table a new kind of metric is added to."""

from __future__ import annotations

from localjury.errors import ConfigError
from localjury.metrics.base import Metric
from localjury.run.config import SamplingConfig
from localjury.run.judging.base import Judging, VerdictJudging
from localjury.run.judging.checklist import ChecklistJudging
from localjury.run.judging.pairwise import PairwiseJudging
from localjury.run.judging.rubric import RubricJudging
from localjury.run.judging.statements import StatementsJudging
from localjury.run.judging.tool_calls import ToolCallJudging

#: The judging of each kind of metric, by the metric's ``kind``.
KINDS: dict[
    str,
    type[VerdictJudging]
    | type[StatementsJudging]
    | type[PairwiseJudging]
    | type[ToolCallJudging]
    | type[ChecklistJudging]
    | type[RubricJudging],
] = {
    VerdictJudging.kind: VerdictJudging,
    StatementsJudging.kind: StatementsJudging,
    PairwiseJudging.kind: PairwiseJudging,
    ToolCallJudging.kind: ToolCallJudging,
    ChecklistJudging.kind: ChecklistJudging,
    RubricJudging.kind: RubricJudging,
}


def judging_for(metric: Metric, sampling: SamplingConfig) -> Judging:
    """The metric's judging, with the run's strictness and tie-break where it sets them.

    Raises:
        ConfigError: The metric is of no kind a run can judge.
    """
    kind = KINDS.get(getattr(metric, "kind", None) or "")
    if kind is None:
        raise ConfigError(
            f"metric {metric.name!r} is a {type(metric).__name__}; "
            "expected a JudgeMetric, CompositeMetric, PairwiseCritic, Rubric or ToolCallAccuracy"
        )
    own = getattr(metric, "calibrators", None)  # a judge profile's fits (an AlignedCritic)
    return kind(
        metric,  # type: ignore[arg-type]
        sampling.strictness or metric.strictness,
        sampling.tie_break or metric.tie_break,
        sampling.scoring,
        sampling.threshold,
        {c.model: c for c in own}
        if own
        else {c.model: c for c in sampling.calibration.calibrators if c.metric == metric.name}
        if sampling.calibration is not None and kind is VerdictJudging
        else {},
    )
