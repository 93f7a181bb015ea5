"""The names of the files a commit leaves beside its outputs, its journal, and the proof that a
journal is one localjury wrote.

A journal is only ever acted on when all of this holds (else :func:`read_journal` raises
:class:`UntrustedJournal` saying which rule failed, and nothing it names is touched):

- it is a regular file of at most :data:`MAX_JOURNAL_BYTES` with no other hard link, opened
  without following a symbolic link and without waiting on a FIFO;
- it is signed: an HMAC-SHA256 over its content with this user's commit key,
  ``$LOCALJURY_HOME/commit.key`` (32 random bytes, created ``0600`` on first use). The key
  never leaves that folder, so a journal planted by whoever wrote the folder (a data folder
  someone sent) cannot carry a valid signature; one written under another
  ``$LOCALJURY_HOME`` or by another user cannot either, and is reported like a planted one;
- it is its own set's: named after its anchor (its last file), every file it lists a plain
  name in the journal's folder (or, for a set written across folders, such as a summary
  given its own path, an absolute path without ``..``), every temporary file and backup a
  name of ours for that file beside it (:data:`OURS`), none of them a symbolic link or
  other non-regular file, and every identity it records on its folder's device.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import stat
from pathlib import Path
from typing import Literal, overload

from pydantic import BaseModel, ConfigDict, ValidationError

from localjury.errors import ConfigError
from localjury.models.registry import localjury_home

#: The marker in the name of every file localjury writes beside an output for itself.
MARK = "localjury"
#: A temporary file (``tmp``) or backup (``old``) of ours, beside its final path.
OURS = re.compile(rf"^\.(?P<name>.+)\.{MARK}\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.[0-9a-f]{{8}}\.(?P<kind>tmp|old)$")
#: A journal lists a handful of files: anything larger is not one of ours, and is not read.
MAX_JOURNAL_BYTES = 64 * 1024
#: How every file of ours beside an output is created: a new file or nothing (O_EXCL never opens
#: what is there, a symbolic link included; O_NOFOLLOW says so to every reader).
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: What the signature covers besides the content (so that the key signs nothing else).
_DOMAIN = b"localjury commit journal\0"
_KEY_BYTES = 32


def host() -> str:
    """This machine's name as it goes in a file name."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def own_name(path: Path, kind: str) -> Path:
    """A fresh name of ours beside ``path``: ``kind`` is ``tmp`` or ``old``."""
    return path.with_name(f".{path.name}.{MARK}.{host()}.{os.getpid()}.{secrets.token_hex(4)}.{kind}")


def journal_path(anchor: Path) -> Path:
    """The journal of a commit whose anchor is ``anchor``."""
    return anchor.with_name(f".{anchor.name}.{MARK}.commit")


Identity = tuple[int, int, int]
"""A file's device, inode and size: what a rename keeps and a rewrite changes."""


def identity(path: str | Path | None) -> Identity | None:
    """The identity of the file at ``path`` (not following a last symbolic link), or None."""
    if path is None:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size)


class Entry(BaseModel):
    """One file of a commit. In memory its paths are where the files are; in the journal
    they are names in the journal's folder (absolute paths for files in another folder)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    """The final path."""
    tmp: str | None
    """The temporary file holding the new content; None for a file the commit removes."""
    backup: str | None
    """The hard link keeping the previous file; None when there was none or none could be made."""
    new: Identity | None
    """The new file's identity."""
    old: Identity | None
    """The previous file's identity; None when the path held no file."""


class Journal(BaseModel):
    """What a commit in progress changes: read back by whoever settles it."""

    model_config = ConfigDict(extra="forbid")

    localjury_commit: Literal[2] = 2
    """The journal's format (1: unsigned, with paths as the command gave them; never honoured)."""
    pid: int
    """The committing process."""
    host: str
    """Its machine."""
    files: list[Entry]
    """In the order of the renames: the anchor last."""
    mac: str = ""
    """HMAC-SHA256 (hex) of the rest, with this user's commit key."""

    def signature(self, key: bytes) -> str:
        """The MAC of everything but ``mac``."""
        body = self.model_dump_json(exclude={"mac"}).encode()
        return hmac.new(key, _DOMAIN + body, hashlib.sha256).hexdigest()


class UntrustedJournal(Exception):
    """A journal localjury cannot prove it wrote for these files: never acted on.

    Attributes:
        journal: The file.
        reason: Which rule it fails, in words.
        names: The file names it lists (from its content, where readable): what it concerns.
    """

    def __init__(self, journal: Path, reason: str, names: frozenset[str] = frozenset()) -> None:
        super().__init__(f"{journal}: {reason}")
        self.journal = journal
        self.reason = reason
        self.names = names


# -- the key ------------------------------------------------------------------------------------
def key_path() -> Path:
    """``$LOCALJURY_HOME/commit.key``."""
    return localjury_home() / "commit.key"


@overload
def commit_key(*, create: Literal[True]) -> bytes: ...
@overload
def commit_key(*, create: bool) -> bytes | None: ...


def commit_key(*, create: bool) -> bytes | None:
    """This user's commit key; made on first use when ``create`` (else None when there is none).

    Raises:
        ConfigError: The key file is not one localjury made (a link, not a regular file, not
            the user's, readable by others, the wrong size), or cannot be created.
    """
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        if not create:
            return None
    try:
        return _create_key(path)
    except OSError as exc:
        raise ConfigError(
            f"cannot create localjury's commit key {path} ({exc.strerror or exc}): a commit signs its journal "
            "with it; set LOCALJURY_HOME to a folder you can write to"
        ) from None


def _read_key(path: Path) -> bytes:
    fix = f"remove {path} (localjury makes a new one; a commit cut short under the old key is then reported)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise
        raise ConfigError(f"cannot read localjury's commit key {path} ({_why(exc)}); {fix}") from None
    try:
        problem = _key_problem(os.fstat(fd))
        if problem:
            raise ConfigError(f"localjury's commit key {path} cannot be trusted: {problem}; {fix}")
        return os.pread(fd, _KEY_BYTES, 0)
    finally:
        os.close(fd)


def _key_problem(st: os.stat_result) -> str | None:
    """Why a key file is not one localjury made for this user (None when it is)."""
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_uid != os.geteuid():
        return "it belongs to another user"
    if st.st_mode & 0o077:
        return "others may read it (its mode lets the group or others in)"
    if st.st_size != _KEY_BYTES:
        return f"it is not {_KEY_BYTES} bytes long"
    return None


def _create_key(path: Path) -> bytes:
    """Write a fresh key whole under a temporary name, then link it into place: a second
    process making one at the same time reads the first one's, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    key = secrets.token_bytes(_KEY_BYTES)
    try:
        fd = os.open(tmp, NEW_FILE, 0o600)
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:  # another process made one meanwhile: that one is the key
            return _read_key(path)
    finally:
        tmp.unlink(missing_ok=True)
    return key


def _why(exc: OSError) -> str:
    return "it is a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))


# -- writing and reading ------------------------------------------------------------------------
def journal_bytes(journal: Path, entries: list[Entry], key: bytes) -> bytes:
    """The signed journal of ``entries`` (paths as they are), as it goes at ``journal``."""
    folder = os.path.abspath(journal.parent)

    def name(p: str | None) -> str | None:
        if p is None:
            return None
        full = os.path.abspath(p)
        return os.path.basename(full) if os.path.dirname(full) == folder else full

    files = [e.model_copy(update={"path": name(e.path), "tmp": name(e.tmp), "backup": name(e.backup)}) for e in entries]
    recorded = Journal(pid=os.getpid(), host=host(), files=files)
    recorded.mac = recorded.signature(key)
    return (recorded.model_dump_json(indent=1) + "\n").encode()


def read_journal(journal: Path, key: bytes | None) -> tuple[Journal, list[Entry]]:
    """Read a journal and check that localjury wrote it for its own files (see the module's
    docstring); the journal and its entries with the paths of their files.

    Raises:
        UntrustedJournal: Naming the rule it fails.
    """
    data = _read_bounded(journal)
    try:
        recorded = Journal.model_validate_json(data)
    except (ValidationError, ValueError) as exc:
        raise UntrustedJournal(journal, _unreadable(data, exc), _names_in(data)) from None
    names = frozenset(os.path.basename(e.path) for e in recorded.files)
    if key is None:
        raise UntrustedJournal(journal, f"there is no commit key ({key_path()}) to check its signature against", names)
    if not hmac.compare_digest(recorded.mac.encode(), recorded.signature(key).encode()):
        raise UntrustedJournal(journal, f"its signature does not match this user's commit key ({key_path()})", names)
    try:
        return recorded, _entries(journal, recorded)
    except ValueError as exc:
        raise UntrustedJournal(journal, str(exc), names) from None
    except OSError as exc:
        raise UntrustedJournal(journal, f"a folder it names cannot be looked at ({exc})", names) from None


def _read_bounded(journal: Path) -> bytes:
    try:
        fd = os.open(journal, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UntrustedJournal(journal, f"it cannot be opened as a file of its own ({_why(exc)})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedJournal(journal, "it is not a regular file")
        if st.st_nlink > 1:
            raise UntrustedJournal(journal, "it has other hard links (another file's content under its name)")
        if st.st_size > MAX_JOURNAL_BYTES:
            raise UntrustedJournal(journal, f"it is {st.st_size} bytes, more than any journal ({MAX_JOURNAL_BYTES})")
        return os.pread(fd, MAX_JOURNAL_BYTES + 1, 0)
    except OSError as exc:
        raise UntrustedJournal(journal, f"it cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _unreadable(data: bytes, exc: Exception) -> str:
    if re.search(rb'"localjury_commit"\s*:\s*1\b', data):
        return "it is unsigned (written by a localjury before journals were signed, or by hand)"
    return f"it is not a journal localjury can read ({str(exc).splitlines()[0]})"


def _names_in(data: bytes) -> frozenset[str]:
    """The file names a journal that failed validation lists, where it parses at all."""
    try:
        files = json.loads(data).get("files", [])
        return frozenset(os.path.basename(str(f.get("path"))) for f in files if isinstance(f, dict))
    except (ValueError, AttributeError, TypeError, RecursionError):
        return frozenset()


def _entries(journal: Path, recorded: Journal) -> list[Entry]:
    """The entries with the paths of their files, once each passes the rules of its own set.

    Raises:
        ValueError: Naming the entry and the rule.
    """
    anchor = recorded.files[-1].path if recorded.files else ""
    if "/" in anchor or journal.name != journal_path(Path(anchor)).name:
        raise ValueError("its name is not that of its anchor (the last file it lists, beside it)")
    folder = journal.parent
    seen: set[str] = set()
    entries = []
    for e in recorded.files:
        path = _member(folder, e.path, "file")
        for kind, value in (("tmp", e.tmp), ("old", e.backup)):
            if value is not None:
                _ours(path, _member(folder, value, kind), kind)
        for p in (e.path, e.tmp, e.backup):
            if p is not None and p in seen:
                raise ValueError(f"it lists {p} twice")
            seen.add(p or "")
        device = os.lstat(path.parent).st_dev
        if any(i is not None and i[0] != device for i in (e.new, e.old)):
            raise ValueError(f"an identity it records for {e.path} is not on the device of {path.parent}")
        where = {k: None if v is None else str(folder / v) for k, v in (("tmp", e.tmp), ("backup", e.backup))}
        entries.append(e.model_copy(update={"path": str(path), **where}))
    return entries


def _member(folder: Path, name: str, kind: str) -> Path:
    """A name the journal lists, as a path: a plain name in its folder, or an absolute path
    without ``..``; neither a symbolic link nor another kind of non-regular file."""
    plain = name not in ("", ".", "..") and "/" not in name and "\0" not in name
    absolute = name.startswith("/") and "\0" not in name and ".." not in name.split("/")
    if not (plain or absolute) or (absolute and os.path.normpath(name) != name):
        raise ValueError(f"it names {name!r} ({kind}), which is neither a file in its folder nor an absolute path")
    path = folder / name
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise ValueError(f"{name} ({kind}) cannot be looked at ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise ValueError(f"{name} ({kind}) is {what}")
    return path


def _ours(path: Path, other: Path, kind: str) -> None:
    """Refuse a temporary file or backup that is not one of ours for ``path``, beside it."""
    match = OURS.match(other.name)
    if other.parent != path.parent or not match or match["name"] != path.name or match["kind"] != kind:
        what = "temporary file" if kind == "tmp" else "backup"
        raise ValueError(f"its {what} {other} for {path.name} is not a name localjury gives one beside it")
