"""The registry of the metrics a run knows: each kind of metric's judging (:data:`KINDS`) and
the metrics known by name (:data:`NAMED_METRICS`, what ``--metric`` takes and its help lists).

Both are plain tables, written out here: adding a kind is its module and its line in
:data:`KINDS`; nothing registers itself on import. A metric of a kind outside the table (a
user's, as ``examples/unsure_kind.py``) names its judging class itself, in its ``judging``
class attribute, and a user's module names its metrics for ``--metric`` in a ``METRICS`` table
(``localjury run --metric-module``, :func:`localjury.metrics.spec.metric_module`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from localjury.errors import ConfigError
from localjury.metrics.agent import GoalAchieved, ToolResultFaithfulness
from localjury.metrics.aspect_critic import VerdictJudging
from localjury.metrics.base import JudgeMetric, Metric
from localjury.metrics.checklist import ChecklistCriterion, ChecklistJudging
from localjury.metrics.composite import CompositeMetric, StatementsJudging
from localjury.metrics.faithfulness import FactualAccuracy, Faithfulness
from localjury.metrics.graded_critic import GradedCritic, GradedJudging
from localjury.metrics.head_critic import HeadCritic, HeadJudging
from localjury.metrics.judging import BaseJudging
from localjury.metrics.pairwise import PairwiseCritic, PairwiseJudging
from localjury.metrics.preference_critic import PreferenceCritic, PreferenceJudging
from localjury.metrics.protocol import Judging, JudgingSettings
from localjury.metrics.rubric import PREDEFINED_RUBRICS, Rubric, RubricJudging, predefined_rubric
from localjury.metrics.tool_calls import ToolCallAccuracy, ToolCallJudging
from localjury.votes.calibration import fits_by_metric


@dataclass(frozen=True)
class Kind:
    """A kind of metric: the metric class that has it (its ``kind``), and how a run judges it."""

    metric: type[Metric]
    judging: type[BaseJudging]


#: Each kind of metric, by the metric's ``kind``.
KINDS: dict[str, Kind] = {
    "judge": Kind(JudgeMetric, VerdictJudging),  # the Aspect Critic, an aligned critic, goal_achieved
    "head": Kind(HeadCritic, HeadJudging),  # a judge profile's critic whose models decide by their heads
    "rubric": Kind(Rubric, RubricJudging),
    "graded": Kind(GradedCritic, GradedJudging),  # a graded profile's rubric: models decide by graded heads
    "pairwise": Kind(PairwiseCritic, PairwiseJudging),
    "preference": Kind(PreferenceCritic, PreferenceJudging),  # a pairwise profile's: models decide by preference heads
    "checklist": Kind(ChecklistCriterion, ChecklistJudging),  # one criterion of a checklist
    "composite": Kind(CompositeMetric, StatementsJudging),  # statements extracted, then verified
    "tool_calls": Kind(ToolCallAccuracy, ToolCallJudging),  # computed: no model asked
}


@dataclass(frozen=True)
class Named:
    """A metric known by name: how it is made, and what ``--metric``'s help says of it."""

    make: Callable[..., Metric]
    needs: str = ""
    """The record fields it needs beyond a response, for the help; none where it needs none."""
    takes_evidence: bool = False
    """It takes ``evidence`` (``--evidence``: a composite's verifications quote the contexts)."""

    def __call__(self, **options: Any) -> Metric:
        """The metric, made with ``options``."""
        return self.make(**options)


def _rubric(name: str) -> Named:
    return Named(partial(predefined_rubric, name), "reference" if PREDEFINED_RUBRICS[name][2] else "")


#: The metrics known by name (``--metric``), in the order its help lists them.
NAMED_METRICS: dict[str, Named] = {
    "faithfulness": Named(Faithfulness, "retrieved_contexts", takes_evidence=True),
    "factual_accuracy": Named(FactualAccuracy, "reference", takes_evidence=True),
    **{name: _rubric(name) for name in PREDEFINED_RUBRICS},
    "goal_achieved": Named(GoalAchieved, "messages; reference, the goal"),
    "tool_call_accuracy": Named(ToolCallAccuracy, "messages, reference_tool_calls"),
    "tool_call_accuracy_any_order": Named(
        partial(ToolCallAccuracy, "tool_call_accuracy_any_order", ordered=False), "messages, reference_tool_calls"
    ),
    "tool_result_faithfulness": Named(ToolResultFaithfulness, "messages"),
}


def named_help(named: dict[str, Named] | None = None) -> str:
    """What ``--metric``'s help lists: each named metric, with the record fields it needs."""
    names = [f"{n} (needs {e.needs})" if e.needs else n for n, e in (named or NAMED_METRICS).items()]
    return "A metric by name (repeatable): " + ", ".join(names) + "; see `localjury metrics`."


def judging_for(metric: Metric, sampling: JudgingSettings) -> Judging:
    """The metric's judging (its kind's in :data:`KINDS`, else the one its class names), with
    the run's strictness and tie-break where it sets them, and each model's calibration: a
    judge profile's own fits, else a calibration file's fits of this metric (a judge metric's:
    calibration fits yes/no verdicts).

    Raises:
        ConfigError: The metric is of no kind a run can judge.
    """
    kind = KINDS.get(metric.kind or "")
    judging: type[BaseJudging] | None = kind.judging if kind is not None else metric.judging
    if judging is None:
        names = sorted(k.metric.__name__ for k in KINDS.values())
        raise ConfigError(
            f"metric {metric.name!r} is a {type(metric).__name__}; expected a {', '.join(names[:-1])} or "
            f"{names[-1]}, or a metric whose class names its `judging`"
        )
    calibration = sampling.calibration
    if metric.calibrators:  # a judge profile's fits (an AlignedCritic)
        calibrators = {c.model: c for c in metric.calibrators}
    elif calibration is not None and metric.kind == "judge":
        calibrators = dict(fits_by_metric(calibration.calibrators).get(metric.name, {}))
    else:
        calibrators = {}
    return judging(
        metric,
        sampling.strictness or metric.strictness,
        sampling.tie_break or metric.tie_break,
        sampling.scoring,
        sampling.threshold,
        calibrators,
        sampling.with_reasons,
        sampling.ungrounded,
    )
