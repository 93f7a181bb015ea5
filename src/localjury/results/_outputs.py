"""The files a command writes, as one set: checked before anything loads, locked while the
command runs, and committed together.

:class:`OutputSet` is what every command that writes files goes through (``run``, ``bench``,
``calibrate``). Opening it

- refuses an output path that is a folder or not a regular file, that cannot be written, or
  that resolves (through symbolic or hard links) to one of the command's inputs (the dataset,
  the judgment store and its ``-wal``/``-shm``/``-journal`` files, models.yaml, a model's
  files, a criteria file) or to another output; a run adds its own inputs with
  :meth:`OutputSet.check` before any model loads;
- takes an advisory lock (``flock``) on each output, ``.<name>.localjury.lock`` beside it,
  held until the set is closed: a second command writing one of the same files meanwhile
  fails at once, naming the file and the process that holds it. A lock file that is not
  localjury's own (a link, a FIFO, another file's hard link, other content) is refused and
  left as it is (:mod:`localjury.results._locks`);
- settles any commit of these files that was cut short, by the recovery rule of
  :mod:`localjury.results._commit`; a journal localjury cannot prove it wrote for these files
  (its trust rule) stops the command instead, untouched, as does every file it names;
- removes temporary files and backups that killed commands left: only regular files under
  localjury's own names (``.<name>.localjury.<host>.<pid>.<random>.tmp``/``.old``) of a
  process of this machine that no longer runs.

Every file of ours beside an output is created new (``O_EXCL``: never through a link, never
over what is there).

Each output is then written beside its final path and :meth:`OutputSet.commit` renames them
into place together (:func:`localjury.results._commit.commit`); leaving the set without a commit
(an error, Ctrl-C) removes every temporary file and renames nothing.
"""

from __future__ import annotations

import contextlib
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
    NEW_FILE,
    OURS,
    UntrustedJournal,
    commit_key,
    host,
    journal_path,
    own_name,
    read_journal,
)
from localjury.results._locks import lock as _lock
from localjury.results._locks import unlock as _unlock

log = logging.getLogger(__name__)


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same path once resolved, or hard links."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _within(path: Path, folder: Path) -> bool:
    return folder.is_dir() and path.resolve().is_relative_to(folder.resolve())


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
        if _same(path, source_path) or _within(path, source_path):
            raise ConfigError(
                f"the {what} {path} would overwrite the {source} ({source_path}); write it somewhere else"
            )


def _check_writable(what: str, path: Path) -> None:
    """Create the output's folder and a file in it, as writing the output will."""
    probe = own_name(path, "tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(probe, NEW_FILE, 0o666))
    except OSError as exc:
        raise ConfigError(
            f"cannot write the {what} {path}: {exc.strerror or exc}; choose a folder you can write to"
        ) from None
    probe.unlink(missing_ok=True)


def clean_stale(path: Path) -> list[Path]:
    """Remove the temporary files and backups of ``path`` that commands killed before their
    commit ended left: localjury's own names only, of a process of this machine that no
    longer runs, and only regular files (a link or anything else under such a name is not
    one localjury wrote). Returns what was removed."""
    removed: list[Path] = []
    here = host()
    for tmp in path.parent.glob(f".{glob_escape(path.name)}.{MARK}.*"):
        match = OURS.match(tmp.name)
        if not match or match["name"] != path.name or match["host"] != here or _alive(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(tmp).st_mode):
                tmp.unlink()
                removed.append(tmp)
    return removed


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _journals(paths: list[Path], key: bytes | None) -> dict[Path, list[Path]]:
    """The commit journals in the folders of ``paths`` that concern one of them, with the
    files each names.

    Raises:
        ConfigError: A journal named after one of ``paths`` or listing one is not one
            localjury can prove it wrote (see :func:`_untrusted`).
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
                    raise _untrusted(exc) from None
                continue  # another set's, and not ours to judge
            if wanted & {f.resolve() for f in files}:
                found[journal] = files
    return found


def _untrusted(exc: UntrustedJournal) -> ConfigError:
    return ConfigError(
        f"the commit journal {exc.journal} is not one localjury can prove it wrote for these files: {exc.reason}. "
        "It was left as it is, and no file it names was touched. If a localjury command of yours wrote it under "
        "another LOCALJURY_HOME, run with that one to settle it; else move it aside (and check the files beside "
        "it) and run again"
    )


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
    for journal, files in _journals(list(paths), key).items():
        locks: list[tuple[int, Path]] = []
        try:
            for f in files:
                if f.resolve() not in ours:
                    locks.append((_lock("file", f), f))
            if os.path.lexists(journal):
                done.append(settle(journal, key))
        except UntrustedJournal as exc:  # changed since it was read: still not acted on
            raise _untrusted(exc) from None
        finally:
            for fd, f in locks:
                _unlock(fd, f)
    return done


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
        for what, path in self.outputs.items():
            _check_writable(what, path)
        if self.outputs:  # the commit signs its journal with it: refused now, not after the work
            commit_key(create=True)
        try:
            for what, path in self.outputs.items():
                self._locks[path] = _lock(what, path)
            self.settled = settle_pending(self.outputs.values(), self._locks)
        except BaseException:
            self.close()
            raise
        for line in self.settled:
            log.warning(line)
        for path in self.outputs.values():
            clean_stale(path)

    def check(self, inputs: Mapping[str, Path | None]) -> None:
        """Refuse outputs that resolve to one of more ``inputs`` (a run's, before its models load).

        Raises:
            ConfigError: See :func:`check_paths`.
        """
        check_paths(self.outputs, inputs)
        self.inputs.update(inputs)

    def file(self, path: Path, text: str | None = None) -> StagedFile:
        """Start writing an output (with ``text`` as its whole content, closed at once)."""
        if path not in self._locks:
            raise ValueError(f"{path} is not an output of this open set: {', '.join(map(str, self.outputs.values()))}")
        staged = StagedFile(path)
        self._staged[path] = staged
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
            _unlock(fd, path)
        self._locks.clear()
