"""The metrics a command line names: ``--aspect``, ``--criterion``, ``--criteria``,
``--metric``, ``--pairwise`` and ``--rubrics``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from localjury.errors import ConfigError


def _build_metrics(
    aspects: Sequence[str],
    criteria: Sequence[str],
    criteria_file: Path | None,
    composites: Sequence[str] = (),
    verdict_first: bool = False,
    pairwise: Sequence[str] = (),
    rubrics: Path | None = None,
    evidence: bool = False,
) -> list[Any]:
    """The metrics of ``run``'s options, in this order: the predefined aspects, the criteria,
    the criteria file's, the named metrics (composites, agent-run metrics, rubrics), the
    pairwise criteria, the rubric file's. ``verdict_first`` and ``evidence`` shape the
    answers of the aspects and criteria (``--verdict-first``, ``--evidence``).

    Raises:
        ConfigError: An unknown aspect or named metric, a criterion not ``NAME=TEXT``, or
            a bad criteria or rubric file.
    """
    from localjury.metrics import PREDEFINED_ASPECTS, AspectCritic, Metric
    from localjury.metrics.spec import NAMED_METRICS, criteria_metrics, named_criterion, named_metric

    metrics: list[Metric] = []
    for name in aspects:
        if name not in PREDEFINED_ASPECTS:
            raise ConfigError(
                f"unknown aspect {name!r}; expected one of: {', '.join(PREDEFINED_ASPECTS)} (see `localjury aspects`)"
            )
        metrics.append(AspectCritic.predefined(name, verdict_first=verdict_first, evidence=evidence))
    for item in criteria:
        named = named_criterion(item)
        if named is None:
            raise ConfigError(
                f'--criterion expects NAME=TEXT, e.g. dated="The response includes a year."; got {item!r}'
            )
        metrics.append(AspectCritic(*named, verdict_first=verdict_first, evidence=evidence))
    if criteria_file is not None:
        metrics += criteria_metrics(criteria_file)
    for name in composites:
        if name not in NAMED_METRICS:
            raise ConfigError(
                f"unknown metric {name!r}; expected one of: {', '.join(NAMED_METRICS)} (see `localjury metrics`)"
            )
        metrics.append(named_metric(name, evidence=evidence))
    for item in pairwise:
        from localjury.metrics.pairwise import PairwiseCritic

        named = named_criterion(item)
        if named is None:
            raise ConfigError(
                f'--pairwise expects NAME=TEXT, e.g. helpful="The response is more helpful."; got {item!r}'
            )
        metrics.append(PairwiseCritic(*named))
    if rubrics is not None:
        from localjury.metrics.rubric_file import rubric_file_metrics

        metrics += rubric_file_metrics(rubrics)
    return metrics
