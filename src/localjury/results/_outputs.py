"""The files a command writes, as one set: checked before anything loads, locked while the
command runs, and committed together.

:class:`OutputSet` is what every command that writes files goes through (``run``, ``bench``,
``calibrate``, ``align``). Opening it

- refuses an output path that is a folder or not a regular file, that cannot be written, or
  that resolves (through symbolic or hard links) to one of the command's inputs (the dataset,
  the judgment store and its ``-wal``/``-shm``/``-journal`` files, models.yaml, a model's
  files, a criteria file) or to another output; a run adds its own inputs with
  :meth:`OutputSet.check` before any model loads;
- locks each output until the set is closed (:func:`lock`): a second command writing one
  of the same files meanwhile fails at once, naming the file and the process that holds it;
- settles any commit of these files that was cut short, by the recovery rule of
  :mod:`localjury.results._commit`; a journal localjury cannot prove it wrote for these files
  (:mod:`localjury.results._journal`) stops the command instead, untouched, as does every
  file it names;
- removes temporary files and backups that killed commands left: only regular files under
  localjury's own names (:data:`~localjury.results._journal.OURS`) of a process of this
  machine that no longer runs.

Each output is then written beside its final path and :meth:`OutputSet.commit` renames them
into place together; leaving the set without a commit (an error, Ctrl-C) removes every
temporary file and renames nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType

from localjury._files import check_no_symlink_loop, check_utf8_path
from localjury.errors import ConfigError
from localjury.results._commit import StagedFile, commit, settle
from localjury.results._journal import (
    MARK,
    OURS,
    OWN_FILE,
    commit_key,
    host,
    journal_path,
    journals_of,
    not_ours,
)

log = logging.getLogger(__name__)


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same path once resolved, or hard links."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_paths(outputs: Mapping[str, Path], inputs: Mapping[str, Path | None]) -> None:
    """Refuse output paths that are no regular file's, or that would destroy an input or
    each other, and any path (an output's or an input's) that cannot be written as UTF-8 text.

    Args:
        outputs: What each output is (``"results file"``) -> its path.
        inputs: What each input is (``"dataset"``, ``"judgment store"``) -> its path (a
            file, or a folder none of whose files may be overwritten); None is skipped.

    Raises:
        ConfigError: Naming the output, the path, what it clashes with, and the fix.
    """
    named = list(outputs.items())
    # A loop of symbolic links is a refused path like any other, for the Python API as for
    # the command line (whose options check it as they are parsed).
    for what, path in [*named, *((w, p) for w, p in inputs.items() if p is not None)]:
        check_no_symlink_loop(path, f"the {what}")
        check_utf8_path(path, what)
    for i, (what, path) in enumerate(named):
        if path.is_dir():
            raise ConfigError(f"the {what} {path} is a folder; give a file path for it")
        if path.exists() and not path.is_file():
            raise ConfigError(f"the {what} {path} exists and is not a regular file; give another path")
        for other, other_path in named[:i]:
            if _same(path, other_path):
                raise ConfigError(f"the {what} and the {other} are the same file ({path}); give them different paths")
        check_not_input(what, path, inputs)


def check_not_input(what: str, path: Path, inputs: Mapping[str, Path | None]) -> None:
    """Refuse a path a command writes (``what``: "results file", "judgment store") that is one
    of its ``inputs`` (by path, through links, or as a hard link) or lies in an input folder.

    Raises:
        ConfigError: Naming the path, the input and the fix.
    """
    for source, source_path in inputs.items():
        if source_path is None:
            continue
        inside = source_path.is_dir() and path.resolve().is_relative_to(source_path.resolve())
        if inside or _same(path, source_path):
            raise ConfigError(
                f"the {what} {path} would overwrite the {source} ({source_path}); write it somewhere else"
            )


def clean_stale(path: Path) -> list[Path]:
    """Remove the temporary files and backups of ``path`` that commands killed before their
    commit ended left: localjury's own names only, of a process of this machine that no
    longer runs, and only regular files (a link or anything else under such a name is not
    one localjury wrote). Returns what was removed."""
    removed: list[Path] = []
    here = host()
    for tmp in path.parent.iterdir():
        match = OURS.match(tmp.name)
        if not match or match["name"] != path.name or match["host"] != here or _alive(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(tmp).st_mode):
                tmp.unlink()
                removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True


def settle_pending(paths: Iterable[Path], held: Mapping[Path, int] | None = None) -> list[str]:
    """Settle the commits of these files that were cut short (see :mod:`localjury.results._commit`),
    taking the locks of the files each names that ``held`` does not hold; return what was done.

    Raises:
        ConfigError: Another process holds one of the locks (its commit is under way), a
            journal cannot be settled, or one is not proven localjury's (left as it is).
    """
    done: list[str] = []
    ours = {p.resolve() for p in held or {}}
    key = commit_key(create=False)
    for journal, files in journals_of(list(paths), key).items():
        locks: list[tuple[int, Path]] = []
        try:
            for f in files:
                if f.resolve() not in ours:
                    locks.append((lock("file", f), f))
            if os.path.lexists(journal):  # read again: it may have changed before the locks
                done.append(settle(journal, key))
        finally:
            for fd, f in locks:
                unlock(fd, f)
    return done


# -- locks --------------------------------------------------------------------------------------
#: What a lock file of ours holds: the line naming its holder, or nothing yet.
_LOCK_LINE = re.compile(rb"(?:pid \d+ on [A-Za-z0-9-]+\n)?")
_LOCK_BYTES = 200


def lock_path(path: Path) -> Path:
    """The lock file of an output."""
    return path.with_name(f".{path.name}.{MARK}.lock")


def lock(what: str, path: Path) -> int:
    """Lock an output for this process (fail at once when another holds it); the descriptor.

    The lock is an advisory one (``flock``) on :func:`lock_path`, which holds the holder's
    ``pid N on host``. Only a lock file of localjury's own is ever locked and written: it is
    looked at before it is opened (a FIFO or a device in its place is never opened), opened
    without following a symbolic link and without waiting on a FIFO, and one that is a link,
    not a regular file, another file's hard link or holds anything but a lock's line is
    refused and left as it is (a file planted under that name would otherwise be
    overwritten, or the file a link points at).

    Raises:
        ConfigError: Another process holds the lock, the file system has no locks, or the
            lock file is not one of ours.
    """
    file = lock_path(path)
    while True:
        fd = _open(what, path, file)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, _LOCK_BYTES, 0).decode("utf-8", "replace").strip() or "its pid not yet written"
            os.close(fd)
            if isinstance(exc, BlockingIOError):
                raise ConfigError(
                    f"the {what} {path} is being written by another localjury process ({holder}); wait for it "
                    "to end, or write to another path"
                ) from None
            raise ConfigError(
                f"cannot lock the {what} {path} ({exc.strerror or exc}): its folder's file system has no "
                "locks; write it to a local disk"
            ) from None
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(fd), os.lstat(file)):
                break
        os.close(fd)  # its holder removed it as it let go: lock the file that is there now
    if not _LOCK_LINE.fullmatch(os.pread(fd, _LOCK_BYTES + 1, 0)):
        os.close(fd)
        raise _not_a_lock(what, path, file, "holds something other than the `pid N on host` line of a lock")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {host()}\n".encode(), 0)
    return fd


def _open(what: str, path: Path, file: Path) -> int:
    """Open (or create) the lock file, when it is one of ours (see :func:`lock`)."""
    problem = None
    with contextlib.suppress(OSError):  # looked at first; os.open says what else is wrong
        problem = _problem(os.lstat(file))
    if problem is None:
        try:  # its folder and a file in it, made as the commit will make them
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(file, os.O_RDWR | os.O_CREAT | OWN_FILE, 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise ConfigError(
                    f"cannot write the {what} {path}: {exc.strerror or exc}; choose a folder you can write to"
                ) from None
            problem = "is a symbolic link"
        else:
            problem = _problem(os.fstat(fd))  # what was opened, should it have changed since
            if problem is None:
                return fd
            os.close(fd)
    raise _not_a_lock(what, path, file, problem)


def _problem(st: os.stat_result) -> str | None:
    return "is a symbolic link" if stat.S_ISLNK(st.st_mode) else not_ours(st, _LOCK_BYTES, "a lock's line")


def _not_a_lock(what: str, path: Path, lock: Path, problem: str) -> ConfigError:
    return ConfigError(
        f"the lock file {lock} of the {what} {path} {problem}, so it is not a lock of localjury's: localjury "
        f"never writes through a link nor into another file, and left it as it is; remove {lock.name} (check "
        "what it is first) and run again"
    )


def unlock(fd: int, path: Path) -> None:
    """Release an output's lock, removing the lock file while still holding it: whoever opened
    it meanwhile finds, once it has the lock, that it is no longer the file at that path, and
    tries again (see :func:`lock`). Only our own file goes: whatever took its name since is left."""
    file = lock_path(path)
    with contextlib.suppress(OSError):
        if os.path.samestat(os.fstat(fd), os.lstat(file)):
            file.unlink()
    os.close(fd)


class OutputSet:
    """The files one command writes, committed together (see the module's docstring).

    Use as a context manager around everything from the checks to the commit::

        with OutputSet({"report": out / "report.md", "figures": out / "metrics.json"}, inputs) as files:
            ...  # load, judge (evaluate(..., output_set=files) checks the run's inputs too)
            files.file(out / "report.md", text)
            files.file(out / "metrics.json", figures)
            files.commit()

    Args:
        outputs: What each output is -> its path, in the order of the commit: the last one
            vouches for the others (the manifest, metrics.json) and goes in last.
        inputs: What each input is -> its path: no output may resolve to one.
    """

    def __init__(self, outputs: Mapping[str, Path], inputs: Mapping[str, Path | None] | None = None) -> None:
        self.outputs = dict(outputs)
        self.inputs = dict(inputs or {})
        self.settled: list[str] = []
        """What opening the set did about commits cut short, in words."""
        self._locks: dict[Path, int] = {}
        self._staged: dict[Path, StagedFile] = {}
        self.committed = False

    def __enter__(self) -> OutputSet:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> None:
        """Check the paths, take the locks, settle commits cut short, clean up.

        Raises:
            ConfigError: A path is refused (see :func:`check_paths`) or cannot be written,
                another process writes one of the files, or a commit cannot be settled.
        """
        check_paths(self.outputs, self.inputs)
        if self.outputs:  # the commit signs its journal with it: refused now, not after the work
            commit_key(create=True)
        try:
            for what, path in self.outputs.items():
                self._locks[path] = lock(what, path)
            self.settled = settle_pending(self.outputs.values(), self._locks)
        except BaseException:
            self.close()
            raise
        for line in self.settled:
            log.warning(line)
        for path in self.outputs.values():
            clean_stale(path)

    def check(self, inputs: Mapping[str, Path | None]) -> None:
        """Refuse outputs that resolve to one or more ``inputs`` (a run's, before its models load).

        Raises:
            ConfigError: See :func:`check_paths`.
        """
        check_paths(self.outputs, inputs)
        self.inputs.update(inputs)

    def file(self, path: Path, text: str | None = None) -> StagedFile:
        """Start writing an output (with ``text`` as its whole content, closed at once)."""
        if path not in self._locks:
            raise ValueError(f"{path} is not an output of this open set: {', '.join(map(str, self.outputs.values()))}")
        staged = self._staged[path] = StagedFile(path)
        if text is not None:
            staged.write(text)
            staged.close()
        return staged

    def commit(self) -> None:
        """Rename the files written into place together, in the order of ``outputs``; an
        output not written this time is removed (an old manifest never stays beside new results).

        Raises:
            CommitError: A rename failed; says what is on disk now.
        """
        order = [self._staged[p] for p in self.outputs.values() if p in self._staged]
        if order:
            try:
                commit(order, [p for p in self.outputs.values() if p not in self._staged])
            except BaseException:
                if journal_path(order[-1].path).exists():  # a commit left half done: its files are the journal's
                    self._staged.clear()
                raise
        self.committed = True

    def close(self) -> None:
        """Remove the temporary files of an uncommitted set, and release the locks."""
        if not self.committed:
            for f in self._staged.values():
                f.discard()
        self._staged.clear()
        for path, fd in self._locks.items():
            unlock(fd, path)
        self._locks.clear()
