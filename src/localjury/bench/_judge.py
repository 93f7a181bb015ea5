"""What a bench judges: the metric (a composite, an aspect or a criterion, pointwise or in both
orders of a pair), and whether a data set is judged in pairs."""

from __future__ import annotations

from pathlib import Path

from localjury.bench.config import BenchMode
from localjury.bench.formats import FORMATS, first_json_line
from localjury.errors import ConfigError
from localjury.metrics import COMPOSITE_METRICS, PREDEFINED_ASPECTS, AspectCritic
from localjury.metrics.base import Metric
from localjury.metrics.pairwise import PairwiseCritic
from localjury.metrics.spec import parse_metric
from localjury.results.record_result import ModelJudgment
from localjury.votes.voting import vote_share


def resolve_metric(
    spec: str | None,
    fmt: str,
    strictness: int,
    *,
    verdict_first: bool = False,
    pairwise: bool = False,
    evidence: bool = False,
) -> Metric:
    """The metric to benchmark: a composite (``faithfulness``), a predefined aspect, or
    ``NAME=criterion text``; by default the format's own criterion. ``verdict_first`` asks
    the Aspect Critic for its verdict before its reason, ``evidence`` for quoted evidence
    first (and a composite's verifications for quotes of the contexts). ``pairwise``: the criterion (or the
    aspect's definition) as a :class:`~localjury.metrics.pairwise.PairwiseCritic`, asked in
    both orders.

    Raises:
        ConfigError: Nothing given for a format without a default, an unknown name, or a
            composite metric asked pairwise.
    """
    if pairwise and evidence:
        raise ConfigError(
            "--evidence asks a yes/no criterion for quotes of its response; a pairwise judge compares two "
            "responses and quotes neither (judge pointwise: --mode pointwise)"
        )
    metric: Metric
    if spec is None:
        default = FORMATS[fmt]
        if default.default_metric and not pairwise:
            return COMPOSITE_METRICS[default.default_metric](**({"evidence": True} if evidence else {}))
        if default.criterion is None:
            raise ConfigError(
                f'format {fmt!r} has no default criterion: give a `metric`: NAME="criterion", an aspect '
                f"({', '.join(PREDEFINED_ASPECTS)}) or a composite ({', '.join(COMPOSITE_METRICS)})"
            )
        metric = AspectCritic(*default.criterion, strictness=strictness, verdict_first=verdict_first, evidence=evidence)
    else:
        metric = parse_metric(spec, strictness=strictness, verdict_first=verdict_first, evidence=evidence)
    if not pairwise:
        return metric
    if not isinstance(metric, AspectCritic):
        raise ConfigError(f"`metric` {metric.name!r} is a composite metric: it cannot judge pairs; give a criterion")
    return PairwiseCritic(metric.name, metric.definition, strictness=strictness)


def is_pairwise(mode: BenchMode, fmt: str, data: str | Path) -> bool:
    """Whether a bench judges pairs: ``mode`` as given (checked by
    :class:`~localjury.bench.config.BenchConfig`), or under ``auto`` for a format of pairs
    (LLMBar) or a ``jsonl`` file whose first record holds ``response_a`` and ``response_b``."""
    if mode != "auto":
        return mode == "pairwise"
    if fmt in FORMATS and FORMATS[fmt].load_pairs is not None:
        return True
    if fmt == "jsonl":
        row = first_json_line(Path(data))
        return isinstance(row, dict) and {"response_a", "response_b"} <= row.keys()
    return False


def graded(judgment: ModelJudgment | None, composite: bool) -> float | None:
    """A model's graded score of a record in [0, 1], the input of AUROC, Brier and ECE: its
    confidence (mean verdict probability) where its engine gives probabilities, else the share
    of its valid votes that pass; for a composite metric its score (already the share of
    supported statements)."""
    if judgment is None:
        return None
    if composite:
        return judgment.score
    if judgment.confidence is not None:
        return judgment.confidence
    return vote_share(judgment.votes)
