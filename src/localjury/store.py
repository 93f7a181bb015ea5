"""The judgment store: every generation a run makes, keyed by a content hash, in SQLite.

It is the cache and the resume journal at once. A key hashes everything that decides a
generation: the model's identity (a hash of its weight, config and tokenizer files), the
engine, the chat messages, the JSON schema, the number of samples and the index of the
first, the sampling settings and the run seed. A run looks every prompt up before it
generates, and commits what it generated after each chunk: a run killed at any point
(SIGKILL included) loses at most the chunk in flight, and the same command run again
generates only what is missing. Changing one criterion changes only its prompts' keys.

SQLite in WAL mode makes every commit atomic and durable; nothing is held in memory but
the chunk at hand.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from localjury.engines.base import Completion
from localjury.errors import ConfigError

#: What a stored generation is: the samples, or why the prompt could not run at all.
Stored = list[Completion] | str

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
)
"""


class GenerationStore(Protocol):
    """What a model pass reads generations from and writes them to: the judgment store, or
    (on a replica of a sharded run) the shard's generations in memory."""

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        """The stored generations among ``keys``."""
        ...

    def put_many(self, items: Mapping[str, Stored]) -> None:
        """Store generations."""
        ...


def generation_key(**parts: Any) -> str:
    """A stable hash of everything that decides one generation."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _encode(value: Stored) -> str:
    if isinstance(value, str):
        return json.dumps({"error": value})
    return json.dumps({"samples": [[c.text, c.n_tokens, c.finished] for c in value]}, ensure_ascii=False)


def _decode(text: str) -> Stored:
    data = json.loads(text)
    if "error" in data:
        return str(data["error"])
    return [Completion(text=t, n_tokens=n, finished=f) for t, n, f in data["samples"]]


class JudgmentStore:
    """Generations by key, in one SQLite file.

    Args:
        path: The database file; created with its folder when missing.

    Raises:
        ConfigError: The file exists but is not a localjury store (or is corrupt).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"judgment cache {self.path} is not usable ({exc}); delete it or pass --cache") from None

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        """The stored generations among ``keys``."""
        found: dict[str, Stored] = {}
        wanted = list(dict.fromkeys(keys))
        for start in range(0, len(wanted), 500):  # SQLite's limit on bound parameters
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            for key, value in self._db.execute(f"SELECT key, value FROM generations WHERE key IN ({marks})", part):
                found[key] = _decode(value)
        return found

    def put_many(self, items: Mapping[str, Stored]) -> None:
        """Store generations in one transaction (all or nothing)."""
        if not items:
            return
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO generations (key, value) VALUES (?, ?)",
                [(k, _encode(v)) for k, v in items.items()],
            )

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        self._db.close()
