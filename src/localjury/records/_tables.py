"""The dataset formats that are one whole document, streamed: a JSON list, CSV and Parquet.

Each is read a bounded piece at a time, never whole, and each row is bounded like a line of a
JSONL file: a row over the bound (the readers' :data:`~localjury.records.readers.MAX_LINE_BYTES`,
given as ``limit``) is yielded as an :class:`Overlong` in its place, for the reader to make it
that row's error.

- A JSON list is split into its items by a scan of its bytes (strings, escapes and brackets
  followed; nothing parsed), each item then parsed alone: an item over the bound is read past
  without being held, and an item that is not valid JSON is that row's error.
- CSV is parsed by pandas as before (every cell a string), :data:`CSV_CHUNK_ROWS` rows at a time.
- Parquet is read a row group at a time, page by page, in batches sized from the file's own
  metadata and its dictionaries' longest entries; a text column stored with a dictionary is read
  as that dictionary where its plain values could be too many bytes (a few distinct long
  strings repeated over many rows stay a few strings), as plain values elsewhere (a dictionary
  read holds a row group's distinct values); rows are turned into Python only a measured
  :data:`BATCH_BYTES` at a time.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from localjury._files import Overlong
from localjury.errors import ConfigError

#: The measured size of the rows turned into Python objects at a time (see :func:`_row_sizes`).
BATCH_BYTES = 16 << 20
#: The most rows of a Parquet batch, whatever their size.
PARQUET_BATCH_ROWS = 1024
#: Rows of a CSV file parsed at a time.
CSV_CHUNK_ROWS = 256
#: Bytes read from a JSON file at a time.
_READ_BYTES = 1 << 20
#: Counted for each value of a Parquet row that is not text (a number, a list's slot): about
#: what it takes written as JSON.
_VALUE_BYTES = 8


# --- A JSON list -------------------------------------------------------------------------

#: Outside a string: a whole string (skipped), or what changes the scan (a lone quote opens a
#: string that goes on past the block).
_OUTSIDE = re.compile(rb'"(?:[^"\\]|\\.)*"|["\[\]{},]', re.DOTALL)
_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*', re.DOTALL)  # a string's text up to its end, escapes included
_NOT_SPACE = re.compile(rb"[^ \t\r\n]")


class _Item:
    """The bytes of the item being read, up to the bound; past it, only its size and head."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.size = 0
        self.head: bytes | None = None  # set once the item is over the bound

    def add(self, part: bytes) -> None:
        self.size += len(part)
        if self.size <= self.limit:
            self.data += part
        elif self.head is None:
            self.head = bytes(self.data[:4096]) if self.data else part[:4096]
            self.data = bytearray()

    def take(self) -> bytes | Overlong:
        """The item read, and a fresh start for the next one."""
        item = bytes(self.data) if self.head is None else Overlong(self.size, self.head.decode("utf-8", "replace"))
        self.data, self.size, self.head = bytearray(), 0, None
        return item


class _ListScan:
    """Where the scan of a JSON list stands between two blocks of the file."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.item = _Item(limit)
        self.depth = 0  # 1 inside the list, more inside an item's arrays and objects
        self.started = self.ended = self.in_string = self.escaped = False
        self.items = 0  # separators and ends of items seen

    def fail(self, why: str) -> ConfigError:
        return ConfigError(
            f"cannot read {self.path} as a JSON list of records: {why}; a .json dataset holds one list of "
            "objects (or give one object a line in a .jsonl file)"
        )

    def outside(self, block: bytes, pos: int) -> int:
        """Before or after the list: white space only, and the list's opening bracket."""
        found = _NOT_SPACE.search(block, pos)
        if found is None:
            return len(block)
        if self.ended:
            raise self.fail(f"text after the list's closing bracket ({block[found.start() : found.start() + 20]!r})")
        if block[found.start()] != ord("["):
            raise self.fail(f"it starts with {block[found.start() : found.start() + 20]!r}, not a list")
        self.started, self.depth = True, 1
        return found.start() + 1

    def scan(self, block: bytes) -> Iterator[bytes | Overlong]:
        """The items that end in this block; the rest of the block is kept for the next."""
        pos = mark = 0
        while pos < len(block):
            if self.depth == 0:
                pos = mark = self.outside(block, pos)
            elif self.escaped:
                pos, self.escaped = pos + 1, False
            elif self.in_string:
                end = _STRING_REST.match(block, pos).end()  # type: ignore[union-attr]  # it matches ""
                if end == len(block):
                    break
                # The string's closing quote, or a backslash that is the block's last byte.
                self.in_string, self.escaped = block[end] != ord('"'), block[end] != ord('"')
                pos = end + 1
            else:
                found = _OUTSIDE.search(block, pos)
                if found is None:
                    break
                at, pos, char = found.start(), found.end(), block[found.start()]
                if char == ord('"'):
                    self.in_string = pos - at == 1  # else a whole string, skipped
                elif char in b"[{":
                    self.depth += 1
                elif self.depth > 1:  # inside an item: its own commas, and the end of its arrays and objects
                    self.depth -= char != ord(",")
                else:  # in the list itself: an item ends
                    if char == ord("}"):
                        raise self.fail("a '}' closes the list")
                    self.item.add(block[mark:at])
                    mark = pos
                    item = self.item.take()
                    if char == ord(",") or self.items or (isinstance(item, bytes) and item.strip(b" \t\r\n")):
                        yield item  # not the empty list's nothing
                    self.items += 1
                    if char == ord("]"):
                        self.depth, self.ended = 0, True
        if self.depth:
            self.item.add(block[mark:])


def json_items(fh: IO[bytes], path: Path, limit: int) -> Iterator[bytes | Overlong]:
    """The items of the JSON list a file holds, each as its bytes (an item over ``limit`` bytes
    as an :class:`Overlong`, never held whole), read :data:`_READ_BYTES` at a time.

    Raises:
        ConfigError: The file is not one list (it starts with something else, has text after
            it, or ends inside it), or cannot be read.
    """
    scan = _ListScan(path, limit)
    first = True
    while True:
        try:
            block = fh.read(_READ_BYTES)
        except OSError as exc:
            raise ConfigError(f"cannot read dataset file {path}: {exc.strerror or exc}") from exc
        if not block:
            break
        if first:
            block, first = block.removeprefix(codecs.BOM_UTF8), False
        yield from scan.scan(block)
    if not scan.started:
        raise scan.fail("it is empty")
    if not scan.ended:
        raise scan.fail("it ends before the list is closed (is it cut short?)")


# --- CSV ----------------------------------------------------------------------------------


def csv_rows(fh: IO[bytes], path: Path, limit: int) -> Iterator[dict[str, Any] | Overlong]:
    """A CSV file's rows (a header row first; every cell a string, nothing turned into NaN),
    parsed :data:`CSV_CHUNK_ROWS` at a time; a row whose cells hold more than ``limit`` bytes
    as an :class:`Overlong`.

    Raises:
        ConfigError: pandas cannot parse the file (the message names the file and says why).
    """
    import pandas as pd

    try:
        # Every cell as a string, nothing turned into NaN: "" means absent.
        chunks = pd.read_csv(
            fh, dtype=str, keep_default_na=False, na_values=[], encoding="utf-8-sig", chunksize=CSV_CHUNK_ROWS
        )
        with chunks:
            for frame in chunks:
                for row in frame.to_dict(orient="records"):
                    size = sum(_text_size(v) for v in row.values() if isinstance(v, str))
                    yield _overlong_row(size, row.get("id")) if size > limit else row
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and pandas' ParserError are ValueErrors
        raise ConfigError(f"cannot read {path} as CSV: {_reason(exc)}") from exc


def _overlong_row(size: int, given_id: Any) -> Overlong:
    """A CSV or Parquet row over the bound, named by its id where it has a short one."""
    named = isinstance(given_id, str | int) and not isinstance(given_id, bool) and len(str(given_id)) <= 200
    return Overlong(size, str(given_id), is_id=True) if named and str(given_id) else Overlong(size, "")


def _text_size(text: str) -> int:
    """UTF-8 bytes of ``text``, counted without encoding it where its length settles it."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _reason(exc: BaseException) -> str:
    """What an error says, never empty (pyarrow's MemoryError, say, says nothing)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
