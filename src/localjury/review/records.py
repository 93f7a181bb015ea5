"""The records a review shows beside their judgments: results and bench predictions hold what the
judges wrote, never the records' texts, which come from the data set the run read.

A JSONL data set is indexed by record id (each line's offset) and read a line at a time when a
record is shown; another format (CSV, Parquet, a bench format, a datasets folder) is read once
and its records held."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localjury._files import Overlong, bounded_lines, open_regular_file, parse_json
from localjury.errors import RecordError
from localjury.records.record import content_id, given_id

Lookup = Callable[[str], dict[str, Any] | None]


def no_records(_: str) -> None:
    """The lookup of a review without its data set: every record unknown."""
    return None


def jsonl_records(path: Path) -> Lookup:
    """A lookup of a JSONL data set's records by id: one pass for the offsets, a positioned read
    and parse a record.

    Raises:
        ConfigError: The file cannot be read.
    """
    where: dict[str, tuple[int, int]] = {}
    with open_regular_file(path, "dataset file", "give the JSONL file the run read") as fh:
        start = 0
        for line in bounded_lines(fh, path, "dataset file"):
            end = fh.tell()
            if not isinstance(line, Overlong) and line.strip():
                try:
                    record_id = _id_of(parse_json(line))
                except (ValueError, TypeError):
                    record_id = None  # a record the run could not read: its result says why
                if record_id is not None:
                    where.setdefault(record_id, (start, end - start))
            start = end

    def lookup(record_id: str) -> dict[str, Any] | None:
        if record_id not in where:
            return None
        offset, length = where[record_id]
        fd = os.open(path, os.O_RDONLY)
        try:
            row = json.loads(os.pread(fd, length, offset))
        finally:
            os.close(fd)
        return {**row, "id": record_id}

    return lookup


def _id_of(raw: Any) -> str | None:
    """A raw record's id as the run named it: its own, else the hash of its judged fields."""
    if not isinstance(raw, dict):
        return None
    return given_id(raw.get("id")) or content_id(raw)


def read_records(path: Path) -> Lookup:
    """A lookup of the records of a data set in any format the run reads, held in memory.

    Raises:
        ConfigError: The data set cannot be read.
    """
    from localjury.records.readers import iter_records

    held: dict[str, dict[str, Any]] = {}
    for entry in iter_records(path):
        if not isinstance(entry, RecordError):
            held.setdefault(entry.id, entry.model_dump(exclude_none=True, mode="json"))
    return held.get


def bench_records(path: Path, fmt: str) -> Lookup:
    """A lookup of the records of a bench's data set, read in its format.

    Raises:
        ConfigError: The data set cannot be read in that format.
    """
    from localjury.bench.formats import load

    held = {item.id: item.record for item in load(path, fmt) if item.error is None}
    return held.get


def in_background(build: Callable[[], Lookup]) -> Lookup:
    """A lookup built from now on in a thread of its own (the review's queue is served meanwhile);
    a call waits for it, and raises what the building raised."""
    built: list[Lookup] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            built.append(build())
        except BaseException as exc:  # raised again by the first lookup, in the request's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="records index", daemon=True)
    thread.start()

    def lookup(record_id: str) -> dict[str, Any] | None:
        thread.join()
        if failed:
            raise failed[0]
        return built[0](record_id)

    return lookup


def records_for(data: Path | None) -> Lookup:
    """The lookup of a data set's records: indexed when JSONL, else read whole; none without one.

    Raises:
        ConfigError: The data set cannot be read.
    """
    if data is None:
        return no_records
    if data.suffix.lower() in (".jsonl", ".ndjson") and data.is_file():
        return jsonl_records(data)
    return read_records(data)
