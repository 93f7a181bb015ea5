"""The names of the files a commit leaves beside its outputs, its journal, and the proof that
a journal is one localjury wrote for its own files.

A journal is acted on only when all of this holds (else :func:`read_journal` raises
:class:`UntrustedJournal` naming the rule it fails, and nothing it names is touched):

- it is a regular file of at most :data:`MAX_JOURNAL_BYTES` with no other hard link, opened
  without following a symbolic link and without waiting on a FIFO;
- it is signed: an HMAC-SHA256 of its content with this user's commit key,
  ``$LOCALJURY_HOME/commit.key`` (32 random bytes, made ``0600`` on first use). Whoever wrote
  the output folder (a data folder someone sent) cannot read the key, so cannot sign; a journal
  written under another ``$LOCALJURY_HOME`` or by another user fails this rule too;
- it is its own set's: named after its anchor (its last file), every file it lists a plain
  name in its folder (or, for a file of the set in another folder, an absolute path without
  ``..``), every temporary file and backup a name of ours for that file beside it
  (:data:`OURS`), none of them a symbolic link or another non-regular file.
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

from pydantic import BaseModel, ConfigDict

from localjury._files import localjury_home
from localjury.errors import ConfigError

#: The marker in the name of every file localjury writes beside an output for itself.
MARK = "localjury"
#: A temporary file (``tmp``) or backup (``old``) of ours, beside its final path.
OURS = re.compile(rf"^\.(?P<name>.+)\.{MARK}\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.[0-9a-f]{{8}}\.(?P<kind>tmp|old)$")
#: A journal lists a handful of files: anything larger is not one of ours, and is not read.
MAX_JOURNAL_BYTES = 64 * 1024
#: How every file of ours beside an output is created: a new file or nothing (O_EXCL never opens
#: what is there, a symbolic link included; O_NOFOLLOW says so to every reader).
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: How a file of ours that may be there is opened: never through a link, never waiting on a FIFO.
OWN_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: What the signature covers besides the content (so that the key signs nothing else).
_DOMAIN = b"localjury commit journal\0"
_KEY_BYTES = 32

Identity = tuple[int, int, int]
"""A file's device, inode and size: what a rename keeps and a rewrite changes."""


def host() -> str:
    """This machine's name as it goes in a file name."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def own_name(path: Path, kind: str) -> Path:
    """A fresh name of ours beside ``path``: ``kind`` is ``tmp`` or ``old``."""
    return path.with_name(f".{path.name}.{MARK}.{host()}.{os.getpid()}.{secrets.token_hex(4)}.{kind}")


def journal_path(anchor: Path) -> Path:
    """The journal of a commit whose anchor is ``anchor``."""
    return anchor.with_name(f".{anchor.name}.{MARK}.commit")


def identity(path: str | Path | None) -> Identity | None:
    """The identity of the file at ``path`` (not following a last symbolic link), or None."""
    try:
        st = os.lstat(path) if path is not None else None
    except OSError:
        return None
    return None if st is None else (st.st_dev, st.st_ino, st.st_size)


def why(exc: OSError) -> str:
    """Why a file of ours could not be opened, in words."""
    return "it is a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))


def not_ours(st: os.stat_result, most: int, what: str) -> str | None:
    """Why an opened file is no file of ours of at most ``most`` bytes (``what``), or None."""
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_nlink > 1:
        return f"has {st.st_nlink - 1} other hard link(s): it is another file too"
    if st.st_size > most:
        return f"is {st.st_size} bytes, more than {what}"
    return None


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


class UntrustedJournal(ConfigError):
    """A journal localjury cannot prove it wrote for these files: never acted on, and the
    command stops naming it and the rule it fails.

    Attributes:
        journal: The file.
        reason: Which rule it fails, in words.
        names: The file names it lists (from its content, where readable): what it concerns.
    """

    def __init__(self, journal: Path, reason: str, names: frozenset[str] = frozenset()) -> None:
        super().__init__(
            f"the commit journal {journal} is not one localjury can prove it wrote for these files: {reason}. It "
            "was left as it is, and no file it names was touched. If a localjury command of yours wrote it under "
            "another LOCALJURY_HOME, run with that one to settle it; else move it aside (and check the files "
            "beside it) and run again"
        )
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
    while True:
        try:
            return _read_key(path)
        except FileNotFoundError:
            if not create:
                return None
        # Written whole under another name, then linked into place: a second process making
        # one at the same time reads the first one's, never half of it.
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        key = secrets.token_bytes(_KEY_BYTES)
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, NEW_FILE, 0o600)
            try:
                os.write(fd, key)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)
            except FileExistsError:  # another process made one meanwhile: that one is the key
                continue
            return key
        except OSError as exc:
            raise ConfigError(
                f"cannot create localjury's commit key {path} ({exc.strerror or exc}): a commit signs its "
                "journal with it; set LOCALJURY_HOME to a folder you can write to"
            ) from None
        finally:
            tmp.unlink(missing_ok=True)


def _read_key(path: Path) -> bytes:
    fix = f"remove {path} (localjury makes a new one; a commit cut short under the old key is then reported)"
    try:
        fd = os.open(path, os.O_RDONLY | OWN_FILE)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot read localjury's commit key {path} ({why(exc)}); {fix}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            problem = "it is not a regular file"
        elif st.st_uid != os.geteuid():
            problem = "it belongs to another user"
        elif st.st_mode & 0o077:
            problem = "others may read it (its mode lets the group or others in)"
        elif st.st_size != _KEY_BYTES:
            problem = f"it is not {_KEY_BYTES} bytes long"
        else:
            return os.pread(fd, _KEY_BYTES, 0)
        raise ConfigError(f"localjury's commit key {path} cannot be trusted: {problem}; {fix}")
    finally:
        os.close(fd)


# -- writing and reading ------------------------------------------------------------------------
def journal_bytes(journal: Path, entries: list[Entry], key: bytes) -> bytes:
    """The signed journal of ``entries`` (paths as they are), as it goes at ``journal``."""
    folder = os.path.abspath(journal.parent)

    def name(p: str | None) -> str | None:
        full = None if p is None else os.path.abspath(p)
        return full and (os.path.basename(full) if os.path.dirname(full) == folder else full)

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
    try:
        fd = os.open(journal, os.O_RDONLY | OWN_FILE)
    except OSError as exc:
        raise UntrustedJournal(journal, f"it cannot be opened as a file of its own ({why(exc)})") from None
    try:
        if problem := not_ours(os.fstat(fd), MAX_JOURNAL_BYTES, "any journal"):
            raise UntrustedJournal(journal, f"it {problem}")
        data = os.pread(fd, MAX_JOURNAL_BYTES + 1, 0)
    except OSError as exc:
        raise UntrustedJournal(journal, f"it cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    try:
        files = json.loads(data)["files"]
        names = frozenset(os.path.basename(str(f.get("path"))) for f in files if isinstance(f, dict))
    except (ValueError, LookupError, AttributeError, TypeError, RecursionError):
        names = frozenset()
    try:
        recorded = Journal.model_validate_json(data)
    except ValueError as exc:  # pydantic's ValidationError among them
        reason = f"it is not a journal localjury can read ({str(exc).splitlines()[0]})"
        if re.search(rb'"localjury_commit"\s*:\s*1\b', data):
            reason = "it is unsigned (written by a localjury before journals were signed, or by hand)"
        raise UntrustedJournal(journal, reason, names) from None
    if key is None:
        raise UntrustedJournal(journal, f"there is no commit key ({key_path()}) to check its signature against", names)
    if not hmac.compare_digest(recorded.mac.encode(), recorded.signature(key).encode()):
        raise UntrustedJournal(journal, f"its signature does not match this user's commit key ({key_path()})", names)
    try:
        return recorded, _entries(journal, recorded)
    except ValueError as exc:
        raise UntrustedJournal(journal, str(exc), names) from None


def journals_of(paths: list[Path], key: bytes | None) -> dict[Path, list[Path]]:
    """The commit journals in the folders of ``paths`` that concern one of them, with the
    files each names.

    Raises:
        UntrustedJournal: A journal named after one of ``paths`` or listing one is not one
            localjury can prove it wrote (another set's is not ours to judge, and is skipped).
    """
    wanted = {p.resolve() for p in paths}
    names = {p.name for p in paths}
    found: dict[Path, list[Path]] = {}
    for folder in {p.parent for p in paths}:
        for journal in folder.glob(f".*.{MARK}.commit"):
            try:
                files = [Path(e.path) for e in read_journal(journal, key)[1]]
            except UntrustedJournal as exc:
                if journal.name[1:].removesuffix(f".{MARK}.commit") in names or exc.names & names:
                    raise
                continue
            if wanted & {f.resolve() for f in files}:
                found[journal] = files
    return found


def _entries(journal: Path, recorded: Journal) -> list[Entry]:
    """The entries with the paths of their files, once each passes the rules of its own set.

    Raises:
        ValueError: Naming the entry and the rule.
    """
    anchor = recorded.files[-1].path if recorded.files else "/"  # no files: no anchor
    if "/" in anchor or journal.name != f".{anchor}.{MARK}.commit":
        raise ValueError("its name is not that of its anchor (the last file it lists, beside it)")
    entries = []
    for e in recorded.files:
        path = _member(journal.parent, e.path, "file")
        beside: dict[str, str | None] = {"path": str(path), "tmp": None, "backup": None}
        for kind, field, name in (("tmp", "tmp", e.tmp), ("old", "backup", e.backup)):
            if name is None:
                continue
            other = _member(journal.parent, name, kind)
            match = OURS.match(other.name)
            if other.parent != path.parent or not match or match["name"] != path.name or match["kind"] != kind:
                what = "temporary file" if kind == "tmp" else "backup"
                raise ValueError(f"its {what} {other} for {path.name} is not a name localjury gives one beside it")
            beside[field] = str(other)
        entries.append(e.model_copy(update=beside))
    return entries


def _member(folder: Path, name: str, kind: str) -> Path:
    """A name the journal lists, as a path: a plain name in its folder, or an absolute path
    without ``..``; neither a symbolic link nor another kind of non-regular file."""
    plain = name not in ("", ".", "..") and "/" not in name
    absolute = name.startswith("/") and os.path.normpath(name) == name and ".." not in name.split("/")
    if "\0" in name or not (plain or absolute):
        raise ValueError(f"it names {name!r} ({kind}), which is neither a file in its folder nor an absolute path")
    path = folder / name
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise ValueError(f"{name} ({kind}) cannot be looked at ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"{name} ({kind}) is {'a symbolic link' if stat.S_ISLNK(mode) else 'not a regular file'}")
    return path
