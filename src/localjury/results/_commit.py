"""Files committed together, and the rule that settles a commit cut short.

A commit of an output set (see :class:`localjury.results._outputs.OutputSet`) goes in five steps:

1. every file is written to a temporary file beside its final path
   (``.<name>.localjury.<host>.<pid>.<random>.tmp``) and fsynced;
2. each final path that holds a file gets a hard link to it beside it, a backup
   (``... .old``): the previous set stays on disk under other names;
3. a journal, ``.<anchor>.localjury.commit`` beside the set's anchor (its last file, the one
   that vouches for the others: the manifest, ``metrics.json``), lists each file's final path,
   temporary file and backup and the identity (device, inode, size) of its new and previous
   file, and is signed (see the trust rule below); it is written whole (a temporary file,
   fsynced, renamed) before anything is renamed;
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

**The trust rule.** A journal is data until proven ours: it is settled only when it is signed
with this user's commit key (an HMAC-SHA256 with ``$LOCALJURY_HOME/commit.key``, which only
this user can read: whoever wrote the output folder cannot sign) and lists only the files of its own set, each a
name in the journal's folder (an absolute path for a file of the set in another folder)
with temporary files and backups of ours beside it, none a link (see
:mod:`localjury.results._journal`). A journal that fails any of this (planted in a folder
someone sent, or written under another ``$LOCALJURY_HOME``) is never settled nor removed,
and nothing it names is touched: the command stops and names it and the rule it fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from localjury.errors import CommitError, ConfigError, Outcome
from localjury.results._journal import (
    MARK,
    NEW_FILE,
    OURS,
    Entry,
    Journal,
    UntrustedJournal,
    commit_key,
    host,
    identity,
    journal_bytes,
    journal_path,
    own_name,
    read_journal,
)

__all__ = [
    "MARK",
    "OURS",
    "Entry",
    "Journal",
    "StagedFile",
    "UntrustedJournal",
    "commit",
    "host",
    "identity",
    "journal_path",
    "own_name",
    "settle",
]


class StagedFile:
    """One output being written beside its final path (hashed as it is written).

    Created with the permissions a new file gets under the process's umask (a plain
    ``open`` would do the same; ``tempfile.mkstemp`` would make it private).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = own_name(path, "tmp")
        fd = os.open(self.tmp, NEW_FILE, 0o666)
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


def commit(staged: Sequence[StagedFile], removed: Iterable[Path] = ()) -> None:
    """Rename the staged files into place together (the last one, the anchor, last), and
    remove ``removed`` (files of the set not written this time).

    Raises:
        CommitError: A rename failed: what is on disk now, and what the next command does.
    """
    key = commit_key(create=True)
    for f in staged:
        f.close()
    anchor = staged[-1].path
    gone = [p for p in removed if os.path.lexists(p)]
    entries: list[Entry] = []
    try:
        for path, tmp in [*((p, None) for p in gone), *((f.path, f.tmp) for f in staged)]:
            entries.append(_entry(path, tmp))
        journal = journal_path(anchor)
        _write_journal(journal, anchor, entries, key)
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


def _write_journal(journal: Path, anchor: Path, entries: list[Entry], key: bytes) -> None:
    tmp = own_name(anchor, "tmp")  # a temporary file of the anchor's: removed by clean_stale if left
    try:
        fd = os.open(tmp, NEW_FILE, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(journal_bytes(journal, entries, key))
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


def settle(journal: Path, key: bytes | None) -> str:
    """Settle the commit ``journal`` describes, by the recovery rule (the caller holds the
    locks of its files); return what was done, in words.

    Raises:
        UntrustedJournal: localjury cannot prove it wrote the journal for these files (see
            :mod:`localjury.results._journal`): nothing was touched.
        ConfigError: Neither the new nor the previous set is whole on disk.
    """
    recorded, entries = read_journal(journal, key)
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
