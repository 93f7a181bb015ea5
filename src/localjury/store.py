"""The judgment store: every generation a run makes, keyed by a content hash, in SQLite.

It is the cache and the resume journal at once. A key hashes everything that decides a
generation: the model's identity (a hash of its weight, config and tokenizer files), the
engine, the chat messages, the JSON schema, the number of samples and the index of the
first, the sampling settings and the run seed. A run looks every prompt up before it
generates, and commits what it generated after each chunk: a run killed at any point
(SIGKILL included) loses at most the chunk in flight, and the same command run again
generates only what is missing. Changing one criterion changes only its prompts' keys.

SQLite in WAL mode makes every commit atomic and durable; nothing is held in memory but
the chunk at hand. Opening a store checks its pages (``PRAGMA quick_check``, ~30 ms for
100k generations) so that a corrupt file stops a run before any model loads; an SQLite
failure later (a full disk, a lock held too long, corruption in a page not yet read) is a
:class:`~localjury.errors.StoreError` naming the file and the fix.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from localjury.errors import ConfigError, StoreError
from localjury.types import Completion, Stored

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
)
"""
#: ``PRAGMA application_id`` of a judgment store ("LJRY"): a database without it is not ours.
APPLICATION_ID = 0x4C4A5259
#: ``PRAGMA user_version``: the store's format; a newer one is refused.
SCHEMA_VERSION = 1
#: ``PRAGMA table_info(generations)`` of the format: how a store made before the marker is known.
_COLUMNS = [(0, "key", "TEXT", 0, None, 1), (1, "value", "TEXT", 1, None, 0)]

#: The way out of a store that cannot be used, whatever the cause.
# Settings are named as `name` (or `name=value`): the CLI shows its flags in their place.
_ELSEWHERE = "pass another file as `cache`, or `use_cache=False`"
#: The way out of a corrupt store: it holds nothing a run cannot generate again.
_CORRUPT_FIX = f"move it aside or delete it (it only caches generations: the run generates them again), or {_ELSEWHERE}"


class GenerationStore(Protocol):
    """What a model pass reads generations from and writes them to: the judgment store, or
    (on a replica of a sharded run) the shard's generations in memory."""

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        """The stored generations among ``keys``."""
        ...

    def put_many(self, items: Mapping[str, Stored]) -> None:
        """Store generations."""
        ...


def _encode(value: Stored) -> str:
    if isinstance(value, str):
        return json.dumps({"error": value})
    samples = []
    for c in value:
        probs = list(c.verdict_probs) if c.verdict_probs is not None else None
        # [text, tokens, finished], then the probabilities where there are some, then the thinking.
        rest = [probs, c.thinking] if c.thinking is not None else [probs] if probs is not None else []
        samples.append([c.text, c.n_tokens, c.finished, *rest])
    return json.dumps({"samples": samples}, ensure_ascii=False)


def _decode(text: str) -> Stored:
    data = json.loads(text)
    if "error" in data:
        return str(data["error"])
    # A sample stored without verdict probabilities (older stores, engines that give none)
    # has three fields; one that thought, five (its probabilities may be null).
    return [
        Completion(
            text=t,
            n_tokens=n,
            finished=f,
            verdict_probs=_probs(rest[0]) if rest and rest[0] is not None else None,
            thinking=rest[1] if len(rest) > 1 else None,
        )
        for t, n, f, *rest in data["samples"]
    ]


def _probs(values: list[Any]) -> tuple[float, ...] | None:
    """Stored verdict probabilities, or None where they are not all probabilities: a store
    written before engines checked their log-probabilities may hold NaN, which would reach a
    score (json reads the NaN it wrote)."""
    probs = tuple(values)
    ok = all(isinstance(p, int | float) and math.isfinite(p) and -1e-6 <= p <= 1 + 1e-6 for p in probs)
    return probs if ok else None


class JudgmentStore:
    """Generations by key, in one SQLite file.

    A new or empty file is made a store, marked as localjury's (``PRAGMA application_id``
    and ``user_version``); a store an earlier localjury made (its ``generations`` table and
    nothing else) is marked; any other SQLite database is refused, untouched.

    Args:
        path: The database file; created with its folder when missing.
        timeout: Seconds to wait for a lock another process holds (another run on the same
            file) before giving up.

    Attributes:
        kept: The samples this connection committed (what a failed run can say it kept).
        closed: Whether :meth:`close` was called.

    Raises:
        ConfigError: The path is a folder, not a regular file or cannot be created, a file
            SQLite keeps beside it is a link or not its own, the file or its folder is
            read-only, the file is not an SQLite database, another program's database, a
            newer localjury's store, or corrupt.
    """

    def __init__(self, path: str | Path, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.kept = 0
        self.closed = False
        where = f"judgment cache {self.path}"
        if self.path.is_dir():
            raise ConfigError(
                f"{where} is a folder; pass a file path as `cache` (e.g. {self.path / 'judgments.sqlite'}), "
                "or `use_cache=False`"
            )
        _refuse_foreign_files(self.path, where)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the folder {self.path.parent} of {where} ({exc.strerror or exc}); {_ELSEWHERE}"
            ) from None
        # Checked here because SQLite may open a read-only file without complaint and fail at
        # the first write, after the models loaded.
        if self.path.exists() and not os.access(self.path, os.W_OK):
            raise ConfigError(
                f"{where} is not usable: the file is read-only; make it writable (chmod u+w {self.path}), "
                f"or {_ELSEWHERE}"
            )
        if not os.access(self.path.parent, os.W_OK):
            raise ConfigError(
                f"{where} is not usable: its folder {self.path.parent} is not writable (SQLite writes "
                f"{self.path.name}-wal and {self.path.name}-shm beside the file); make the folder writable, "
                f"or {_ELSEWHERE}"
            )
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout)
        except sqlite3.Error as exc:
            raise ConfigError(f"{where} is not usable: {exc}; {_ELSEWHERE}") from None
        try:
            problems = [row[0] for row in self._db.execute("PRAGMA quick_check(1)")]
            if problems != ["ok"]:
                raise ConfigError(f"{where} is corrupt (SQLite quick_check: {_one_line(problems)}); {_CORRUPT_FIX}")
            marked = _require_ours(self._db, where)  # before anything writes: another program's file stays as it is
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            if not marked:
                self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._db.commit()
        except sqlite3.Error as exc:
            self._db.close()
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code == sqlite3.SQLITE_NOTADB:
                raise ConfigError(f"{where} is not usable: not a SQLite database ({exc}); {_CORRUPT_FIX}") from None
            raise ConfigError(f"{where} is not usable: {exc}; {_fix(exc, self)}") from None
        except ConfigError:
            self._db.close()
            raise

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn an SQLite failure into a StoreError naming the file, SQLite's words and the fix."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot {action} judgment cache {self.path}: {exc}; {_fix(exc, self)}", path=self.path
            ) from exc

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        """The stored generations among ``keys``.

        Raises:
            StoreError: SQLite failed (see :class:`JudgmentStore`).
        """
        found: dict[str, Stored] = {}
        wanted = list(dict.fromkeys(keys))
        with self._guard("read from"):
            for start in range(0, len(wanted), 500):  # SQLite's limit on bound parameters
                part = wanted[start : start + 500]
                marks = ",".join("?" * len(part))
                for key, value in self._db.execute(f"SELECT key, value FROM generations WHERE key IN ({marks})", part):
                    try:
                        found[key] = _decode(value)
                    except (ValueError, KeyError, TypeError) as exc:  # a value written by no localjury
                        raise StoreError(
                            f"judgment cache {self.path} holds an unreadable generation ({type(exc).__name__}: "
                            f"{exc}); {_CORRUPT_FIX}",
                            path=self.path,
                        ) from exc
        return found

    def put_many(self, items: Mapping[str, Stored]) -> None:
        """Store generations in one transaction (all or nothing).

        Raises:
            StoreError: SQLite failed: a full disk, a lock held past ``timeout``, a read-only
                file, corruption.
        """
        if not items:
            return
        with self._guard("write to"), self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO generations (key, value) VALUES (?, ?)",
                [(k, _encode(v)) for k, v in items.items()],
            )
        self.kept += sum(len(v) for v in items.values() if not isinstance(v, str))

    def __len__(self) -> int:
        with self._guard("count the generations in"):
            return int(self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        self._db.close()
        self.closed = True


#: The files SQLite writes beside a database: a journal, a write-ahead log and its index.
SIDE_FILES = {"-journal": "rollback journal", "-wal": "write-ahead log", "-shm": "write-ahead log index"}


def _refuse_foreign_files(path: Path, where: str) -> None:
    """Refuse, before SQLite opens anything, a store that is not a regular file (``/dev/null``:
    SQLite would create ``/dev/null-journal``) and files beside it that SQLite would write
    into and that are not its own: a symbolic link (SQLite 3.40 refuses one, without saying
    which), anything but a regular file, or a file with another hard link (SQLite writes
    through it into that other file).

    Raises:
        ConfigError: Naming the file, what it is, and the fix.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = stat.S_IFREG  # missing (made below), or unreadable: SQLite says which
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"{where} is not a regular file, so it is not opened (SQLite would write its journal beside it); "
            f"pass a regular file as `cache`, or `use_cache=False`"
        )
    # SQLite resolves a link to the database, and keeps these files beside the file it names.
    real = Path(os.path.realpath(path))
    for suffix, kind in SIDE_FILES.items():
        side = real.with_name(real.name + suffix)
        try:
            st = os.lstat(side)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            problem = "is a symbolic link"
        elif not stat.S_ISREG(st.st_mode):
            problem = "is not a regular file"
        elif st.st_nlink > 1:
            problem = "has another hard link (SQLite would write into that other file)"
        else:
            continue
        raise ConfigError(
            f"{where} is not opened: {side}, where SQLite keeps its {kind}, {problem}; remove it (check what it "
            f"is first: SQLite makes only plain files there), or {_ELSEWHERE}"
        )


def _require_ours(db: sqlite3.Connection, where: str) -> bool:
    """Refuse a database that is not a judgment store (by its marker, or for a store made
    before the marker, by its one table and that table's columns) or is a newer one's;
    whether it is marked already.

    Raises:
        ConfigError: Naming what the file holds and the fix.
    """
    app = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if app == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"{where} was written by a newer localjury (store format {version}; this one reads up to "
                f"{SCHEMA_VERSION}); upgrade localjury, or {_ELSEWHERE}"
            )
        return True
    objects = [
        name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name")
    ]
    earlier = objects == ["generations"] and list(db.execute("PRAGMA table_info(generations)")) == _COLUMNS
    if (not objects or earlier) and app == 0:
        return False
    holds = (
        f"application_id {app:#x}"
        if app
        else f"tables: {', '.join(objects[:5])}" + (f" and {len(objects) - 5} more" if len(objects) > 5 else "")
    )
    raise ConfigError(
        f"{where} is not a localjury judgment store: it is another program's SQLite database ({holds}), "
        f"left as it is; {_ELSEWHERE}"
    )


def _one_line(problems: list[str]) -> str:
    """quick_check's report, without its ``*** in database main ***`` heading, on one line."""
    lines = [line.strip() for text in problems for line in text.splitlines()]
    return "; ".join(line for line in lines if line and not line.startswith("***"))


def _fix(exc: sqlite3.Error, store: JudgmentStore) -> str:
    """What to do about an SQLite error on ``store``, by SQLite's primary result code."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return f"the file is corrupt: {_CORRUPT_FIX}"
    if code == sqlite3.SQLITE_FULL:
        return (
            f"free space on the disk of {store.path.parent} and run again (a run resumes from its last stored "
            "chunk), or pass a file on another disk as `cache`, or `use_cache=False`"
        )
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return (
            f"another process (another localjury run on the same file?) held its lock for more than "
            f"{store.timeout:g} s; wait for it to end and run again, or pass another file as `cache`"
        )
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN):
        return f"make the file and its folder writable, or {_ELSEWHERE}"
    return f"check the disk, or {_ELSEWHERE}"
