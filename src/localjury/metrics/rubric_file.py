"""Rubric files: yes/no criteria and graded rubrics kept beside the code, each named and versioned.

A rubric file is YAML with two lists, either may be left out::

    criteria:
      - name: dated
        version: 1
        definition: The response includes a specific date or year.
    rubrics:
      - name: clarity
        version: 2
        criterion: How clearly the response explains its answer.
        levels:
          1: Confusing or wrong.
          2: ...

It is validated with pydantic (unknown keys refused); an error names the file, the line and
the field. Each entry becomes a metric (an :class:`~localjury.metrics.aspect_critic.AspectCritic`
or a :class:`~localjury.metrics.rubric.Rubric`) whose ``revision`` (``name@version``) is part of
the store key of its judgments, and whose ``source`` (the file, its SHA-256, the entry's
version and line) goes into the run's manifest: an edited entry is judged again (its text is in
its prompts' keys too), a new version even with the same text.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from localjury._files import load_yaml_file
from localjury._yaml import compose_bounded
from localjury.errors import ConfigError, MetricError
from localjury.metrics._text_bounds import SpecText, spec_text_problem
from localjury.metrics.aspect_critic import AspectCritic
from localjury.metrics.base import MAX_STRICTNESS, Metric
from localjury.metrics.rubric import Aggregate, Rubric
from localjury.records.conversation import Scope
from localjury.types import TieBreak

WHAT = "rubrics file"


class _Entry(BaseModel):
    """What every entry has: a name and a version."""

    model_config = ConfigDict(extra="forbid")

    name: SpecText = Field(min_length=1)
    """The metric's name in results."""
    version: str
    """The entry's version (a number or a string); a new one judges the entry again."""
    strictness: int = Field(1, ge=1, le=MAX_STRICTNESS)
    """Samples per model (k)."""

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class CriterionEntry(_Entry):
    """A yes/no criterion, judged by the Aspect Critic."""

    definition: SpecText = Field(min_length=1)
    """The statement that is true or false of the response."""
    tie_break: TieBreak = "fail"
    """What an even split of valid votes gives."""
    scope: Scope = "last_turn"
    """For conversation records: the last turn, or the whole conversation."""
    evidence: bool = False
    """Ask for quoted evidence first, each quote an exact span of the response."""


class RubricEntry(_Entry):
    """A rubric: a criterion graded on a scale of 1..N, each level described."""

    criterion: SpecText = Field(min_length=1)
    """What is graded."""
    levels: dict[int, str] | list[str]
    """Each level's description: a mapping 1..N -> text, or a list from level 1 up (2 to 10)."""
    needs_reference: bool = False
    """Records must carry a reference answer."""
    aggregate: Aggregate = "mean"
    """How a model's sampled scores combine: mean or median."""
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    """The normalised score (0..1) a model must reach to pass."""

    @field_validator("levels")
    @classmethod
    def _level_texts(cls, value: dict[int, str] | list[str]) -> dict[int, str] | list[str]:
        for level, text in value.items() if isinstance(value, dict) else enumerate(value, start=1):
            problem = spec_text_problem(text)
            if problem is not None:
                raise ValueError(f"level {level}: the text {problem}")
        return value


class RubricsFile(BaseModel):
    """A rubric file: criteria and rubrics."""

    model_config = ConfigDict(extra="forbid")

    criteria: list[CriterionEntry] = []
    """The yes/no criteria."""
    rubrics: list[RubricEntry] = []
    """The graded rubrics."""


def rubric_file_metrics(path: str | Path) -> list[Metric]:
    """The metrics of a rubric file: its criteria, then its rubrics, in file order.

    Raises:
        ConfigError: The file cannot be read, is not valid YAML, or an entry is invalid
            (naming the file, the line and the field), or two entries share a name.
    """
    path = Path(path)
    data, raw = load_yaml_file(path, WHAT)  # read once: the entries, their lines and the digest agree
    if data is None or not isinstance(data, dict):
        raise ConfigError(f"{WHAT} {path} must be a mapping with `criteria:` and/or `rubrics:` lists")
    text = raw.decode("utf-8-sig")
    try:
        parsed = RubricsFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        field = ".".join(str(p) for p in loc)
        raise ConfigError(f"{WHAT} {path}, line {line_of(text, loc)}, field {field}: {first['msg']}") from None
    if not parsed.criteria and not parsed.rubrics:
        raise ConfigError(f"{WHAT} {path} has no entry: give a `criteria:` or a `rubrics:` list")
    digest = hashlib.sha256(raw).hexdigest()
    metrics: list[Metric] = []
    seen: set[str] = set()
    entries: list[tuple[str, int, CriterionEntry | RubricEntry]] = [
        *(("criteria", i, e) for i, e in enumerate(parsed.criteria)),
        *(("rubrics", i, e) for i, e in enumerate(parsed.rubrics)),
    ]
    for group, i, entry in entries:
        line = line_of(text, (group, i))
        if entry.name in seen:
            raise ConfigError(f"{WHAT} {path}, line {line}, field {group}.{i}.name: {entry.name!r} is used twice")
        seen.add(entry.name)
        metric = _metric(entry, path, line, f"{group}.{i}")
        metric.revision = f"{entry.name}@{entry.version}"
        metric.source = {"file": str(path), "sha256": digest, "version": entry.version, "line": line}
        metrics.append(metric)
    return metrics


def _metric(entry: CriterionEntry | RubricEntry, path: Path, line: int, where: str) -> Metric:
    """The entry's metric; a ConfigError naming the file, line and entry where it is refused."""
    try:
        if isinstance(entry, CriterionEntry):
            return AspectCritic(
                entry.name,
                entry.definition,
                strictness=entry.strictness,
                tie_break=entry.tie_break,
                scope=entry.scope,
                evidence=entry.evidence,
            )
        return Rubric(
            entry.name,
            entry.criterion,
            entry.levels,
            needs_reference=entry.needs_reference,
            strictness=entry.strictness,
            aggregate=entry.aggregate,
            threshold=entry.threshold,
        )
    except MetricError as exc:
        raise ConfigError(f"{WHAT} {path}, line {line}, field {where}: {exc}") from None


def line_of(text: str, loc: tuple[Any, ...]) -> int:
    """The 1-based line of the YAML field at ``loc`` (keys and list indices: a key's line, a list
    item's), or of the deepest one on the way that exists (a missing field's entry). ``text``
    is a document the bounded loader has read (see :mod:`localjury._yaml`)."""
    node: Any = compose_bounded(text)
    line = node.start_mark.line + 1 if node is not None else 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if str(k.value) == str(part)), None)
            if pair is None:
                break
            node, line = pair[1], pair[0].start_mark.line + 1  # the key's line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
