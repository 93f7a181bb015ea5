"""Hashing the files a manifest records, reading no more than they are.

A manifest may come from someone else, so the paths in it are data: a file is hashed only
when it is a regular file (looked at before it is opened, so that a FIFO or a device is
never opened), exactly the bytes its size says (a file of ``/proc`` says 0 and yields more:
it is refused, not read on), and only when its size is the one the manifest recorded, where
it recorded one. A datasets folder is walked without following links, over a bounded number
of entries.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

#: The most files and folders a datasets folder is walked for: ``save_to_disk`` writes three
#: files per split plus one Arrow file per shard of 500 MB.
MAX_DATASET_ENTRIES = 10_000
#: How deep a datasets folder is walked: a DatasetDict's splits are one level down.
MAX_DATASET_DEPTH = 4
_BLOCK = 1 << 20
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
)


class Unhashable(Exception):
    """A file that is not hashed, and why (in words a table cell can hold)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def stable_sha256(path: Path, size: object = None) -> str:
    """SHA-256 of a regular file's bytes, read in blocks of 1 MiB.

    Args:
        path: The file (a symbolic link to one is followed: model folders are made of them).
        size: The size the manifest recorded, if any: a file of another size is not read.

    Raises:
        Unhashable: The file is missing, not a regular file, of another size than ``size``,
            unreadable, or yields more or fewer bytes than its size.
    """
    try:
        _regular(os.stat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Unhashable("file missing") from None
    except OSError as exc:
        raise Unhashable(f"cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        _regular(st.st_mode)  # what was opened, should the path have changed since
        if size is not None and st.st_size != size:
            raise Unhashable(f"size {st.st_size}, was {size}")
        digest = hashlib.sha256()
        left = st.st_size
        while left:
            block = os.read(fd, min(_BLOCK, left))
            if not block:
                raise Unhashable("shorter than its size: it changed while it was read")
            digest.update(block)
            left -= len(block)
        if os.read(fd, 1):
            raise Unhashable("it yields more bytes than its size (a file of /proc, or one being written): not read on")
        return digest.hexdigest()
    except OSError as exc:
        raise Unhashable(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for is_kind, name in _KINDS if is_kind(mode)), "a special file")
        raise Unhashable(f"not a regular file ({kind}): not read")


def dataset_files(folder: Path) -> list[Path]:
    """The regular files of a datasets folder, in order: walked without following a link
    (a link is not a file of the folder), over at most :data:`MAX_DATASET_ENTRIES` entries
    and :data:`MAX_DATASET_DEPTH` levels.

    Raises:
        Unhashable: The folder holds more, or cannot be read.
    """
    found: list[Path] = []
    seen = 0
    stack = [(folder, 0)]
    try:
        while stack:
            here, depth = stack.pop()
            with os.scandir(here) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_DATASET_ENTRIES:
                        raise Unhashable(f"it holds more than {MAX_DATASET_ENTRIES} files and folders: not read")
                    if entry.is_dir(follow_symlinks=False):
                        if depth + 1 >= MAX_DATASET_DEPTH:
                            raise Unhashable(f"it has folders more than {MAX_DATASET_DEPTH - 1} levels deep: not read")
                        stack.append((Path(entry.path), depth + 1))
                    elif entry.is_file(follow_symlinks=False):
                        found.append(Path(entry.path))
    except OSError as exc:
        raise Unhashable(f"cannot be read ({exc.strerror or exc})") from None
    return sorted(found)


def folder_sha256(folder: Path, size: object = None) -> str:
    """SHA-256 over the files of a datasets folder (:func:`dataset_files`): each file's path
    inside it and SHA-256, in order.

    Args:
        folder: The folder.
        size: The total size of its files the manifest recorded, if any: a folder whose
            files add up to another size is not read.

    Raises:
        Unhashable: See :func:`dataset_files` and :func:`stable_sha256`.
    """
    files = dataset_files(folder)
    if size is not None and (total := folder_size(files)) != size:
        raise Unhashable(f"size {total}, was {size}")
    digest = hashlib.sha256()
    for p in files:
        digest.update(f"{p.relative_to(folder).as_posix()}\0{stable_sha256(p)}\n".encode())
    return digest.hexdigest()


def folder_size(files: list[Path]) -> int:
    """The total size of ``files`` (links not followed).

    Raises:
        Unhashable: One of them is gone.
    """
    try:
        return sum(os.lstat(p).st_size for p in files)
    except OSError as exc:
        raise Unhashable(f"cannot be read ({exc.strerror or exc})") from None


def found_sha256(path: Path, size: object = None) -> str:
    """A file's SHA-256 as ``localjury verify`` finds it (see :func:`stable_sha256`), or why
    it was not read."""
    try:
        return stable_sha256(path, size)
    except Unhashable as exc:
        return exc.reason


def found_dataset_sha256(path: Path, size: object = None) -> str:
    """A dataset's SHA-256 as ``localjury verify`` finds it, or why it was not read: a regular
    file, or a Hugging Face datasets folder, never any other folder (a manifest's path is data,
    and ``/`` is a folder too); no more than the ``size`` the manifest recorded."""
    try:
        if not path.is_dir():
            return stable_sha256(path, size)
        if is_saved_dataset(path):
            return folder_sha256(path, size)
        return "a folder that is not a Hugging Face datasets folder (save_to_disk): not read"
    except Unhashable as exc:
        return exc.reason


def matches(want: object, have: str | None) -> bool:
    """Whether a hash found is the manifest's (a reason a file was not read never is)."""
    return have is not None and want == have and re.fullmatch(r"[0-9a-f]{64}", have) is not None


def is_saved_dataset(path: Path) -> bool:
    """Whether ``path`` is a folder that ``datasets``' ``save_to_disk`` wrote: the folder the
    run read (see :func:`localjury.records.readers.is_saved_dataset`)."""
    from localjury.records.readers import is_saved_dataset as readable

    return readable(path)
