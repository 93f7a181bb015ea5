"""Metrics from text: a predefined aspect's name, ``NAME=criterion``, a composite's name, a
criteria file. What ``localjury run`` and ``localjury bench`` (and any caller) read metrics with.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from localjury._files import read_yaml
from localjury.errors import ConfigError
from localjury.metrics.agent import AGENT_METRICS
from localjury.metrics.aspect_critic import PREDEFINED_ASPECTS, AspectCritic
from localjury.metrics.base import Metric
from localjury.metrics.faithfulness import COMPOSITE_METRICS
from localjury.metrics.rubric import RUBRIC_METRICS

#: The metrics known by name (``--metric``): the composites, the agent-run metrics and the
#: predefined rubrics.
NAMED_METRICS: dict[str, Callable[[], Metric]] = {**COMPOSITE_METRICS, **AGENT_METRICS, **RUBRIC_METRICS}


def named_metric(name: str, *, evidence: bool = False) -> Metric:
    """The named metric ``name`` (a key of :data:`NAMED_METRICS`); ``evidence`` asks a
    composite's verification for quoted evidence (other named metrics have no such mode)."""
    if evidence and name in COMPOSITE_METRICS:
        return COMPOSITE_METRICS[name](evidence=True)
    return NAMED_METRICS[name]()


def named_criterion(text: str) -> tuple[str, str] | None:
    """``NAME=criterion text`` as (name, text), or None when it is not of that form."""
    name, sep, criterion = text.partition("=")
    if not sep or not name.strip() or not criterion.strip():
        return None
    return name.strip(), criterion


def metric_from_string(
    text: str, *, strictness: int = 1, verdict_first: bool = False, evidence: bool = False
) -> Metric | None:
    """A named metric's name (:data:`NAMED_METRICS`), a predefined aspect's name or
    ``NAME=criterion`` as its metric (aspects with ``strictness``, ``verdict_first`` and
    ``evidence``), or None when it is none of those."""
    if text in NAMED_METRICS:
        return named_metric(text, evidence=evidence)
    if text in PREDEFINED_ASPECTS:
        return AspectCritic.predefined(text, strictness=strictness, verdict_first=verdict_first, evidence=evidence)
    named = named_criterion(text)
    if named is None:
        return None
    return AspectCritic(*named, strictness=strictness, verdict_first=verdict_first, evidence=evidence)


def read_criteria(path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """Read criteria from YAML: ``name: text`` pairs, or a list of {name, definition, ...}
    (``strictness``, ``tie_break``, ``evidence``, and ``scope`` for conversation records).

    Raises:
        ConfigError: The file cannot be read or is not of that shape.
    """
    data = read_yaml(path, "criteria file")
    if isinstance(data, dict) and "criteria" in data:
        data = data["criteria"]
    items: list[tuple[str, str, dict[str, Any]]] = []
    if isinstance(data, dict):
        for name, text in data.items():
            if not isinstance(text, str):
                raise ConfigError(f"criteria file {path}: criterion {name!r} must map to its text")
            items.append((str(name), text, {}))
    elif isinstance(data, list):
        for i, entry in enumerate(data, start=1):
            if not isinstance(entry, dict) or not {"name", "definition"} <= entry.keys():
                raise ConfigError(f"criteria file {path}: item {i} needs 'name' and 'definition'")
            extra = {k: v for k, v in entry.items() if k not in ("name", "definition")}
            unknown = set(extra) - {"strictness", "tie_break", "scope", "evidence"}
            if unknown:
                raise ConfigError(f"criteria file {path}: item {i} has unknown keys: {', '.join(sorted(unknown))}")
            items.append((str(entry["name"]), str(entry["definition"]), extra))
    else:
        raise ConfigError(f"criteria file {path} must map names to criteria, or list {{name, definition}} items")
    return items


def criteria_metrics(path: Path) -> list[Metric]:
    """The criteria of a criteria file (see :func:`read_criteria`) as Aspect Critic metrics.

    Raises:
        ConfigError: The file is unreadable or a criterion is invalid.
    """
    metrics: list[Metric] = []
    for name, text, extra in read_criteria(path):
        try:
            metrics.append(AspectCritic(name, text, **extra))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"criteria file {path}: criterion {name!r}: {exc}") from None
    return metrics
