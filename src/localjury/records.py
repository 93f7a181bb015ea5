"""Records to judge: the model, field aliases, and loaders for JSONL, JSON, CSV and Parquet.

A loader never stops at a bad record: it yields a :class:`~localjury.errors.RecordError`
in that record's place, naming the record and the field, and goes on with the next one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from localjury.errors import ConfigError, RecordError

#: Older field names (RAGAS v1 and many datasets) accepted as aliases of the current ones.
FIELD_ALIASES: dict[str, str] = {
    "question": "user_input",
    "answer": "response",
    "contexts": "retrieved_contexts",
    "ground_truth": "reference",
}
TEXT_FIELDS = ("user_input", "response", "reference")
SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet", ".pq")


class Record(BaseModel):
    """One LLM output to judge, with what it answered and what it was given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Stable id: given in the data, or a hash of the record's content."""
    response: str
    """The output being judged."""
    user_input: str | None = None
    """The prompt or question the response answers."""
    retrieved_contexts: list[str] | None = None
    """Passages the system retrieved, when it is a RAG system."""
    reference: str | None = None
    """A reference answer, when the dataset has one."""


def content_id(fields: Mapping[str, Any]) -> str:
    """Return the stable id of a record without an ``id``: a hash of its judged fields."""
    canon = {k: fields.get(k) for k in ("user_input", "response", "retrieved_contexts", "reference")}
    blob = json.dumps(canon, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _raw_id(raw: Any) -> str:
    blob = raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True, default=str)
    return "raw-" + hashlib.sha256(blob.encode("utf-8", "replace")).hexdigest()[:12]


def parse_record(raw: Any, *, location: str | None = None, csv_cells: bool = False) -> Record:
    """Validate one raw row (a mapping) into a :class:`Record`.

    Args:
        raw: The decoded row, e.g. a JSON object.
        location: Where the row sits in its file, for error messages ("line 7").
        csv_cells: The row comes from a CSV file: every cell is a string, an empty cell
            means "absent", and ``retrieved_contexts`` is a JSON-encoded list.

    Returns:
        The validated record.

    Raises:
        RecordError: The row is not an object, a field is missing or of the wrong type, or
            a field and its alias disagree.
    """
    if not isinstance(raw, Mapping):
        raise RecordError(
            f"expected a JSON object, got {type(raw).__name__}",
            record_id=_raw_id(raw),
            location=location,
        )
    given_id = raw.get("id")
    if given_id is not None and not isinstance(given_id, bool) and isinstance(given_id, int | str):
        record_id = str(given_id)
    else:
        record_id = _raw_id(dict(raw))

    def fail(field: str | None, reason: str) -> RecordError:
        return RecordError(reason, record_id=record_id, field=field, location=location)

    if given_id is not None and (isinstance(given_id, bool) or not isinstance(given_id, int | str)):
        raise fail("id", f"must be a string or an integer, got {type(given_id).__name__}")
    if isinstance(given_id, str) and not given_id.strip():
        raise fail("id", "must not be empty")

    fields: dict[str, Any] = {}
    for key, value in raw.items():
        if csv_cells and value == "":
            value = None
        if value is None or key == "id":
            continue
        name = FIELD_ALIASES.get(key, key)
        if name not in ("user_input", "response", "retrieved_contexts", "reference"):
            continue  # extra columns (labels, metadata) are the caller's business
        if name in fields and fields[name] != value:
            raise fail(name, f"given both as {name!r} and as its alias {key!r} with different values")
        fields[name] = value

    if csv_cells and isinstance(fields.get("retrieved_contexts"), str):
        cell = fields["retrieved_contexts"]
        try:
            fields["retrieved_contexts"] = json.loads(cell)
        except json.JSONDecodeError as exc:
            raise fail(
                "retrieved_contexts",
                f'CSV cell must hold a JSON list of strings, e.g. ["passage one"]; got {cell[:60]!r} ({exc.msg})',
            ) from None

    if "response" not in fields:
        raise fail("response", "missing (also accepted under the alias 'answer')")
    for name in TEXT_FIELDS:
        if name in fields and not isinstance(fields[name], str):
            raise fail(name, f"must be a string, got {type(fields[name]).__name__}")
    contexts = fields.get("retrieved_contexts")
    if contexts is not None:
        if not isinstance(contexts, list):
            raise fail("retrieved_contexts", f"must be a list of strings, got {type(contexts).__name__}")
        for i, item in enumerate(contexts):
            if not isinstance(item, str):
                raise fail(
                    "retrieved_contexts",
                    f"item {i} must be a string, got {type(item).__name__}",
                )
    if given_id is None:
        record_id = content_id(fields)
    return Record(id=record_id, **fields)


def coerce_records(items: Iterable[Record | Mapping[str, Any]]) -> Iterator[Record | RecordError]:
    """Turn records given in Python (``Record`` objects or dicts) into records or errors."""
    for i, item in enumerate(items, start=1):
        if isinstance(item, Record):
            yield item
            continue
        try:
            yield parse_record(item, location=f"item {i}")
        except RecordError as exc:
            yield exc


def _iter_jsonl(path: Path) -> Iterator[Record | RecordError]:
    with path.open("rb") as fh:
        for lineno, line_bytes in enumerate(fh, start=1):
            location = f"{path.name} line {lineno}"
            try:
                line = line_bytes.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield RecordError(
                    f"not valid UTF-8 ({exc.reason} at byte {exc.start})",
                    record_id=_raw_id(line_bytes.decode("utf-8", "replace")),
                    location=location,
                )
                continue
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                yield RecordError(
                    f"not valid JSON ({exc.msg} at column {exc.colno})",
                    record_id=_raw_id(line),
                    location=location,
                )
                continue
            try:
                yield parse_record(raw, location=location)
            except RecordError as exc:
                yield exc


def _iter_rows(rows: Iterable[Mapping[str, Any]], path: Path, *, csv_cells: bool) -> Iterator[Record | RecordError]:
    for i, raw in enumerate(rows, start=1):
        try:
            yield parse_record(raw, location=f"{path.name} row {i}", csv_cells=csv_cells)
        except RecordError as exc:
            yield exc


def iter_records(path: str | Path) -> Iterator[Record | RecordError]:
    """Read a dataset file, yielding each record or, in its place, the error that rejects it.

    Formats by suffix: ``.jsonl``/``.ndjson`` (one object a line), ``.json`` (a list of
    objects), ``.csv`` (a header row; ``retrieved_contexts`` as a JSON list in its cell),
    ``.parquet``.

    Raises:
        ConfigError: The file does not exist, has an unknown suffix, or cannot be read at all.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"dataset file not found: {path}")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        yield from _iter_jsonl(path)
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read {path} as a JSON list of records: {exc}") from exc
        if not isinstance(data, list):
            raise ConfigError(
                f"{path}: a .json dataset must hold a list of records; use .jsonl for one object per line"
            )
        yield from _iter_rows(data, path, csv_cells=False)
    elif suffix == ".csv":
        import pandas as pd

        try:
            # Every cell as a string, nothing turned into NaN: "" means absent.
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[], encoding="utf-8")
        except (UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"cannot read {path} as CSV: {exc}") from exc
        yield from _iter_rows(frame.to_dict(orient="records"), path, csv_cells=True)
    elif suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several unrelated types for a bad file
            raise ConfigError(f"cannot read {path} as Parquet: {exc}") from exc
        yield from _iter_rows(table.to_pylist(), path, csv_cells=False)
    else:
        raise ConfigError(
            f"unsupported dataset format {suffix!r} for {path}; expected one of: " + ", ".join(SUPPORTED_SUFFIXES)
        )


def dedupe(entries: Iterable[Record | RecordError]) -> Iterator[Record | RecordError]:
    """Turn every record whose id was already seen into a RecordError (ids key the results)."""
    seen: set[str] = set()
    for entry in entries:
        if isinstance(entry, Record):
            if entry.id in seen:
                yield RecordError(
                    "duplicate id: an earlier record has the same id (or, without ids, the same content)",
                    record_id=entry.id,
                    field="id",
                )
                continue
            seen.add(entry.id)
        yield entry
