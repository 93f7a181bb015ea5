"""The rows of a generic labels file (``-f jsonl``, and what ``localjury review`` writes): a
record's fields beside its ``gold`` label, optionally its ``pair`` and a label's own fields; and
the rows of one metric where a file labels several."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from localjury.errors import ConfigError, RecordError
from localjury.records.record import given_id


class _Labeled(Protocol):
    @property
    def metric(self) -> str | None: ...


Item = TypeVar("Item", bound=_Labeled)

#: What a labels file (``localjury review``'s) adds to a record's fields besides ``gold``: read
#: past as a record's fields, the metric kept to choose the rows of one metric.
LABEL_FIELDS = ("metric", "criterion", "note", "labeled_at")


def split_label(row: dict[str, Any], n: int, path: Path) -> tuple[int, str | None, str | None, RecordError | None]:
    """Take a label row apart (``row`` keeps the record's fields, its ``id`` read): its gold, the
    metric it labels, its pair, and the error that stands in the row's place where its id or pair
    cannot be read (the row then named ``line-N``).

    Raises:
        ConfigError: A ``gold`` that is not 0 or 1 (naming the file and the line).
    """
    gold = row.pop("gold", None)
    if gold not in (0, 1, True, False, "0", "1"):
        raise ConfigError(f"{path}, line {n}: field 'gold' must be 0 or 1, got {gold!r}")
    return int(gold), *_label_fields(row, n, path)


def split_score(
    row: dict[str, Any], n: int, path: Path, levels: int
) -> tuple[float, str | None, str | None, RecordError | None]:
    """Take a graded label row apart as :func:`split_label` does, its ``score`` (a number on the
    rubric's scale 1..``levels``, a mean of raters' scores allowed) in place of ``gold``.

    Raises:
        ConfigError: A ``score`` that is no number within 1..``levels`` (naming the file and the line).
    """
    score = row.pop("score", None)
    if isinstance(score, bool) or not isinstance(score, int | float) or not 1 <= score <= levels:
        raise ConfigError(f"{path}, line {n}: field 'score' must be a number within 1..{levels}, got {score!r}")
    return float(score), *_label_fields(row, n, path)


def _label_fields(row: dict[str, Any], n: int, path: Path) -> tuple[str | None, str | None, RecordError | None]:
    """What a label row holds besides its label (``row`` keeps the record's fields, its ``id`` read):
    the metric it labels, its pair, and the error that stands in the row's place (:func:`_identity`)."""
    metric = {k: row.pop(k) for k in LABEL_FIELDS if k in row}.get("metric")
    pair, error = _identity(row, n, f"{path} line {n}")
    return metric if isinstance(metric, str) else None, pair, error


def _identity(row: dict[str, Any], n: int, location: str) -> tuple[str | None, RecordError | None]:
    """Read a label row's ``id`` (into ``row``: its own, or ``line-N``) and take out its
    ``pair``; return the pair, and the error that stands in the row's place where either
    cannot be read (the row then named ``line-N``)."""
    field = "id"
    try:
        row["id"] = given_id(row.get("id")) or f"line-{n}"
        field = "pair"
        pair = row.pop("pair", None)
        return (None if pair in (None, "") else given_id(pair)), None
    except ValueError as exc:
        row["id"] = f"line-{n}"
        row.pop("pair", None)
        return None, RecordError(str(exc), record_id=row["id"], field=field, location=location)


def of_metric(items: Sequence[Item], metric: str | None, path: Path) -> list[Item]:
    """The items of one metric, where a labels file labels several (rows that name no metric
    are read for any).

    Raises:
        ConfigError: Labels of several metrics, and none of them ``metric``.
    """
    named = sorted({it.metric for it in items if it.metric})
    if len(named) <= 1 and (metric is None or not named or named == [metric]):
        return list(items)
    if metric not in named:
        which = "name one" if metric is None else f"none of them is {metric!r}; name one"
        raise ConfigError(f"{path} labels {len(named)} metrics ({', '.join(named)}): {which} with --metric")
    return [it for it in items if it.metric in (None, metric)]
