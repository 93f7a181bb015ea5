"""The files a run writes: checked before anything loads, and committed together.

:func:`check_outputs` refuses, before a model loads, an output path that is a folder or not
a regular file, that cannot be written, or that resolves (through symbolic or hard links) to
one of the run's inputs (the dataset, the judgment store, models.yaml, a model's files, a
criteria file) or to another output. :class:`Staging` writes every output beside its final
path and renames them into place only when all are written: on any error, nothing is
renamed and no temporary file is left.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from localjury.errors import ConfigError

#: A temporary file of ours: ``.<name>.<host>.<pid>.<random>.tmp`` beside its final path.
_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<host>[^.]+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$")
#: Temporary files named by earlier versions (``tempfile.mkstemp``): removed when this old.
_LEGACY_TMP_AGE = 3600.0


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


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


def check_outputs(outputs: Mapping[str, Path], inputs: Mapping[str, Path | None]) -> None:
    """Refuse output paths that would destroy an input or each other, or cannot be written.

    Also removes temporary files that a killed run left beside the outputs.

    Args:
        outputs: What each output is (``"results file"``) -> its path.
        inputs: What each input is (``"dataset"``, ``"judgment store"``) -> its path (a
            file, or a folder none of whose files may be overwritten); None is skipped.

    Raises:
        ConfigError: Naming the output, the path, what it clashes with, and the fix.
    """
    named = list(outputs.items())
    for i, (what, path) in enumerate(named):
        if path.is_dir():
            raise ConfigError(f"the {what} {path} is a folder; give a file path for it")
        if path.exists() and not path.is_file():
            raise ConfigError(f"the {what} {path} exists and is not a regular file; give another path")
        for other, other_path in named[:i]:
            if _same(path, other_path):
                raise ConfigError(f"the {what} and the {other} are the same file ({path}); give them different paths")
        for source, source_path in inputs.items():
            if source_path is None:
                continue
            if _same(path, source_path) or _within(path, source_path):
                raise ConfigError(
                    f"the {what} {path} would overwrite the {source} ({source_path}); write it somewhere else"
                )
    for what, path in named:
        _check_writable(what, path)
        clean_stale(path)


def _check_writable(what: str, path: Path) -> None:
    """Create the output's folder and a file in it, as writing the output will."""
    probe = _tmp_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except OSError as exc:
        raise ConfigError(
            f"cannot write the {what} {path}: {exc.strerror or exc}; choose a folder you can write to"
        ) from None
    probe.unlink(missing_ok=True)


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{_host()}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def clean_stale(path: Path) -> list[Path]:
    """Remove the temporary files of ``path`` that runs killed before their commit left:
    those of a process of this host that no longer runs, and unattributable old ones."""
    removed: list[Path] = []
    host = _host()
    for tmp in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
        match = _TMP.match(tmp.name)
        if match and match["name"] == path.name:
            if match["host"] != host or _alive(int(match["pid"])):
                continue
        else:
            try:
                if time.time() - tmp.stat().st_mtime < _LEGACY_TMP_AGE:
                    continue
            except OSError:
                continue
        with contextlib.suppress(OSError):
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


class StagedFile:
    """One output being written beside its final path (hashed as it is written).

    Created with the permissions a new file gets under the process's umask (a plain
    ``open`` would do the same; ``tempfile.mkstemp`` would make it private).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = _tmp_name(path)
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


class Staging:
    """Write several outputs and commit them as one unit.

    Use as a context manager: :meth:`file` starts an output, :meth:`commit` renames them all
    into place. The last output started (the manifest) is removed first and renamed last, so
    at no moment does a reader find new results beside an old manifest. Leaving the block
    without a commit (an error, Ctrl-C) removes every temporary file and renames nothing.
    """

    def __init__(self) -> None:
        self.files: list[StagedFile] = []
        self.committed = False

    def __enter__(self) -> Staging:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.committed:
            for f in self.files:
                f.discard()

    def file(self, path: Path, text: str | None = None) -> StagedFile:
        """Start an output (with ``text`` as its whole content, closed at once)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = StagedFile(path)
        self.files.append(staged)
        if text is not None:
            staged.write(text)
            staged.close()
        return staged

    def commit(self) -> None:
        """Close every output, then rename them into place, the last one last."""
        for f in self.files:
            f.close()
        *rest, last = self.files
        last.path.unlink(missing_ok=True)
        for f in [*rest, last]:
            os.replace(f.tmp, f.path)
        self.committed = True
