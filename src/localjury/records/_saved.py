"""A Hugging Face ``save_to_disk`` folder checked before ``datasets`` reads it: the folder's own
JSON files name the files it reads (``state.json`` its Arrow files, ``dataset_dict.json`` its
splits), and a folder from someone else could name ``../../etc/passwd``, an absolute path,
``/dev/zero`` or a FIFO, which ``datasets.load_from_disk`` would map or wait on."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from localjury._files import parse_json, read_bounded
from localjury.errors import ConfigError

#: The largest JSON file of a datasets folder read (``state.json``, ``dataset_info.json``,
#: ``dataset_dict.json``: a few KB as ``save_to_disk`` writes them), and the most data files or
#: splits it may name (``save_to_disk`` writes one Arrow file per shard of 500 MB).
MAX_STATE_BYTES = 4 << 20
MAX_SAVED_FILES = 10_000


def _saved_file(folder: Path, name: object, what: str, *, kind: str = "file") -> Path:
    """The file (or, ``kind="folder"``, the folder) ``name`` inside a datasets folder, where a
    file of that folder names it: a relative path that stays inside the folder (no ``..``, no
    absolute path, no symbolic link that leads out), to a regular file (never a FIFO, a socket
    or a device) or a folder.

    Raises:
        ConfigError: Naming the folder, the entry (``what``: "state.json names") and why.
    """
    shown = repr(name)[:200]
    if not isinstance(name, str) or not name or "\0" in name:
        raise ConfigError(f"{folder}: {what} {shown}, not a {kind} name; it is not a datasets folder to read")
    parts = PurePosixPath(name).parts
    if PurePosixPath(name).is_absolute() or os.path.isabs(name) or ".." in parts or "\\" in name or ":" in name:
        raise ConfigError(
            f"{folder}: {what} {shown}, a path outside the folder; a datasets folder names only its own files "
            "(save it again with save_to_disk)"
        )
    target = folder / name
    try:
        inside = target.resolve(strict=True).is_relative_to(folder.resolve(strict=True))
        mode = os.stat(target).st_mode
    except (OSError, RuntimeError) as exc:
        raise ConfigError(f"{folder}: {what} {shown}, which cannot be read ({exc})") from None
    if not inside:
        raise ConfigError(f"{folder}: {what} {shown}, a symbolic link that leads outside the folder; it is not read")
    if not (stat.S_ISDIR(mode) if kind == "folder" else stat.S_ISREG(mode)):
        raise ConfigError(
            f"{folder}: {what} {shown}, which is not a regular {kind} (a FIFO, a device?); it is not read"
        )
    return target


def _saved_json(folder: Path, name: str, *, parse: bool = True) -> Any:
    """A JSON file of a datasets folder (``state.json``...), checked as the files it names are
    (:func:`_saved_file`), no larger than :data:`MAX_STATE_BYTES` (``datasets`` reads it
    whole), and read (unless not ``parse``) no further than its size."""
    path = _saved_file(folder, name, "holds")
    size = path.stat().st_size
    if size > MAX_STATE_BYTES:
        raise ConfigError(
            f"{folder}: {name} is {size:,} bytes, over the {MAX_STATE_BYTES:,}-byte bound on a datasets folder's "
            "JSON file; it is not read"
        )
    if not parse:
        return None
    try:
        return parse_json(read_bounded(path, "datasets folder file", "give a save_to_disk folder", max(1, size)))
    except ValueError as exc:
        raise ConfigError(f"{folder}: {name} is not read: {exc}") from None


def check_saved_dataset(path: Path, *, split: bool = False) -> None:
    """Refuse a ``save_to_disk`` folder before ``datasets`` reads anything of it, where what it
    names is not its own: every file its ``state.json`` names (and, for a DatasetDict, every
    split its ``dataset_dict.json`` names, each such a folder) must be a regular file inside it.

    Args:
        path: The folder.
        split: It is a split of a DatasetDict folder: a Dataset's folder (with its ``state.json``).

    Raises:
        ConfigError: Naming the folder and the entry: a path outside it (``..``, an absolute
            path, a symbolic link that leads out), a special file (a FIFO, ``/dev/zero``), a
            JSON file over :data:`MAX_STATE_BYTES` or not valid, or one without its list.
    """
    if not split and not (path / "state.json").is_file():
        splits = _saved_json(path, "dataset_dict.json")
        names = splits.get("splits") if isinstance(splits, dict) else None
        if not isinstance(names, list):
            raise ConfigError(f"{path}: dataset_dict.json has no list of splits; it is not a datasets folder to read")
        for name in names[:MAX_SAVED_FILES]:
            folder = _saved_file(path, name, "dataset_dict.json names the split", kind="folder")
            check_saved_dataset(folder, split=True)
        return
    state = _saved_json(path, "state.json")
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or len(files) > MAX_SAVED_FILES:
        raise ConfigError(
            f"{path}: state.json has no list of at most {MAX_SAVED_FILES:,} data files; it is not a datasets folder "
            "to read"
        )
    _saved_json(path, "dataset_info.json", parse=False)
    for entry in files:
        _saved_file(path, entry.get("filename") if isinstance(entry, dict) else entry, "state.json names the file")
