"""Compiled Outlines indexes, kept in the process and on disk, and the keys that name them.

Building an outlines-core ``Index`` walks the schema's regex automaton over every token of
the vocabulary: 4-6 s for the Aspect Critic schema over Qwen2.5's 151k tokens, 12 s over
Gemma's 262k (2 AMD EPYC cores), and again for each engine load. An index depends only on
the vocabulary's content, the regex and the outlines-core version, so it is built once:

- in the process, a small LRU keeps the last indexes used (bounded by their encoded size:
  an index holds ~1.8 times its encoding in memory, 420 MB for the Qwen one above);
- on disk, under ``$LOCALJURY_HOME/index-cache/``, one file per index (bounded too, the
  least recently used go first). ``LOCALJURY_INDEX_CACHE=0`` turns the disk cache off.

A file is a magic line, a JSON header line (key, outlines-core version, payload size and
SHA-256), then the payload: the index's own bincode encoding (what ``Index.__reduce__``
pickles, read back by ``Index.from_binary``). A file whose header, size or digest does not
match is rebuilt and replaced, never decoded; a cache folder that cannot be written only
costs the rebuild, logged at debug level.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any, Generic, TypeVar

from outlines_core import Index, Vocabulary

from localjury.models.registry import localjury_home

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Names the file layout; a file of another layout is rebuilt.
MAGIC = b"localjury-index-cache 1\n"
#: The in-process cache keeps indexes up to this many bytes of encoding (~1.8 GiB in memory).
MEMORY_BUDGET = 1 << 30
#: ... and at most this many of them, whatever their size.
MEMORY_ENTRIES = 16
#: The disk cache keeps files up to this many bytes; the least recently used go first.
DISK_BUDGET = 8 << 30
#: Without an encoding to measure (disk cache off), an index weighs this much per token of
#: its vocabulary: the Aspect Critic index measured 1.6 kB per token on Qwen2.5's vocabulary.
BYTES_PER_TOKEN = 2048
#: A temporary file older than this was left by a writer that died; pruning removes it.
STALE_TMP_S = 3600.0


class Lru(Generic[K, V]):
    """A thread-safe least-recently-used map bounded by entry count and by total weight.

    Args:
        entries: The most entries kept.
        budget: The most total weight kept (None: only the count bounds it). An entry heavier
            than the whole budget is not kept at all.
    """

    def __init__(self, entries: int, budget: int | None = None) -> None:
        self.entries = entries
        self.budget = budget
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: K, value: V, weight: int = 1) -> None:
        """Keep ``value`` under ``key``, dropping the least recently used beyond the bounds."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            if self.budget is not None and weight > self.budget:
                return
            self._items[key] = (value, weight)
            self._weight += weight
            while len(self._items) > self.entries or (self.budget is not None and self._weight > self.budget):
                self._weight -= self._items.popitem(last=False)[1][1]

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value under ``key``, made and kept if absent (two threads may both make it)."""
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._items.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._items)


#: Compiled indexes by :func:`index_key`.
INDEXES: Lru[str, Index] = Lru(MEMORY_ENTRIES, MEMORY_BUDGET)
#: Outlines vocabularies by :func:`tokenizer_key` (a few MB each).
VOCABULARIES: Lru[str, Vocabulary] = Lru(4)
_TOKENIZER_KEYS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def build_index(regex: str, vocabulary: Vocabulary) -> Index:
    """Compile ``regex`` over ``vocabulary`` (the costly step every cache level avoids)."""
    return Index(regex, vocabulary)


@cache
def outlines_core_version() -> str:
    """The installed outlines-core version: an index's encoding is only read by the same one."""
    return version("outlines_core")


def tokenizer_key(hf_tokenizer: Any) -> str | None:
    """A digest of what a Hugging Face tokenizer's Outlines vocabulary and decision tokens are
    made from: its class, its whole ``tokenizer.json`` (tokens, merges, added tokens, decoder)
    and its end-of-sequence token. None for a tokenizer without a Rust backend (a "slow" one),
    whose derived values are then not cached.

    Computed once per tokenizer object (60 ms for Qwen2.5's): an engine adds no token to its
    tokenizer after loading it.
    """
    try:
        return _TOKENIZER_KEYS[hf_tokenizer]
    except (KeyError, TypeError):
        pass
    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    digest = hashlib.sha256()
    kind = type(hf_tokenizer)
    for part in (kind.__module__, kind.__qualname__, repr(hf_tokenizer.eos_token), repr(hf_tokenizer.eos_token_id)):
        digest.update(part.encode() + b"\0")
    digest.update(backend.to_str().encode())
    key = digest.hexdigest()
    with contextlib.suppress(TypeError):  # an object that cannot be weakly referenced: no memo
        _TOKENIZER_KEYS[hf_tokenizer] = key
    return key


def vocabulary_key(vocabulary: Vocabulary) -> str:
    """SHA-256 of a vocabulary's content: its bincode encoding (every token, its ids, and the
    end-of-sequence id), 15 ms for 151k tokens.

    The encoding follows the insertion order of the vocabulary's hash map, so the same tokens
    inserted in another order can encode differently: that only costs a cache miss, never a
    wrong index. :func:`~localjury.engines._outlines.vocabulary_of_tokenizer` inserts in token
    id order, so its vocabularies encode the same in every process.
    """
    payload = _encoding(vocabulary)
    return hashlib.sha256(payload).hexdigest()


def index_key(regex: str, vocabulary_digest: str) -> str:
    """The name of the index of ``regex`` over the vocabulary of ``vocabulary_digest``."""
    parts = {"regex": regex, "vocabulary": vocabulary_digest, "outlines_core": outlines_core_version()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def disk_folder() -> Path | None:
    """``$LOCALJURY_HOME/index-cache``, or None when ``LOCALJURY_INDEX_CACHE`` turns it off."""
    if os.environ.get("LOCALJURY_INDEX_CACHE", "").strip().lower() in {"0", "false", "no", "off"}:
        return None
    return localjury_home() / "index-cache"


def compiled_index(regex: str, vocabulary: Vocabulary) -> Index:
    """The index of ``regex`` over ``vocabulary``: from this process's cache, else from the
    disk cache, else built (and then kept in both).

    Args:
        regex: The regex the outputs must match (from a JSON schema).
        vocabulary: The Outlines vocabulary of the model's tokenizer.

    Returns:
        The compiled index; shared between callers, which is safe as an ``Index`` is immutable.
    """
    key = index_key(regex, vocabulary_key(vocabulary))
    index = INDEXES.get(key)
    if index is not None:
        return index
    folder = disk_folder()
    loaded = read_entry(folder / f"{key}.idx", key) if folder is not None else None
    if loaded is not None:
        index, weight = loaded
    else:
        index = build_index(regex, vocabulary)
        weight = write_entry(folder, key, index) if folder is not None else len(vocabulary) * BYTES_PER_TOKEN
    INDEXES.put(key, index, weight)
    return index


def read_entry(path: Path, key: str) -> tuple[Index, int] | None:
    """The index stored at ``path`` and its encoded size, or None when the file is missing or
    is not a whole, intact entry for ``key`` written by this outlines-core version."""
    try:
        with open(path, "rb") as fh:
            header = _header(fh.readline(len(MAGIC)), fh.readline(4096))
            ours = header.get("key") == key and header.get("outlines_core") == outlines_core_version()
            payload = fh.read() if ours else b""
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.debug("index cache: cannot read %s: %s", path, exc)
        return None
    # The digest is checked before decoding: outlines-core is built with panic=abort, so bytes
    # it cannot decode must never reach it.
    if not (
        ours and header.get("size") == len(payload) and header.get("sha256") == hashlib.sha256(payload).hexdigest()
    ):
        log.debug("index cache: %s is not an intact entry for this version; rebuilding it", path)
        return None
    try:
        index = Index.from_binary(payload)
    except ValueError as exc:
        log.debug("index cache: cannot decode %s: %s; rebuilding it", path, exc)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # the pruning removes the least recently used first
    return index, len(payload)


def write_entry(folder: Path, key: str, index: Index) -> int:
    """Store ``index`` as ``folder/<key>.idx`` at once (a temporary file beside it, renamed
    over it) and prune the folder; return the encoding's size (also when the folder cannot be
    written, which is only logged)."""
    payload = _encoding(index)
    header = {
        "key": key,
        "outlines_core": outlines_core_version(),
        "size": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    tmp: str | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC)
            fh.write(json.dumps(header).encode() + b"\n")
            fh.write(payload)
        # No fsync: a file cut short by a crash fails its digest check and is rebuilt.
        os.replace(tmp, folder / f"{key}.idx")
        tmp = None
    except OSError as exc:
        log.debug("index cache: cannot write to %s: %s", folder, exc)
        return len(payload)
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    prune(folder, DISK_BUDGET, keep=f"{key}.idx")
    return len(payload)


def prune(folder: Path, budget: int, keep: str | None = None) -> None:
    """Remove the least recently used entries until the folder holds at most ``budget``
    bytes (never ``keep``), and temporary files left by writers that died."""
    entries: list[tuple[float, int, Path]] = []
    total = 0
    now = time.time()
    try:
        paths = list(folder.iterdir())
    except OSError as exc:
        log.debug("index cache: cannot list %s: %s", folder, exc)
        return
    # Another process may prune or write the same folder meanwhile: a file that vanished or
    # cannot be removed is skipped, never an error.
    for path in paths:
        try:
            stat = path.stat()
            if path.name.endswith(".tmp"):
                if now - stat.st_mtime > STALE_TMP_S:
                    path.unlink(missing_ok=True)
            elif path.suffix == ".idx":
                total += stat.st_size
                if path.name != keep:
                    entries.append((stat.st_mtime, stat.st_size, path))
        except OSError:
            continue
    for _, size, path in sorted(entries):
        if total <= budget:
            break
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            log.debug("index cache: cannot remove %s: %s", path, exc)
        total -= size


def _header(magic: bytes, line: bytes) -> dict[str, Any]:
    """An entry's header fields; empty when the file does not start as an entry does."""
    try:
        header = json.loads(line) if magic == MAGIC else None
    except ValueError:
        header = None
    return header if isinstance(header, dict) else {}


def _encoding(obj: Index | Vocabulary) -> bytes:
    """The bincode encoding outlines-core pickles ``obj`` as (``__reduce__`` gives
    ``(from_binary, (bytes,))``)."""
    payload = obj.__reduce__()[1][0]
    if not isinstance(payload, bytes):  # pragma: no cover - another outlines-core layout
        raise TypeError(f"outlines-core {outlines_core_version()} does not encode {type(obj).__name__} as bytes")
    return payload
