"""How the trace exports that are JSON are read: one object or a JSON list of them (``.json``),
or JSON lines (any other suffix), streamed an object at a time, each with where it is in the
file."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from localjury._files import Overlong, bounded_lines, open_regular_file, parse_json
from localjury.errors import ConfigError, RecordError
from localjury.records._tables import json_items
from localjury.records.record import raw_id
from localjury.records.traces.spans import Span


def json_objects(path: Path, what: str, hint: str, limit: int) -> Iterator[tuple[str, dict[str, Any] | str]]:
    """Each object of the file and where it is (``item 3``, ``line 3``; ``object`` for a ``.json``
    file that is one), or in its place what is wrong with it: over ``limit`` bytes (skipped
    unread), not JSON, not an object.

    Raises:
        ConfigError: The file is not a regular file or cannot be read; a ``.json`` file that is
            not one list.
    """
    with open_regular_file(path, what, hint) as fh:
        try:
            if path.suffix.lower() == ".json" and _starts_object(fh):
                items, unit = _whole(fh, limit), "object"
            elif path.suffix.lower() == ".json":
                items, unit = json_items(fh, path, limit), "item"
            else:
                items, unit = bounded_lines(fh, path, what, limit), "line"
            for number, item in enumerate(items, start=1):
                where = unit if unit == "object" else f"{unit} {number}"
                if isinstance(item, Overlong):
                    yield where, f"{item.size:,} bytes, over the {limit:,}-byte bound; skipped unread"
                    continue
                if not item.strip():
                    continue
                try:
                    value = parse_json(item)
                except ValueError as exc:
                    yield where, str(exc)
                    continue
                yield where, value if isinstance(value, dict) else f"not a JSON object but {type(value).__name__}"
        except OSError as exc:
            raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def json_traces(
    path: Path, what: str, hint: str, limit: int, trace_of: Callable[[dict[str, Any]], tuple[str, list[Span]]]
) -> Iterator[tuple[str, list[Span]] | RecordError]:
    """Each object of a file that holds one trace an object (:func:`json_objects`), read by
    ``trace_of`` into the trace's id and spans, or in its place the error naming where it is."""
    for where, item in json_objects(path, what, hint, limit):
        location = f"{path.name} {where}"
        if isinstance(item, str):
            yield RecordError(item, record_id=raw_id(location), location=location)
            continue
        try:
            yield trace_of(item)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            why = f"not a trace of a {what}: {type(exc).__name__}: {exc}"
            yield RecordError(why, record_id=raw_id(location), location=location)


def _starts_object(fh: IO[bytes]) -> bool:
    """Whether the file's first character other than white space (after a byte order mark) is ``{``."""
    head = fh.read(4096)
    fh.seek(0)
    return head.removeprefix(codecs.BOM_UTF8).lstrip().startswith(b"{")


def _whole(fh: IO[bytes], limit: int) -> Iterator[bytes | Overlong]:
    data = fh.read(limit + 1)
    if len(data) <= limit:
        yield data.removeprefix(codecs.BOM_UTF8)
        return
    size = len(data)
    while block := fh.read(1 << 20):
        size += len(block)
    yield Overlong(size, data[:4096].decode("utf-8", "replace"))
