"""The hashes localjury takes: of a value (store keys, per-sample seeds), of a file, and of the
files a manifest records, reading no more than they are.

A manifest may come from someone else, so the paths in it are data: a file is hashed only
when it is a regular file (looked at before it is opened, so that a FIFO or a device is
never opened), exactly the bytes its size says (a file of ``/proc`` says 0 and yields more:
it is refused, not read on), and only when its size is the one the manifest recorded, where
it recorded one. A datasets folder is walked without following links, over a bounded number
of entries.

``localjury verify`` (the ``found_*`` functions) also reads only what is on a disk, since a
model file's size is not recorded: a file of the kernel that says it holds bytes
(``/proc/kcore`` says 128 TiB) and a sparse file that is mostly holes (``/var/log/lastlog``; a
64 GiB file made by ``truncate``) are not read; and each file is read once, however many names it is given. A
dense file is read whole, however large: a model's weights can be tens of GiB.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from localjury.errors import ConfigError


def content_hash(**parts: Any) -> str:
    """A stable SHA-256 (hex) of keyword parts, the same in every process and on every machine.
    Any text hashes, a lone surrogate too (``surrogatepass``: valid text encodes as UTF-8 does)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in blocks of 1 MiB."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: The most files and folders a datasets folder is walked for: ``save_to_disk`` writes three
#: files per split plus one Arrow file per shard of 500 MB.
MAX_DATASET_ENTRIES = 10_000
#: How deep a datasets folder is walked: a DatasetDict's splits are one level down.
MAX_DATASET_DEPTH = 4
#: A file whose holes (the parts of it that are not on the disk, read as zeros) exceed this
#: and half of its size is not read by ``verify``: hashing them costs time and no disk.
MAX_HOLE_BYTES = 64 << 20
#: The data extents counted to measure a file's holes; past them, the rest counts as data.
_MAX_EXTENTS = 10_000
#: The file systems of the kernel: their files make up their content (and their sizes).
_KERNEL_FOLDERS = ("/proc", "/sys")
_BLOCK = 1 << 20
#: What ``verify`` found of the files it hashed: by (device, inode, size, mtime), the SHA-256.
Seen = dict[tuple[int, int, int, int], str]
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


def stable_sha256(path: Path, size: object = None, *, on_disk: bool = False, seen: Seen | None = None) -> str:
    """SHA-256 of a regular file's bytes, read in blocks of 1 MiB.

    Args:
        path: The file (a symbolic link to one is followed: model folders are made of them).
        size: The size the manifest recorded, if any: a file of another size is not read.
        on_disk: Read only a file that is on a disk: not a file of the kernel (``/proc``,
            ``/sys``) that says it holds bytes, nor one whose holes exceed
            :data:`MAX_HOLE_BYTES` and half its size.
        seen: The files hashed so far, by identity: one of them is not read again.

    Raises:
        Unhashable: The file is missing, not a regular file, of another size than ``size``,
            unreadable, (``on_disk``) not on a disk, or yields more or fewer bytes than its
            size.
    """
    try:
        _regular(os.stat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Unhashable("file missing") from None
    except OSError as exc:
        raise Unhashable(f"cannot be read ({exc.strerror or exc})") from None
    except ValueError:  # a NUL byte in the path
        raise Unhashable("not a valid path (it holds a NUL byte)") from None
    try:
        st = os.fstat(fd)
        _regular(st.st_mode)  # what was opened, should the path have changed since
        if size is not None and st.st_size != size:
            raise Unhashable(f"size {st.st_size}, was {size}")
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if seen is not None and key in seen:
            return seen[key]
        if on_disk:
            _on_disk(fd, st)
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
        if seen is not None:
            seen[key] = digest.hexdigest()
        return digest.hexdigest()
    except OSError as exc:
        raise Unhashable(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _on_disk(fd: int, st: os.stat_result) -> None:
    """Refuse a file of the kernel that says it holds bytes (one that says 0 is read for none,
    and refused if it yields more), or one that is mostly holes (see :func:`stable_sha256`)."""
    for folder in _KERNEL_FOLDERS:
        try:
            kernel = st.st_size > 0 and os.stat(folder).st_dev == st.st_dev
        except OSError:
            continue
        if kernel:
            raise Unhashable(f"a file of the kernel ({folder}) that says it holds {st.st_size:,} bytes: not read")
    holes = st.st_size - _data_bytes(fd, st.st_size)
    if holes > MAX_HOLE_BYTES and holes * 2 > st.st_size:
        raise Unhashable(f"a sparse file: {holes:,} of its {st.st_size:,} bytes are holes, not on a disk: not read")


def _data_bytes(fd: int, size: int) -> int:
    """The bytes of an open file that are data, not holes, as its file system tells (all of
    them where it cannot: no SEEK_HOLE, or more than :data:`_MAX_EXTENTS` extents)."""
    if not hasattr(os, "SEEK_HOLE"):
        return size
    data = at = 0
    try:
        for _ in range(_MAX_EXTENTS):
            if at >= size:
                return data
            start = os.lseek(fd, at, os.SEEK_DATA)
            at = os.lseek(fd, start, os.SEEK_HOLE)
            data += at - start
        return data + max(0, size - at)
    except OSError as exc:
        return data if exc.errno == errno.ENXIO else size  # ENXIO: no data past ``at``
    finally:
        os.lseek(fd, 0, os.SEEK_SET)


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


def folder_sha256(folder: Path, size: object = None, *, on_disk: bool = False) -> str:
    """SHA-256 over the files of a datasets folder (:func:`dataset_files`): each file's path
    inside it and SHA-256, in order.

    Args:
        folder: The folder.
        size: The total size of its files the manifest recorded, if any: a folder whose
            files add up to another size is not read.
        on_disk: As :func:`stable_sha256`'s, for each file.

    Raises:
        Unhashable: See :func:`dataset_files` and :func:`stable_sha256`.
    """
    files = dataset_files(folder)
    if size is not None and (total := folder_size(files)) != size:
        raise Unhashable(f"size {total}, was {size}")
    digest = hashlib.sha256()
    for p in files:
        digest.update(f"{p.relative_to(folder).as_posix()}\0{stable_sha256(p, on_disk=on_disk)}\n".encode())
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


def found_sha256(path: Path, size: object = None, seen: Seen | None = None) -> str:
    """A file's SHA-256 as ``localjury verify`` finds it (see :func:`stable_sha256`: only a
    file on a disk, each file of ``seen`` once), or why it was not read."""
    try:
        return stable_sha256(path, size, on_disk=True, seen=seen)
    except Unhashable as exc:
        return exc.reason


def found_dataset_sha256(path: Path, size: object = None) -> str:
    """A dataset's SHA-256 as ``localjury verify`` finds it, or why it was not read: a regular
    file on a disk, or a Hugging Face datasets folder, never any other folder (a manifest's path
    is data, and ``/`` is a folder too); no more than the ``size`` the manifest recorded."""
    try:
        if not path.is_dir():
            return stable_sha256(path, size, on_disk=True)
        if is_saved_dataset(path):
            return folder_sha256(path, size, on_disk=True)
        return "a folder that is not a Hugging Face datasets folder (save_to_disk): not read"
    except Unhashable as exc:
        return exc.reason


def matches(want: object, have: str | None) -> bool:
    """Whether a hash found is the manifest's (a reason a file was not read never is)."""
    return have is not None and want == have and re.fullmatch(r"[0-9a-f]{64}", have) is not None


def is_saved_dataset(path: Path) -> bool:
    """Whether ``path`` is a folder that ``datasets``' ``save_to_disk`` wrote (a Dataset's
    ``state.json``, or a DatasetDict's ``dataset_dict.json``)."""
    return path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file())


def dataset_record(path: Path) -> dict[str, Any]:
    """A dataset file's path, size and hash; for a folder (a Hugging Face ``save_to_disk``
    folder), the total size of its files and :func:`~localjury._hashing.folder_sha256`.

    Raises:
        ConfigError: The dataset cannot be hashed (a folder too large to walk, a file that
            is not a regular file or changes as it is read).
    """
    try:
        if path.is_dir():
            size = folder_size(dataset_files(path))
            return {"path": str(path.resolve()), "size": size, "sha256": folder_sha256(path)}
        return {"path": str(path.resolve()), "size": path.stat().st_size, "sha256": stable_sha256(path)}
    except Unhashable as exc:
        raise ConfigError(f"cannot hash the dataset {path} for the manifest: {exc.reason}") from None
