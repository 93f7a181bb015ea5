"""Files committed together, and the rule that settles a commit cut short.

A commit of an output set (see :class:`localjury.results._outputs.OutputSet`) goes in five steps:

1. every file is written to a temporary file beside its final path
   (``.<name>.localjury.<host>.<pid>.<random>.tmp``) and fsynced;
2. each final path that holds a file gets a hard link to it beside it, a backup
   (``... .old``): the previous set stays on disk under other names;
3. a journal, ``.<anchor>.localjury.commit`` beside the set's anchor (its last file, the one
   that vouches for the others: the manifest, ``metrics.json``), lists each file's final path,
   temporary file and backup and the identity (device, inode, size) of its new and previous
   file, and is signed; it is written whole (a temporary file, fsynced, renamed) before
   anything is renamed;
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

**The trust rule.** A journal is data until proven ours (:mod:`localjury.results._journal`):
one localjury cannot prove it wrote for its own files is never settled nor removed, and
nothing it names is touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from localjury.errors import CommitError, ConfigError, Outcome
from localjury.results._journal import (
    NEW_FILE,
    Entry,
    commit_key,
    identity,
    journal_bytes,
    journal_path,
    own_name,
    read_journal,
)


class StagedFile:
    """One output being written beside its final path (hashed as it is written).

    Created with the permissions a new file gets under the process's umask (a plain
    ``open`` would do the same; ``tempfile.mkstemp`` would make it private).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = own_name(path, "tmp")
        self._fh = os.fdopen(os.open(self.tmp, NEW_FILE, 0o666), "wb")
        self._hash = hashlib.sha256()
        self.size = 0
        self.sha256: str | None = None

    def write(self, text: str | bytes) -> None:
        """Append text (as UTF-8) or bytes."""
        data = text.encode("utf-8") if isinstance(text, str) else text
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
        _remove(self.tmp)


def commit(staged: Sequence[StagedFile], removed: Iterable[Path] = ()) -> None:
    """Rename the staged files into place together (the last one, the anchor, last), and
    remove ``removed`` (files of the set not written this time).

    Raises:
        CommitError: A rename failed: what is on disk now, and what the next command does.
    """
    key = commit_key(create=True)
    for f in staged:
        f.close()
    journal = journal_path(staged[-1].path)
    entries: list[Entry] = []
    try:
        for path, tmp in [*((p, None) for p in removed if os.path.lexists(p)), *((f.path, f.tmp) for f in staged)]:
            entries.append(_entry(path, tmp))
        record = StagedFile(staged[-1].path)  # a temporary file of the anchor's: clean_stale's if left
        try:
            record.write(journal_bytes(journal, entries, key))
            record.close()
            os.replace(record.tmp, journal)
        except BaseException:
            record.discard()
            raise
        _sync_folders([journal, *(Path(e.path) for e in entries)])
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
        backup = own_name(path, "old")
        try:
            os.link(path, backup, follow_symlinks=False)
        except OSError:  # a file system without hard links: this file cannot be restored
            backup = None
    return Entry(path=str(path), tmp=tmp and str(tmp), backup=backup and str(backup), new=identity(tmp), old=old)


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


def _can_forward(entries: list[Entry]) -> bool:
    """Whether every new file is in place or whole in its temporary file."""
    return all(e.tmp is None or identity(e.path) == e.new or identity(e.tmp) == e.new for e in entries)


def _can_back(entries: list[Entry]) -> bool:
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
    if _can_forward(entries):
        _forward(entries)
        done = f"completed a commit cut short ({by}): {names} are the files it wrote"
    elif _can_back(entries):
        _back(entries)
        done = f"undid a commit cut short ({by}): {names} are the previous files"
    else:
        raise ConfigError(
            f"the commit journal {journal} cannot be settled ({_describe(entries)}): neither the new nor the "
            "previous files are all on disk; move the journal aside and write the files again"
        )
    _finish(journal, entries)
    return done


def _describe(entries: list[Entry]) -> str:
    """Which files are new, which are the previous ones, which are missing."""
    groups: dict[str, list[str]] = {}
    for e in entries:
        here = identity(e.path)
        if e.tmp is not None and here == e.new:
            state = "new"
        elif here == e.old:
            state = "previous" if here is not None else "absent (as before)"
        else:
            state = "missing" if here is None else "changed by someone else"
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
        if _can_back(entries):
            _back(entries)
            _finish(journal, entries)
            kept = [Path(e.path).name for e in entries if e.old is not None]
            return "previous", (
                f"{failed}; the previous files are back in place ({', '.join(kept) or 'there were none'}) "
                "and none of this command's files was written"
            )
        _forward(entries)
        _finish(journal, entries)
        return "new", f"{failed}; a second try completed it: {_describe(entries)}"
    except OSError as again:
        return "mixed", (
            f"{failed}, and undoing it failed too ({again.strerror or again}): {_describe(entries)}. The journal "
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
