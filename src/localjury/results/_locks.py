"""The lock file of an output, ``.<name>.localjury.lock`` beside it: an advisory lock
(``flock``) held while a command writes the output, holding the holder's ``pid N on host``.

Only a file of localjury's own is ever locked, truncated and written: it is opened without
following a symbolic link and without waiting on a FIFO, and a lock file that is a link, not
a regular file, another file's hard link, or holds anything but a lock's line is refused,
left as it is, with an error naming it (a file planted under that name would otherwise be
overwritten, or the file a link points at).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
from pathlib import Path

from localjury.errors import ConfigError
from localjury.results._journal import MARK, host


def lock_path(path: Path) -> Path:
    """The lock file of an output."""
    return path.with_name(f".{path.name}.{MARK}.lock")


#: What a lock file of ours holds: the line naming its holder, or nothing yet.
_LOCK_LINE = re.compile(rb"(?:pid \d+ on [A-Za-z0-9-]+\n)?")
_LOCK_BYTES = 200


def lock(what: str, path: Path) -> int:
    """Lock an output for this process (fail at once when another holds it); the descriptor.

    Raises:
        ConfigError: Another process holds the lock, the file system has no locks, or the
            lock file is not one of ours (see :func:`_open_lock`).
    """
    file = lock_path(path)
    while True:
        fd = _open_lock(what, path, file)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, _LOCK_BYTES, 0).decode("utf-8", "replace").strip() or "its pid not yet written"
            os.close(fd)
            raise ConfigError(
                f"the {what} {path} is being written by another localjury process ({holder}); wait for it to "
                "end, or write to another path"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise ConfigError(
                f"cannot lock the {what} {path} ({exc.strerror or exc}): its folder's file system has no "
                "locks; write it to a local disk"
            ) from None
        try:
            current = os.path.samestat(os.fstat(fd), os.lstat(file))
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)  # its holder removed it as it let go: lock the file that is there now
    if not _LOCK_LINE.fullmatch(os.pread(fd, _LOCK_BYTES + 1, 0)):
        os.close(fd)
        raise _not_a_lock(what, path, file, "holds something other than the `pid N on host` line of a lock")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {host()}\n".encode(), 0)
    return fd


def _open_lock(what: str, path: Path, lock: Path) -> int:
    """Open (or create) the lock file: never through a symbolic link, never waiting on a
    FIFO, and only a regular file with no other hard link and no more than a lock's line.

    Raises:
        ConfigError: Naming the lock file, what is wrong with it, and the fix.
    """
    try:  # looked at first, so that a FIFO or a device in its place is not even opened
        _check_lock(os.lstat(lock), what, path, lock)
    except FileNotFoundError:
        pass
    except OSError:
        pass  # os.open below says what is wrong
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _not_a_lock(what, path, lock, "is a symbolic link") from None
        raise ConfigError(
            f"cannot lock the {what} {path}: cannot create {lock.name} beside it ({exc.strerror or exc}); "
            "choose a folder you can write to"
        ) from None
    try:
        _check_lock(os.fstat(fd), what, path, lock)  # what was opened, should it have changed since
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_lock(st: os.stat_result, what: str, path: Path, lock: Path) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise _not_a_lock(what, path, lock, "is a symbolic link")
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_lock(what, path, lock, "is not a regular file")
    if st.st_nlink > 1:
        raise _not_a_lock(what, path, lock, f"has {st.st_nlink - 1} other hard link(s): it is another file too")
    if st.st_size > _LOCK_BYTES:
        raise _not_a_lock(what, path, lock, f"is {st.st_size} bytes, more than a lock's line")


def _not_a_lock(what: str, path: Path, lock: Path, problem: str) -> ConfigError:
    return ConfigError(
        f"the lock file {lock} of the {what} {path} {problem}, so it is not a lock of localjury's: localjury "
        f"never writes through a link nor into another file, and left it as it is; remove {lock.name} (check "
        "what it is first) and run again"
    )


def unlock(fd: int, path: Path) -> None:
    # Removed while still locked: whoever opened it meanwhile finds, once it has the lock,
    # that it is no longer the file at that path, and tries again (see lock). Only our own
    # file goes: whatever took its name since is left.
    file = lock_path(path)
    with contextlib.suppress(OSError):
        if os.path.samestat(os.fstat(fd), os.lstat(file)):
            file.unlink()
    os.close(fd)
