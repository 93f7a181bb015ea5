"""localjury: judge LLM outputs offline with a jury of local open-weight models.

from localjury import AspectCritic, evaluate

result = evaluate(
    "data.jsonl",
    metrics=[AspectCritic("dated", "The response must include a specific date or year.", strictness=3)],
    models=["smollm2-135m-instruct", "gemma-3-270m"],
    seed=0,
)
result.write("results.jsonl")
"""

from localjury._version import __version__
from localjury.errors import (
    ConfigError,
    EngineError,
    LocaljuryError,
    MissingDependencyError,
    ModelNotAvailableError,
    RecordError,
)
from localjury.metrics import (
    NLI_STATEMENT,
    PREDEFINED_ASPECTS,
    STATEMENT_GENERATOR,
    AspectCritic,
    Checklist,
    CompositeMetric,
    FactualAccuracy,
    Faithfulness,
    GoalAchieved,
    JudgeMetric,
    Judgment,
    Metric,
    PairwiseCritic,
    PromptProgram,
    Rubric,
    ToolCallAccuracy,
    ToolResultFaithfulness,
    VerifyProgram,
)
from localjury.metrics.profile import JudgeProfile, load_profile
from localjury.models.registry import ModelSpec, load_registry
from localjury.records.readers import iter_records
from localjury.records.record import Record
from localjury.results.record_result import ModelJudgment, RecordResult, StatementResult
from localjury.results.summary import RunPlan, Summary
from localjury.run import RunConfig, RunResult, dry_run, evaluate
from localjury.run.cluster import RayCluster

__all__ = [
    "NLI_STATEMENT",
    "PREDEFINED_ASPECTS",
    "STATEMENT_GENERATOR",
    "AspectCritic",
    "Checklist",
    "CompositeMetric",
    "ConfigError",
    "EngineError",
    "FactualAccuracy",
    "Faithfulness",
    "GoalAchieved",
    "JudgeMetric",
    "JudgeProfile",
    "Judgment",
    "LocaljuryError",
    "Metric",
    "MissingDependencyError",
    "ModelJudgment",
    "ModelNotAvailableError",
    "ModelSpec",
    "PairwiseCritic",
    "PromptProgram",
    "RayCluster",
    "Record",
    "RecordError",
    "RecordResult",
    "Rubric",
    "RunConfig",
    "RunPlan",
    "RunResult",
    "StatementResult",
    "Summary",
    "ToolCallAccuracy",
    "ToolResultFaithfulness",
    "VerifyProgram",
    "__version__",
    "dry_run",
    "evaluate",
    "iter_records",
    "load_profile",
    "load_registry",
]
