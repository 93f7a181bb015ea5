"""A reviewer's labels, kept durably: every label is appended to a history file and flushed to
disk before it is acknowledged, then the labels file is rewritten from the history at once
(a temporary file renamed over it), one row per (record, metric), the last label winning.

The labels file is what ``localjury align``, ``bench -f jsonl`` and ``calibrate`` read: each row
is the record's fields with ``metric``, ``criterion``, ``gold`` (1: the response meets the
criterion), ``note`` and ``labeled_at``. The history (``LABELS.history.jsonl`` beside it) keeps
every label given, undone or replaced; a server killed between the two writes, or two servers
on the same labels, lose nothing: the labels file is rebuilt from the history under a lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from localjury._files import bounded_lines, parse_json
from localjury._writes import write_atomic
from localjury.errors import ConfigError

Key = tuple[str, str]


def history_path(labels: Path) -> Path:
    """Where the history of a labels file is kept."""
    return labels.with_name(labels.name + ".history.jsonl")


class LabelBook:
    """The labels of one labels file: read at open (from its history, else from the file as it
    stands), then kept in step with every writer of the same file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.history = history_path(path)
        self.labels: dict[Key, dict[str, Any]] = {}
        self.problems: list[str] = []
        self._read_to = 0
        self._thread_lock = threading.Lock()
        with self._locked():
            if self.history.exists():
                self._catch_up()
            elif path.exists():
                self._import(path)
            if self.labels or self.history.exists():
                self._compact()

    def get(self, key: Key) -> dict[str, Any] | None:
        """The label of (record id, metric), or None."""
        return self.labels.get(key)

    def put(self, row: dict[str, Any], gold: int | None, note: str | None = None) -> dict[str, Any] | None:
        """Label a record under a metric (``row``: the record's fields with ``metric`` and
        ``criterion``); ``gold`` None takes its label away. Return the label as now kept.

        Raises:
            ConfigError: ``gold`` is not 0, 1 or None; the row has no id or metric; the files
                cannot be written (the label is then not kept).
        """
        if gold not in (0, 1, None) or isinstance(gold, bool):
            raise ConfigError(f"a label's gold must be 0 or 1 (or none, to take it away), got {gold!r}")
        if not isinstance(row.get("id"), str) or not isinstance(row.get("metric"), str):
            raise ConfigError("a label needs the record's id and the metric's name")
        event = {**row, "gold": gold, "note": note or None, "labeled_at": datetime.now(UTC).isoformat()}
        with self._locked():
            self._catch_up()
            line = json.dumps(event, ensure_ascii=False) + "\n"
            try:
                with open(self.history, "a", encoding="utf-8") as fh:
                    fh.write(line)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as exc:
                raise ConfigError(f"cannot write the labels' history {self.history}: {exc.strerror or exc}") from exc
            self._catch_up()
            self._compact()
        return self.labels.get((row["id"], row["metric"]))

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the labels' lock: the threads of this server, and every other process."""
        lock = self.path.with_name(f".{self.path.name}.lock")
        with self._thread_lock:
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise ConfigError(f"cannot write beside the labels file {self.path}: {exc.strerror or exc}") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _catch_up(self) -> None:
        """Apply the history's lines written since the last read (by anyone)."""
        if not self.history.exists():
            return
        with open(self.history, "rb") as fh:
            fh.seek(self._read_to)
            for line in bounded_lines(fh, self.history, "labels' history"):
                if isinstance(line, bytes) and not line.endswith(b"\n"):
                    break  # a line cut short by a kill (see _mend_cut_line)
                at, self._read_to = self._read_to, fh.tell()
                if not isinstance(line, bytes):
                    self.problems.append(f"{self.history}, the line at byte {at}: {line.size:,} bytes; read past")
                    continue
                if not line.strip():
                    continue
                try:
                    self._apply(parse_json(line))
                except (ValueError, KeyError, TypeError) as exc:
                    self.problems.append(f"{self.history}, the line at byte {at}: not a label ({exc}); read past")
        self._mend_cut_line()

    def _mend_cut_line(self) -> None:
        """End the history with a newline where a killed writer left its last line cut short, so
        that the next label starts a line of its own (the cut one stays, read past)."""
        size = self.history.stat().st_size
        if size > self._read_to:
            with open(self.history, "ab") as fh:
                fh.write(b"\n")
            self.problems.append(
                f"{self.history}: a label cut short at byte {self._read_to} (a killed writer) read past"
            )
            self._read_to = size + 1

    def _apply(self, event: dict[str, Any]) -> None:
        key = (event["id"], event["metric"])
        if event["gold"] is None:
            self.labels.pop(key, None)
        else:
            self.labels.pop(key, None)  # the latest label last, in the file as in the history
            self.labels[key] = {k: v for k, v in event.items()}

    def _import(self, path: Path) -> None:
        """Start the history from a labels file written elsewhere (by hand, by another tool)."""
        with open(path, "rb") as fh:
            for n, line in enumerate(bounded_lines(fh, path, "labels file"), start=1):
                if not isinstance(line, bytes) or not line.strip():
                    continue
                try:
                    row = parse_json(line)
                except ValueError as exc:
                    raise ConfigError(f"{path}, line {n}: {exc}; a labels file holds one JSON object a line") from None
                if not isinstance(row, dict) or row.get("gold") not in (0, 1) or not isinstance(row.get("id"), str):
                    raise ConfigError(f"{path}, line {n}: not a label (an object with a string id and gold 0 or 1)")
                row.setdefault("metric", "")
                self._apply(row)
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in self.labels.values())
        write_atomic(self.history, text)
        self._read_to = self.history.stat().st_size

    def _compact(self) -> None:
        """Rewrite the labels file from the labels as they stand, at once."""
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in self.labels.values())
        try:
            write_atomic(self.path, text)
        except OSError as exc:
            raise ConfigError(f"cannot write the labels file {self.path}: {exc.strerror or exc}") from exc
