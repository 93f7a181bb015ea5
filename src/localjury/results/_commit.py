"""Files committed together, and the rule that settles a commit cut short.

A commit of an output set (see :class:`localjury.results._outputs.OutputSet`) goes in five steps:

1. every file is written to a temporary file beside its final path
   (``.<name>.localjury.<host>.<pid>.<random>.tmp``) and fsynced;
2. each final path that holds a file gets a hard link to it beside it, a backup
   (``... .old``): the previous set stays on disk under other names;
3. a journal, ``.<anchor>.localjury.commit`` beside the set's anchor (its last file, the one
   that vouches for the others: the manifest, ``metrics.json``), lists each file's final path,
   temporary file and backup and the identity (device, inode, size) of its new and previous
   file; it is written whole (a temporary file, fsynced, renamed) before anything is renamed;
4. any file of the set this commit does not write and (in a set of several files) the
   anchor's previous file are removed, then each temporary file is renamed over its final
   path, the anchor last;
5. the backups are removed, then the journal.

**The recovery rule.** A journal while no process holds the set's lock is a commit cut short
(a crash, a kill, a disk error). Whoever next takes the lock settles it before anything
else: the next command writing one of the files, or ``localjury verify``. It goes

- *forward* when each new file is in place or still whole in its temporary file: the renames
  are finished and the set is the new one;
- else *back*: each backup is renamed over its final path, each file that did not exist
  before is removed, and the set is the previous one;

then the temporary files, backups and journal go. A process whose own commit fails part way
(the file system refusing a rename) goes back at once; when it cannot, its error says which
files are new and which are the previous ones, and leaves the journal for the next command.
So a reader going through localjury finds a whole previous set or a whole new set; one that
does not can tell from the anchor, which is missing while the renames are under way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import socket
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from localjury.errors import CommitError, ConfigError, Outcome

#: The marker in the name of every file localjury writes beside an output for itself.
MARK = "localjury"
#: A temporary file (``tmp``) or backup (``old``) of ours, beside its final path.
OURS = re.compile(rf"^\.(?P<name>.+)\.{MARK}\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.[0-9a-f]{{8}}\.(?:tmp|old)$")


def host() -> str:
    """This machine's name as it goes in a file name."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def own_name(path: Path, kind: str) -> Path:
    """A fresh name of ours beside ``path``: ``kind`` is ``tmp`` or ``old``."""
    return path.with_name(f".{path.name}.{MARK}.{host()}.{os.getpid()}.{secrets.token_hex(4)}.{kind}")


def journal_path(anchor: Path) -> Path:
    """The journal of a commit whose anchor is ``anchor``."""
    return anchor.with_name(f".{anchor.name}.{MARK}.commit")


class StagedFile:
    """One output being written beside its final path (hashed as it is written).

    Created with the permissions a new file gets under the process's umask (a plain
    ``open`` would do the same; ``tempfile.mkstemp`` would make it private).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = own_name(path, "tmp")
        fd = os.open(self.tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        self._fh = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self.size = 0
        self.sha256: str | None = None

    def write(self, text: str) -> None:
        """Append text (UTF-8)."""
        data = text.encode("utf-8")
        self._hash.update(data)
        self._fh.write(data)
        self.size += len(data)

    def close(self) -> None:
        """Flush to disk and close; the file's SHA-256 is known from then on."""
        if self._fh.closed:
            return
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        finally:
            self._fh.close()
        self.sha256 = self._hash.hexdigest()

    def discard(self) -> None:
        """Close without caring whether that fails (a full disk), and remove the file."""
        with contextlib.suppress(OSError):
            self._fh.close()
        with contextlib.suppress(OSError):
            self.tmp.unlink(missing_ok=True)


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
    """One file of a commit, as its journal records it."""

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

    localjury_commit: int = 1
    """The journal's format."""
    pid: int
    """The committing process."""
    host: str
    """Its machine."""
    files: list[Entry]
    """In the order of the renames: the anchor last."""


def commit(staged: Sequence[StagedFile], removed: Iterable[Path] = ()) -> None:
    """Rename the staged files into place together (the last one, the anchor, last), and
    remove ``removed`` (files of the set not written this time).

    Raises:
        CommitError: A rename failed: what is on disk now, and what the next command does.
    """
    for f in staged:
        f.close()
    anchor = staged[-1].path
    gone = [p for p in removed if os.path.lexists(p)]
    entries: list[Entry] = []
    try:
        for path, tmp in [*((p, None) for p in gone), *((f.path, f.tmp) for f in staged)]:
            entries.append(_entry(path, tmp))
        journal = journal_path(anchor)
        _write_journal(journal, anchor, entries)
    except BaseException:
        for e in entries:  # nothing was renamed: the previous set is untouched
            _remove(e.backup)
        raise
    try:
        _forward(entries)
    except BaseException as exc:
        outcome, message = _after_failure(journal, entries, exc)
        if isinstance(exc, Exception):
            raise CommitError(message, outcome=outcome, journal=journal) from exc
        exc.add_note(message)
        raise
    _finish(journal, entries)


def _entry(path: Path, tmp: Path | None) -> Entry:
    old = identity(path)
    backup = None
    if old is not None:
        link = own_name(path, "old")
        try:
            os.link(path, link, follow_symlinks=False)
            backup = str(link)
        except OSError:  # a file system without hard links: this file cannot be restored
            pass
    return Entry(path=str(path), tmp=str(tmp) if tmp else None, backup=backup, new=identity(tmp), old=old)


def _write_journal(journal: Path, anchor: Path, entries: list[Entry]) -> None:
    tmp = own_name(anchor, "tmp")  # a temporary file of the anchor's: removed by clean_stale if left
    try:
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(Journal(pid=os.getpid(), host=host(), files=entries).model_dump_json(indent=1) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, journal)
    except BaseException:
        _remove(tmp)
        raise
    _sync_folders([journal, *(Path(e.path) for e in entries)])


def _forward(entries: list[Entry]) -> None:
    """Finish the renames (each step skipped when done): removals and the anchor's previous
    file first, the anchor's rename last."""
    *_, anchor = entries
    for e in entries:
        # A lone file is replaced in one rename: no moment without it.
        if e.tmp is None or (e is anchor and len(entries) > 1 and identity(e.path) != e.new):
            Path(e.path).unlink(missing_ok=True)
    for e in entries:
        if e.tmp is not None and identity(e.path) != e.new:
            os.replace(e.tmp, e.path)
    _sync_folders(Path(e.path) for e in entries)


def _back(entries: list[Entry]) -> None:
    """Put the previous files back, remove the new ones, and remove the temporary files."""
    for e in reversed(entries):
        if e.backup is not None and identity(e.backup) == e.old:
            os.replace(e.backup, e.path)
            _remove(e.backup)  # a rename between two links of one file leaves both
        elif e.old is None and e.new is not None and identity(e.path) == e.new:
            os.unlink(e.path)
    for e in entries:
        _remove(e.tmp)
    _sync_folders(Path(e.path) for e in entries)


def can_forward(entries: list[Entry]) -> bool:
    """Whether every new file is in place or whole in its temporary file."""
    return all(e.tmp is None or identity(e.path) == e.new or identity(e.tmp) == e.new for e in entries)


def can_back(entries: list[Entry]) -> bool:
    """Whether every previous file is in place, in its backup, or was none."""
    return all(e.old is None or identity(e.path) == e.old or identity(e.backup) == e.old for e in entries)


def _finish(journal: Path, entries: list[Entry]) -> None:
    """Remove what a settled commit leaves: backups, temporary files, then the journal."""
    for e in entries:
        _remove(e.backup)
        _remove(e.tmp)
    _sync_folders(Path(e.path) for e in entries)
    _remove(journal)
    _sync_folders([journal])


def settle(journal: Path) -> str:
    """Settle the commit ``journal`` describes, by the recovery rule (the caller holds the
    locks of its files); return what was done, in words.

    Raises:
        ConfigError: The journal is unreadable, or neither the new nor the previous set is
            whole on disk.
    """
    try:
        recorded = Journal.model_validate_json(journal.read_bytes())
    except (ValidationError, ValueError) as exc:
        raise ConfigError(
            f"{journal} is not a commit journal localjury can read ({str(exc).splitlines()[0]}); "
            "move it aside and check the files beside it"
        ) from None
    entries = recorded.files
    names = ", ".join(Path(e.path).name for e in entries)
    by = f"by process {recorded.pid} on {recorded.host}"
    if can_forward(entries):
        _forward(entries)
        done = f"completed a commit cut short ({by}): {names} are the files it wrote"
    elif can_back(entries):
        _back(entries)
        done = f"undid a commit cut short ({by}): {names} are the previous files"
    else:
        raise ConfigError(
            f"the commit journal {journal} cannot be settled ({describe(entries)}): neither the new nor the "
            "previous files are all on disk; move the journal aside and write the files again"
        )
    _finish(journal, entries)
    return done


def describe(entries: list[Entry]) -> str:
    """Which files are new, which are the previous ones, which are missing."""
    groups: dict[str, list[str]] = {}
    for e in entries:
        here = identity(e.path)
        if e.tmp is not None and here == e.new:
            state = "new"
        elif here == e.old:
            state = "previous" if here is not None else "absent (as before)"
        elif here is None:
            state = "missing"
        else:
            state = "changed by someone else"
        groups.setdefault(state, []).append(Path(e.path).name)
    return "; ".join(f"{state}: {', '.join(names)}" for state, names in groups.items())


def _after_failure(journal: Path, entries: list[Entry], exc: BaseException) -> tuple[Outcome, str]:
    """Go back (or, where the previous files cannot all be restored, forward) after a
    commit of this process failed part way; say what is on disk."""
    what = str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        where = exc.filename2 or exc.filename
        what = f"{exc.strerror or exc}" + (f" renaming {Path(where).name}" if where else "")
    failed = f"committing {', '.join(Path(e.path).name for e in entries)} failed part way ({what})"
    try:
        if can_back(entries):
            _back(entries)
            _finish(journal, entries)
            kept = [Path(e.path).name for e in entries if e.old is not None]
            return "previous", (
                f"{failed}; the previous files are back in place ({', '.join(kept) or 'there were none'}) "
                "and none of this command's files was written"
            )
        _forward(entries)
        _finish(journal, entries)
        return "new", f"{failed}; a second try completed it: {describe(entries)}"
    except OSError as again:
        return "mixed", (
            f"{failed}, and undoing it failed too ({again.strerror or again}): {describe(entries)}. The journal "
            f"{journal} lists the rest: the next localjury command that writes these files, or `localjury verify` "
            "of these results, completes the new set when all its files are on disk, else puts the previous one back"
        )


def _remove(path: str | Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _sync_folders(paths: Iterable[Path]) -> None:
    """fsync the folders of ``paths``, so that renames and removals in them are on disk."""
    for folder in {Path(p).parent for p in paths}:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
