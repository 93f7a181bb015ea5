"""Compiled Outlines indexes, kept in the process and on disk, and the keys that name them.

Building an outlines-core ``Index`` walks the schema's regex automaton over every token of
the vocabulary: 4-6 s for the Aspect Critic schema over Qwen2.5's 151k tokens, 12 s over
Gemma's 262k (2 AMD EPYC cores), and again for each engine load. An index depends only on
the vocabulary's content, the regex and the outlines-core version, so it is built once:

- in the process, a small LRU keeps the last indexes used (bounded by their encoded size:
  an index holds ~1.8 times its encoding in memory, 420 MB for the Qwen one above);
- on disk, under ``$LOCALJURY_HOME/index-cache/``, one file per index (bounded too, the
  least recently used go first). ``LOCALJURY_INDEX_CACHE=0`` turns the disk cache off.

A file is a magic line, a JSON header line, then the payload: the index's own bincode
encoding (what ``Index.__reduce__`` pickles, read back by ``Index.from_binary``). The header
holds the whole key material (:func:`key_material`: the layout, the regex, the vocabulary's
digest, the outlines-core version), the payload's size and its SHA-256. The file's name is
only a digest of that material: on reading, the header's material is compared with the regex
and vocabulary asked for, field by field, so that an entry renamed, copied or relabelled for
another schema or tokenizer is never taken for this one.

A file is opened without following a link and without blocking, and read only if it is a
regular file (a FIFO, a device, a folder or a link in an entry's place would hang the run or
read something else). An entry that is not a regular file, or whose magic, material, size or
digest does not match, is refused with a warning, rebuilt and replaced, never decoded; a cache
folder that cannot be written only costs the rebuild, logged at debug level.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import stat
import sys
import tempfile
import time
import weakref
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

from outlines_core import Index, Vocabulary

from localjury._files import localjury_home
from localjury.engines.constrain.lru import Lru

log = logging.getLogger(__name__)


#: The file layout, in the magic line and in the key material (entries of another layout have
#: other names, and are pruned in time).
LAYOUT = 2
#: Names the file layout; a file of another layout is rebuilt.
MAGIC = b"localjury-index-cache 2\n"
#: Bytes a header may take beside its key material (size, digest, the JSON around them).
HEADER_SLACK = 512
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


#: Compiled indexes by :func:`index_key`.
INDEXES: Lru[str, Index] = Lru(MEMORY_ENTRIES, MEMORY_BUDGET)
#: Outlines vocabularies by :func:`tokenizer_key` (a few MB each).
VOCABULARIES: Lru[str, Vocabulary] = Lru(4)
_TOKENIZER_KEYS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def build_index(regex: str, vocabulary: Vocabulary) -> Index:
    """Compile ``regex`` over ``vocabulary`` (the costly step every cache level avoids)."""
    return Index(regex, vocabulary)


#: Seconds a build takes per vocabulary token (12.3 s for Gemma's 262k, 6 s for Qwen2.5's 151k,
#: on 2 AMD EPYC cores): the estimate a long build announces.
BUILD_SECONDS_PER_TOKEN = 4.5e-5
#: Builds estimated to take at least this many seconds are announced on stderr.
ANNOUNCE_SECONDS = 3.0


def announce_build(tokens: int, folder: Path | None) -> None:
    """Say on stderr that a long index build starts, about how long it takes, and that it is
    kept (where) so that it is done once; a short one goes unsaid."""
    estimate = tokens * BUILD_SECONDS_PER_TOKEN
    if estimate < ANNOUNCE_SECONDS:
        return
    kept = f"kept in {folder}" if folder is not None else "not kept on disk: LOCALJURY_INDEX_CACHE is off"
    print(
        f"localjury: building the output constraint over {tokens:,} tokens (about {estimate:.0f} s on 2 cores, "
        f"once per schema and tokenizer; {kept})",
        file=sys.stderr,
        flush=True,
    )


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
    wrong index. :func:`~localjury.engines.constrain.schemas.vocabulary_of_tokenizer` inserts in token
    id order, so its vocabularies encode the same in every process.
    """
    payload = _encoding(vocabulary)
    return hashlib.sha256(payload).hexdigest()


def key_material(regex: str, vocabulary_digest: str) -> dict[str, Any]:
    """What an index depends on: the regex, the vocabulary's digest (:func:`vocabulary_key`),
    the outlines-core version that encodes it, and the file layout. An entry's header holds it
    whole, and it must equal this on reading."""
    return {"layout": LAYOUT, "regex": regex, "vocabulary": vocabulary_digest, "outlines_core": outlines_core_version()}


def index_key(regex: str, vocabulary_digest: str) -> str:
    """The name of the index of ``regex`` over the vocabulary of ``vocabulary_digest``: a
    digest of its :func:`key_material`."""
    material = key_material(regex, vocabulary_digest)
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def disk_folder() -> Path | None:
    """``$LOCALJURY_HOME/index-cache``, or None when ``LOCALJURY_INDEX_CACHE`` turns it off."""
    if os.environ.get("LOCALJURY_INDEX_CACHE", "").strip().lower() in {"0", "false", "no", "off"}:
        return None
    return localjury_home() / "index-cache"


def compiled_index(regex: str, vocabulary: Vocabulary, vocabulary_name: str | None = None) -> Index:
    """The index of ``regex`` over ``vocabulary``: from this process's cache, else from the
    disk cache, else built (and then kept in both).

    Args:
        regex: The regex the outputs must match (from a JSON schema).
        vocabulary: The Outlines vocabulary of the model's tokenizer.
        vocabulary_name: What names the vocabulary in the key, for one whose encoding differs
            from process to process (vLLM's): what it is made from. Default: its content
            (:func:`vocabulary_key`).

    Returns:
        The compiled index; shared between callers, which is safe as an ``Index`` is immutable.
    """
    name = vocabulary_name if vocabulary_name is not None else vocabulary_key(vocabulary)
    material = key_material(regex, name)
    key = index_key(regex, material["vocabulary"])
    index = INDEXES.get(key)
    if index is not None:
        return index
    folder = disk_folder()
    loaded = read_entry(folder / f"{key}.idx", material) if folder is not None else None
    if loaded is not None:
        index, weight = loaded
    else:
        announce_build(len(vocabulary), folder)
        index = build_index(regex, vocabulary)
        weight = write_entry(folder, material, index) if folder is not None else len(vocabulary) * BYTES_PER_TOKEN
    INDEXES.put(key, index, weight)
    return index


def read_entry(path: Path, material: dict[str, Any]) -> tuple[Index, int] | None:
    """The index stored at ``path`` and its encoded size, or None when the file is missing or
    is not a regular file holding a whole, intact entry for ``material`` (:func:`key_material`);
    such a file is refused with a warning (the caller rebuilds it and replaces it)."""
    try:
        # No link followed, and no wait: opening a FIFO for reading would block until a writer came.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _refuse(path, "is a symbolic link, not a regular file")
            return None
        log.debug("index cache: cannot read %s: %s", path, exc)
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            _refuse(path, "is not a regular file")
            return None
        with open(fd, "rb", closefd=False) as fh:
            header = _header(fh.readline(len(MAGIC)), fh.readline(len(json.dumps(material)) + HEADER_SLACK))
            problem = _mismatch(header, material, info.st_size - fh.tell())
            payload = fh.read(header["size"]) if problem is None else b""
        if problem is None and hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            problem = "does not match its digest (damaged)"
        if problem is not None:
            _refuse(path, problem)
            return None
        with contextlib.suppress(OSError):
            os.utime(fd)  # the pruning removes the least recently used first
    except OSError as exc:
        log.debug("index cache: cannot read %s: %s", path, exc)
        return None
    finally:
        os.close(fd)
    # Decoded only once checked: outlines-core is built with panic=abort, so bytes it cannot
    # decode must never reach it.
    try:
        index = Index.from_binary(payload)
    except ValueError as exc:
        _refuse(path, f"cannot be decoded ({exc})")
        return None
    return index, len(payload)


def _mismatch(header: dict[str, Any], material: dict[str, Any], payload_size: int) -> str | None:
    """Why an entry's header does not fit the entry asked for and the file's size; None if it does."""
    if not header:
        return "is not an index-cache entry of this layout"
    for field, value in material.items():
        if header.get(field) != value:
            return f"was written for another {field} ({_shown(header.get(field))}), not the one asked for"
    size = header.get("size")
    if type(size) is not int or size != payload_size or size > DISK_BUDGET:
        return f"holds {payload_size:,} bytes of payload where its header says {_shown(size)}"
    return None


def _refuse(path: Path, problem: str) -> None:
    log.warning("index cache: %s %s; rebuilding it and replacing it", path, problem)


def _shown(value: Any) -> str:
    """A header field for a message: its JSON, cut to 80 characters."""
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:80] + "..."


def write_entry(folder: Path, material: dict[str, Any], index: Index) -> int:
    """Store ``index`` as ``folder/<key>.idx`` at once (a temporary file beside it, renamed
    over whatever held that name) and prune the folder; return the encoding's size (also when
    the folder cannot be written, which is only logged)."""
    key = index_key(material["regex"], material["vocabulary"])
    payload = _encoding(index)
    header = {**material, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    tmp: str | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC)
            fh.write(json.dumps(header).encode() + b"\n")
            fh.write(payload)
        # No fsync: a file cut short by a crash fails its size check and is rebuilt.
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
    # cannot be removed is skipped, never an error. lstat: a link counts as itself, never as
    # what it points at (it is refused on reading, and replaced).
    for path in paths:
        try:
            info = path.lstat()
            if path.name.endswith(".tmp"):
                if now - info.st_mtime > STALE_TMP_S:
                    path.unlink(missing_ok=True)
            elif path.suffix == ".idx" and stat.S_ISREG(info.st_mode):
                total += info.st_size
                if path.name != keep:
                    entries.append((info.st_mtime, info.st_size, path))
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
    except (ValueError, RecursionError):  # RecursionError: brackets nested past Python's stack
        header = None
    return header if isinstance(header, dict) else {}


def _encoding(obj: Index | Vocabulary) -> bytes:
    """The bincode encoding outlines-core pickles ``obj`` as (``__reduce__`` gives
    ``(from_binary, (bytes,))``)."""
    payload = obj.__reduce__()[1][0]
    if not isinstance(payload, bytes):  # pragma: no cover - another outlines-core layout
        raise TypeError(f"outlines-core {outlines_core_version()} does not encode {type(obj).__name__} as bytes")
    return payload
