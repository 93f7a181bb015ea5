"""The file a review opens, indexed once: a run's results, a bench's ``predictions.jsonl``, or a
labels file. The index holds each row's byte offset and the few facts the queue filters and sorts
by (a row's record id and metric, whether it failed, split, and how sure the jury was); a row
itself is read from the file when it is shown, so the server's memory does not grow with the
rows' reasons, samples and thinking."""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from localjury._files import MAX_LINE_BYTES, Overlong, bounded_lines, open_regular_file, parse_json
from localjury.errors import ConfigError
from localjury.votes.voting import passes

#: The kinds of file a review opens, by what their rows hold.
RESULTS, PREDICTIONS, LABELS = "results", "predictions", "labels"
_HINT = "give a results file (`localjury run --out`), a bench's predictions.jsonl, or a labels file"

#: The facts of a row, one bit each, in :attr:`Index.flags`.
FAILED, JURY_SPLIT, VOTES_SPLIT, HEAD_DISAGREES = 1, 2, 4, 8


def kind_of(row: Any) -> str | None:
    """Which kind of file a parsed line belongs to; None when it is none of them."""
    if not isinstance(row, dict):
        return None
    if isinstance(row.get("record_id"), str) and isinstance(row.get("models"), list) and "metric" in row:
        return RESULTS
    if isinstance(row.get("record_id"), str) and isinstance(row.get("models"), dict) and "gold" in row:
        return PREDICTIONS
    if "gold" in row and "record_id" not in row:
        return LABELS
    return None


def judgments(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A row's models' judgments as a list of dicts with their ``model`` named (a bench's rows
    hold them by name), each with its ``prediction``: the model's 0/1 call (None undecided)."""
    models = row.get("models") or []
    if isinstance(models, dict):
        models = [{"model": name, **(cell or {})} for name, cell in models.items()]
    out = []
    for m in models:
        if isinstance(m, dict):
            score = m.get("score")
            call = m.get("prediction", _call(score))
            out.append({**m, "prediction": call})
    return out


def _call(score: Any) -> int | None:
    """A score as a 0/1 call, as bench makes it (``bench.figures.prediction``, not imported: it
    brings the run's modules): a pass above one half; None without a score."""
    verdict = passes(float(score)) if isinstance(score, int | float) and not isinstance(score, bool) else None
    return None if verdict is None else int(verdict)


def jury_call(row: dict[str, Any], models: list[dict[str, Any]]) -> int | None:
    """The jury's 0/1 call on a row as bench makes it: a pass when its score is above one half;
    a bench row's own; None without a score (``models``: the row's :func:`judgments`)."""
    if "jury_prediction" in row:
        return row["jury_prediction"]
    score = row.get("score")
    if isinstance(score, int | float) and not isinstance(score, bool):
        return _call(score)
    calls = [m["prediction"] for m in models if m["prediction"] is not None]
    return calls[0] if len(calls) == 1 else None


def facts(row: dict[str, Any], models: list[dict[str, Any]]) -> int:
    """A row's flags (:data:`FAILED`, :data:`JURY_SPLIT`, :data:`VOTES_SPLIT`, :data:`HEAD_DISAGREES`);
    ``models``: its :func:`judgments`."""
    flags = FAILED if row.get("error") or (models and row.get("score") is None) else 0
    if len({m["prediction"] for m in models if m["prediction"] is not None}) > 1:
        flags |= JURY_SPLIT
    if any(len({v for v in m.get("votes") or [] if v is not None}) > 1 for m in models):
        flags |= VOTES_SPLIT
    for m in models:
        head = m.get("head") or {}
        drawn = [v for v in head.get("votes") or [] if v is not None]
        if drawn and m.get("verdict") is not None and round(sum(drawn) / len(drawn)) != m["verdict"]:
            flags |= HEAD_DISAGREES
    return flags


def sureness(row: dict[str, Any]) -> float:
    """How sure the jury is, 0 (a coin toss) to 1: twice the distance of its confidence (the
    mean probability of a pass) from one half; NaN when the row has no probability."""
    p = row.get("confidence")
    return abs(float(p) - 0.5) * 2 if isinstance(p, int | float) and not isinstance(p, bool) else math.nan


@dataclass
class Index:
    """Where each row of the file is and what the queue needs of it."""

    path: Path
    kind: str
    offsets: np.ndarray
    """Each row's first byte."""
    lengths: np.ndarray
    """Each row's bytes."""
    record_ids: list[str]
    metric_codes: np.ndarray
    """Each row's metric, as its place in :attr:`metrics`."""
    metrics: list[str]
    flags: np.ndarray
    """Each row's facts (:data:`FAILED`...)."""
    sure: np.ndarray
    """Each row's :func:`sureness`."""
    jury: np.ndarray
    """Each row's :func:`jury_call` (-1: none)."""
    problems: list[str] = field(default_factory=list)
    """The lines read past: not JSON, cut short, or not a row of this kind (line and why)."""
    snapshot: bytes | None = None
    """The file's bytes as indexed, for a file the review itself rewrites (a labels file reviewed
    alone); None where rows are read from the file."""

    def __len__(self) -> int:
        return len(self.record_ids)

    def key(self, n: int) -> tuple[str, str]:
        """Row ``n``'s (record id, metric)."""
        return self.record_ids[n], self.metrics[int(self.metric_codes[n])]

    def row(self, n: int) -> dict[str, Any]:
        """Row ``n``, read from the file (a positioned read: threads may share the index), or from
        the :attr:`snapshot`."""
        start, length = int(self.offsets[n]), int(self.lengths[n])
        if self.snapshot is not None:
            data = self.snapshot[start : start + length]
        else:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                data = os.pread(fd, length, start)
            finally:
                os.close(fd)
        row = json.loads(data)
        if self.kind == LABELS:
            row.setdefault("metric", self.metrics[int(self.metric_codes[n])])
        return row


def index(path: Path, metric: str | None = None, *, snapshot: bool = False) -> Index:
    """Read ``path`` once, line by line, into an :class:`Index`; ``metric``: what a bench's rows
    are judged under (its metrics.json names it); ``snapshot``: read the file whole first and
    keep its bytes (see :attr:`Index.snapshot`).

    Raises:
        ConfigError: The file cannot be read, holds no row, or its first row is none of the
            kinds a review opens (the line and what it holds named).
    """
    kind: str | None = None
    offsets: list[int] = []
    lengths: list[int] = []
    ids: list[str] = []
    codes: list[int] = []
    metrics: dict[str, int] = {}
    flags: list[int] = []
    sure: list[float] = []
    jury: list[int] = []
    problems: list[str] = []
    with open_regular_file(path, "file to review", _HINT) as fh:
        kept = fh.read() if snapshot else None
    lines = _lines(io.BytesIO(kept), path, problems) if kept is not None else _file_lines(path, problems)
    for n, start, length, row in lines:
        this = kind_of(row)
        if kind is None and this is None:
            raise ConfigError(f"{path}, line {n}: {_what(row)} is not a result, a bench prediction or a label; {_HINT}")
        kind = kind or this
        if this != kind:
            problems.append(f"line {n}: not a row of a {kind} file ({_what(row)})")
            continue
        record_id = row.get("record_id", row.get("id", f"line-{n}"))
        name = str(row.get("metric") or metric or "")
        offsets.append(start)
        lengths.append(length)
        ids.append(str(record_id))
        codes.append(metrics.setdefault(name, len(metrics)))
        models = judgments(row)
        flags.append(facts(row, models))
        sure.append(sureness(row))
        call = row.get("gold") if kind == LABELS else jury_call(row, models)
        jury.append(-1 if call is None else int(call))
    if kind is None:
        raise ConfigError(f"{path}: no rows in it; {_HINT}")
    return Index(
        path=path,
        kind=kind,
        offsets=np.asarray(offsets, dtype=np.int64),
        lengths=np.asarray(lengths, dtype=np.int64),
        record_ids=ids,
        metric_codes=np.asarray(codes, dtype=np.int32),
        metrics=list(metrics),
        flags=np.asarray(flags, dtype=np.uint8),
        sure=np.asarray(sure, dtype=np.float32),
        jury=np.asarray(jury, dtype=np.int8),
        problems=problems,
        snapshot=kept,
    )


def _file_lines(path: Path, problems: list[str]) -> Iterator[tuple[int, int, int, Any]]:
    """:func:`_lines` of the file at ``path``, opened as a regular file (never a FIFO)."""
    with open_regular_file(path, "file to review", _HINT) as fh:
        yield from _lines(fh, path, problems)


def _lines(fh: IO[bytes], path: Path, problems: list[str]) -> Iterator[tuple[int, int, int, Any]]:
    """Each non-blank line that parses: its number, first byte, bytes and value; the others said
    in ``problems`` (a line cut short by a killed writer, one over the bound on a line)."""
    start = 0
    for n, line in enumerate(bounded_lines(fh, path, "file to review", MAX_LINE_BYTES), start=1):
        end = fh.tell()
        if isinstance(line, Overlong):
            problems.append(f"line {n}: {line.size:,} bytes, over the bound on a line; not read")
        elif line.strip():
            try:
                yield n, start, end - start, parse_json(line)
            except ValueError as exc:
                cut = "" if line.endswith(b"\n") else " (the last line, cut short: was its writer stopped?)"
                problems.append(f"line {n}: {exc}{cut}")
        start = end


def _what(row: Any) -> str:
    """What a parsed line holds, in a few words, for a message."""
    if isinstance(row, dict):
        keys = ", ".join(list(row)[:5])
        return f"an object with {keys or 'no fields'}"
    return f"a JSON {type(row).__name__}"
