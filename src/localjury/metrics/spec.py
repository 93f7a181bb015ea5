"""Metrics from text: a predefined aspect's name, ``NAME=criterion``, a composite's name, a
criteria file. What ``localjury run`` and ``localjury bench`` (and any caller) read metrics with.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

from localjury._files import read_yaml
from localjury.errors import ConfigError
from localjury.metrics._text_bounds import spec_text_problem
from localjury.metrics.aspect_critic import PREDEFINED_ASPECTS, AspectCritic
from localjury.metrics.base import Metric
from localjury.metrics.kinds import NAMED_METRICS, Named


def named_metric(name: str, *, evidence: bool = False, known: Mapping[str, Named] = NAMED_METRICS) -> Metric:
    """The named metric ``name`` (a key of ``known``, the registry's
    :data:`~localjury.metrics.kinds.NAMED_METRICS` by default); ``evidence`` asks a composite's
    verification for quoted evidence (other named metrics have no such mode)."""
    entry = known[name]
    return entry(evidence=True) if evidence and entry.takes_evidence else entry()


def metric_module(path: Path) -> dict[str, Named]:
    """The metrics a user's Python file names for ``--metric``: its ``METRICS`` table, each
    name mapped to a function of no argument that makes the metric (``--metric-module``; see
    ``examples/unsure_kind.py``). A metric of a kind of its own names its judging class.

    Raises:
        ConfigError: The file cannot be imported, or has no ``METRICS`` table of that shape.
    """
    spec = importlib.util.spec_from_file_location(f"localjury_user_metrics_{path.stem}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ConfigError(f"metric module {path}: not a Python file; give the path of a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where pydantic and dataclasses look up its annotations
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(f"metric module {path} failed to import: {type(exc).__name__}: {exc}") from exc
    table = getattr(module, "METRICS", None)
    if not isinstance(table, dict) or not all(isinstance(k, str) and callable(v) for k, v in table.items()):
        raise ConfigError(f"metric module {path} has no METRICS table; add METRICS = {{'name': make_metric, ...}}")
    return {name: make if isinstance(make, Named) else Named(make) for name, make in table.items()}


def named_criterion(text: str) -> tuple[str, str] | None:
    """``NAME=criterion text`` as (name, text), or None when it is not of that form."""
    name, sep, criterion = text.partition("=")
    if not sep or not name.strip() or not criterion.strip():
        return None
    return name.strip(), criterion


#: What a metric's text may name: a predefined aspect, ``NAME=criterion``, a named metric, a
#: pairwise ``NAME=criterion``, or (``any``) the first three, named metrics first.
MetricKind = Literal["any", "aspect", "criterion", "named", "pairwise"]


def parse_metric(
    text: str,
    kind: MetricKind = "any",
    *,
    strictness: int = 1,
    verdict_first: bool = False,
    evidence: bool = False,
    thinking: bool = False,
    known: Mapping[str, Named] = NAMED_METRICS,
) -> Metric:
    """One metric from its text: the one parser behind ``run``'s ``--aspect``,
    ``--criterion``, ``--metric`` and ``--pairwise``, ``bench``'s, ``calibrate``'s and
    ``align``'s ``--metric``, and criteria in code. ``kind`` says what the text may name
    (:data:`MetricKind`). Aspects and criteria take ``strictness``, ``verdict_first``,
    ``evidence`` and ``thinking`` (the judge reads a response's thinking block); a composite
    takes ``evidence`` (its verifications quote the contexts); a pairwise criterion takes
    ``strictness``. ``known`` holds the metrics known by name (the registry's, and a user's
    module's: :func:`metric_module`).

    Raises:
        ConfigError: The text is not what ``kind`` expects; the message names the option
            and what it takes. Or a criterion's name or text is over
            :data:`~localjury.metrics._text_bounds.MAX_SPEC_TEXT_BYTES` (or not text).
    """
    if kind in ("any", "named") and text in known:
        return named_metric(text, evidence=evidence, known=known)
    if kind in ("any", "aspect") and text in PREDEFINED_ASPECTS:
        return AspectCritic.predefined(
            text, strictness=strictness, verdict_first=verdict_first, evidence=evidence, thinking=thinking
        )
    named = named_criterion(text) if kind in ("any", "criterion", "pairwise") else None
    if named is not None:
        _check_texts(named, f"{'pairwise ' if kind == 'pairwise' else ''}criterion")
    if named is not None and kind == "pairwise":
        from localjury.metrics.pairwise import PairwiseCritic

        return PairwiseCritic(*named, strictness=strictness)
    if named is not None:
        return AspectCritic(
            *named, strictness=strictness, verdict_first=verdict_first, evidence=evidence, thinking=thinking
        )
    raise ConfigError(_UNPARSED[kind](text, known))


def _check_texts(criterion: tuple[str, str], where: str) -> None:
    """Refuse a criterion whose name or text is over the bound on a metric's texts (or not
    text), before any tokenizer sees it.

    Raises:
        ConfigError: Naming ``where`` the criterion comes from, its name and the bound.
    """
    for part, value in zip(("name", "text"), criterion, strict=True):
        problem = spec_text_problem(value)
        if problem is not None:
            raise ConfigError(f"{where} {criterion[0][:60]!r}: its {part} {problem}; shorten it")


#: What each kind of metric text says when it is none of what it may name.
_UNPARSED: dict[str, Callable[[str, Mapping[str, Named]], str]] = {
    "any": lambda text, known: (
        f"`metric` {text!r}: expected a composite ({', '.join(n for n, e in known.items() if e.takes_evidence)}), "
        f'an aspect ({", ".join(PREDEFINED_ASPECTS)}) or NAME="criterion text"'
    ),
    "aspect": lambda text, known: (
        f"unknown aspect {text!r}; expected one of: {', '.join(PREDEFINED_ASPECTS)} (see `localjury aspects`)"
    ),
    "named": lambda text, known: (
        f"unknown metric {text!r}; expected one of: {', '.join(known)} (see `localjury metrics`)"
    ),
    "criterion": lambda text, known: (
        f'--criterion expects NAME=TEXT, e.g. dated="The response includes a year."; got {text!r}'
    ),
    "pairwise": lambda text, known: (
        f'--pairwise expects NAME=TEXT, e.g. helpful="The response is more helpful."; got {text!r}'
    ),
}


def metrics_of_options(
    aspects: Sequence[str] = (),
    criteria: Sequence[str] = (),
    criteria_file: Path | None = None,
    named: Sequence[str] = (),
    pairwise: Sequence[str] = (),
    *,
    verdict_first: bool = False,
    evidence: bool = False,
    thinking: bool = False,
    modules: Sequence[Path] = (),
) -> list[Metric]:
    """The metrics of ``run``'s options, in this order: the predefined aspects, the criteria,
    the criteria file's, the named metrics (composites, agent-run metrics, rubrics), the
    pairwise criteria (a rubric file's and a judge profile's come after them, added by
    :func:`localjury.run.prepare.settle`). ``verdict_first`` and ``evidence`` shape the
    answers of the aspects and criteria (``--verdict-first``, ``--evidence``), ``evidence``
    a composite's too; with ``thinking`` the aspects and criteria read a response's thinking
    block with its answer (``--read-thinking``). ``modules`` are users' metric modules
    (``--metric-module``): the metrics their ``METRICS`` tables name are named metrics too.

    Raises:
        ConfigError: An unknown aspect or named metric, a criterion not ``NAME=TEXT``, or
            a bad criteria file or metric module.
    """
    shaped = partial(parse_metric, verdict_first=verdict_first, evidence=evidence, thinking=thinking)
    metrics = [shaped(name, "aspect") for name in aspects]
    metrics += [shaped(item, "criterion") for item in criteria]
    if criteria_file is not None:
        metrics += criteria_metrics(criteria_file)
    known = dict(NAMED_METRICS)
    for path in modules:
        known |= metric_module(path)
    metrics += [parse_metric(name, "named", evidence=evidence, known=known) for name in named]
    metrics += [parse_metric(item, "pairwise") for item in pairwise]
    return metrics


def read_criteria(path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """Read criteria from YAML: ``name: text`` pairs, or a list of {name, definition, ...}
    (``strictness``, ``tie_break``, ``evidence``, and ``scope`` for conversation records).

    Raises:
        ConfigError: The file cannot be read or is not of that shape, or a criterion's name
            or text is over :data:`~localjury.metrics._text_bounds.MAX_SPEC_TEXT_BYTES`.
    """
    data = read_yaml(path, "criteria file")
    if isinstance(data, dict) and "criteria" in data:
        data = data["criteria"]
    items: list[tuple[str, str, dict[str, Any]]] = []
    if isinstance(data, dict):
        for name, text in data.items():
            if not isinstance(text, str):
                raise ConfigError(f"criteria file {path}: criterion {str(name)[:60]!r} must map to its text")
            items.append((str(name), text, {}))
    elif isinstance(data, list):
        for i, entry in enumerate(data, start=1):
            if not isinstance(entry, dict) or not {"name", "definition"} <= entry.keys():
                raise ConfigError(f"criteria file {path}: item {i} needs 'name' and 'definition'")
            if isinstance(entry["definition"], list | dict):
                raise ConfigError(f"criteria file {path}: item {i}: 'definition' must be the criterion's text")
            extra = {k: v for k, v in entry.items() if k not in ("name", "definition")}
            unknown = set(extra) - {"strictness", "tie_break", "scope", "evidence"}
            if unknown:
                raise ConfigError(f"criteria file {path}: item {i} has unknown keys: {', '.join(sorted(unknown))}")
            items.append((str(entry["name"]), str(entry["definition"]), extra))
    else:
        raise ConfigError(f"criteria file {path} must map names to criteria, or list {{name, definition}} items")
    for name, text, _ in items:
        _check_texts((name, text), f"criteria file {path}: criterion")
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
