"""Judge metrics: single-step (the Aspect Critic, or your own), composite (Faithfulness),
pairwise, and the agent-run metrics (goal achieved, tool-call accuracy, tool-result faithfulness).

Each kind of metric is one module, its metric and its judging together (``aspect_critic``,
``head_critic``, ``rubric``, ``pairwise``, ``checklist``, ``composite``, ``tool_calls``);
:mod:`.judging` holds :class:`BaseJudging`, the four members a kind writes and their defaults,
:mod:`.protocol` what a kind and the run hand each other (requests, judgments, the ``Judging`` protocol),
:mod:`.kinds` the registry of the kinds and of the metrics known by name, :mod:`.prompt_fit`
the fitting of their prompts to a model's context."""

from localjury.metrics.agent import AGENT_METRICS, GoalAchieved, ToolResultFaithfulness
from localjury.metrics.aspect_critic import PREDEFINED_ASPECTS, AspectCritic, CriterionInput
from localjury.metrics.base import JudgeMetric, Judgment, Message, Metric, Parsed, ParsedSample, PromptProgram
from localjury.metrics.checklist import Checklist, ChecklistCriterion
from localjury.metrics.composite import (
    CompositeMetric,
    Statements,
    StatementVerdict,
    StatementVerdicts,
    VerifyProgram,
)
from localjury.metrics.faithfulness import (
    COMPOSITE_METRICS,
    NLI_STATEMENT,
    STATEMENT_GENERATOR,
    FactualAccuracy,
    Faithfulness,
    StatementsInContext,
    StatementSource,
)
from localjury.metrics.judging import BaseJudging
from localjury.metrics.pairwise import PairInput, PairwiseCritic, Preference
from localjury.metrics.protocol import Extraction, Judged, Request
from localjury.metrics.rubric import PREDEFINED_RUBRICS, Rubric, predefined_rubric
from localjury.metrics.tool_calls import ToolCallAccuracy

__all__ = [
    "AGENT_METRICS",
    "COMPOSITE_METRICS",
    "NLI_STATEMENT",
    "PREDEFINED_ASPECTS",
    "PREDEFINED_RUBRICS",
    "STATEMENT_GENERATOR",
    "AspectCritic",
    "BaseJudging",
    "Checklist",
    "ChecklistCriterion",
    "CompositeMetric",
    "CriterionInput",
    "Extraction",
    "FactualAccuracy",
    "Faithfulness",
    "GoalAchieved",
    "JudgeMetric",
    "Judged",
    "Judgment",
    "Message",
    "Metric",
    "PairInput",
    "PairwiseCritic",
    "Parsed",
    "ParsedSample",
    "Preference",
    "PromptProgram",
    "Request",
    "Rubric",
    "StatementSource",
    "StatementVerdict",
    "StatementVerdicts",
    "Statements",
    "StatementsInContext",
    "ToolCallAccuracy",
    "ToolResultFaithfulness",
    "VerifyProgram",
    "predefined_rubric",
]
