"""Reading a user's files, the one way: a regular file only (never waiting on a FIFO, never a
device), every read bounded (a whole file, a line of JSON Lines, a YAML document), every parse
bounded in depth, and each failure a :class:`~localjury.errors.ConfigError` that names the
file (and the line). The records loader, the labels, ``show``, ``verify``, the registry, the
pull and the manifest read through it."""

from __future__ import annotations

import codecs
import errno
import json
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from localjury._yaml import MAX_YAML_BYTES, YamlBoundError, load_bounded
from localjury.errors import ConfigError


def localjury_home() -> Path:
    """``$LOCALJURY_HOME`` (default ``~/.cache/localjury``): the models, the judgment store, the
    probes' and the file hashes' memos, the commit key."""
    return Path(os.environ.get("LOCALJURY_HOME") or Path.home() / ".cache" / "localjury").expanduser()


_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _refuse_unless_regular(mode: int, path: Path, what: str, hint: str) -> None:
    if stat.S_ISDIR(mode):
        raise ConfigError(f"{path} is a folder, not a {what}; {hint}")
    if not stat.S_ISREG(mode):
        kind = next((name for is_kind, name in _SPECIAL_FILES if is_kind(mode)), "a special file")
        raise ConfigError(
            f"{path} is not a regular file ({kind}), so it is not read as a {what}; "
            "save its content to a regular file and give that file's path"
        )


def _unreadable(path: Path, what: str, exc: OSError | ValueError, *, reading: bool = False) -> ConfigError:
    """The error for a file that cannot be looked at, opened or (``reading``) read."""
    if isinstance(exc, FileNotFoundError):
        return ConfigError(f"{what} not found: {path}")
    if isinstance(exc, ValueError):  # os.stat refuses a path with a NUL byte this way
        return ConfigError(f"{what} path {str(path)!r} is not a valid path: {exc}")
    if is_symlink_loop(exc):
        return symlink_loop_error(path, what)
    if isinstance(exc, PermissionError):
        fix = "; check its permissions"
    elif reading:
        fix = (
            "; it opens but its content cannot be read (a special file such as /proc/self/mem says it is "
            "regular): give the path of a regular file that can be read"
        )
    else:
        fix = ""
    return ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}{fix}")


def _check_reads(fd: int, path: Path, what: str) -> None:
    """Read the file's first byte without moving its position: a file that ``stat`` says is
    regular but that cannot be read (``/proc/self/mem``: EIO at offset 0) is refused here, as
    a ConfigError naming it, not at some later read deep inside a caller."""
    if not hasattr(os, "pread"):  # Windows: no special files of that kind
        return
    try:
        os.pread(fd, 1, 0)
    except OSError as exc:
        raise _unreadable(path, what, exc, reading=True) from None


def is_symlink_loop(exc: BaseException) -> bool:
    """Whether ``exc`` says that a path leads into a loop of symbolic links: ELOOP from the
    operating system, or the RuntimeError ``Path.resolve`` raises for one (Python 3.11, 3.12)."""
    if isinstance(exc, OSError):
        return exc.errno == errno.ELOOP
    return isinstance(exc, RuntimeError) and str(exc).startswith("Symlink loop")


def symlink_loop_error(path: Path | str, what: str) -> ConfigError:
    """The error for a path that leads into a loop of symbolic links, naming what it is."""
    return ConfigError(
        f"{what} {path} leads into a loop of symbolic links (or more links in a row than the system follows); "
        "fix or remove the link"
    )


def check_no_symlink_loop(path: Path, what: str) -> None:
    """Refuse a path that leads into a loop of symbolic links, at its end or in a folder above
    it (``a -> b -> a``; ``a/results.jsonl``). A path that does not exist yet passes.

    Raises:
        ConfigError: Naming ``what`` the path is and the path.
    """
    try:
        os.stat(path)
    except OSError as exc:
        if is_symlink_loop(exc):
            raise symlink_loop_error(path, what) from None
    except ValueError:
        pass  # a NUL byte: the helpers that read or write the path name it


def shown(text: str) -> str:
    """``text`` as it can be written: the bytes of a name that is not UTF-8 (which Python holds
    as lone surrogates, ``surrogateescape``) as ``\\xNN`` escapes; valid text as it is."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def check_utf8_path(path: Path, what: str) -> None:
    """Refuse a path that cannot be written as UTF-8 text, as given or once its links are
    resolved (a folder or file name of bytes that are not UTF-8, e.g. Latin-1's ``caf\\xe9``):
    the manifest, the summary and the reports record each input and output path as text, so
    such a path would fail at the end of the work instead of before it.

    Raises:
        ConfigError: Naming ``what`` the path is and the path, its bytes escaped.
    """
    for text in (str(path), os.path.realpath(path)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(
                f"the {what} path {shown(text)} is not valid UTF-8 (a name of other bytes): localjury records "
                "every path it reads or writes as UTF-8 text; rename the file or folder, or give another path"
            ) from None


def check_regular_file(path: Path, what: str, hint: str) -> None:
    """Refuse anything but an existing regular file (or a link to one), without opening it.

    Args:
        path: The file.
        what: What the file is, for messages: "dataset file", "criteria file".
        hint: What to give instead of a folder, e.g. "give the path of the YAML file".

    Raises:
        ConfigError: The path does not exist, cannot be looked at, or is a folder, a FIFO,
            a socket or a device.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:
        raise _unreadable(path, what, exc) from None
    _refuse_unless_regular(mode, path, what, hint)


def open_regular_file(path: Path, what: str, hint: str) -> IO[bytes]:
    """Open a regular file for reading bytes; never block on a FIFO.

    Args:
        path: The file.
        what: What the file is, for messages: "dataset file", "criteria file".
        hint: What to give instead of a folder, e.g. "give the path of the YAML file".

    Returns:
        The open file, which the caller closes.

    Raises:
        ConfigError: As :func:`check_regular_file`; the file cannot be opened (permissions),
            or its first byte cannot be read (see :func:`_check_reads`).
    """
    check_regular_file(path, what, hint)
    # O_NONBLOCK: should a FIFO take the file's place after the check, opening it returns at
    # once instead of waiting for a writer, and the fstat below refuses it. A regular file
    # ignores the flag, and it is cleared again before reading.
    nonblock = getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, os.O_RDONLY | nonblock | getattr(os, "O_BINARY", 0))
    except (OSError, ValueError) as exc:
        raise _unreadable(path, what, exc) from None
    try:
        _refuse_unless_regular(os.fstat(fd).st_mode, path, what, hint)
        _check_reads(fd, path, what)
        if nonblock:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_reads_if_regular(path: Path, what: str) -> None:
    """Refuse a path that ``stat`` says is a regular file but whose content cannot be read
    (``/proc/self/mem``), naming ``what`` it is. Anything else passes: a path not there yet,
    a folder, a special file, a file this user cannot open; what reads or writes the path
    names those in its own words.

    Raises:
        ConfigError: The file opens but its first byte cannot be read.
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except (OSError, ValueError):
        return
    try:
        _check_reads(fd, path, what)
    finally:
        os.close(fd)


def read_bounded(path: Path, what: str, hint: str, limit: int) -> bytes:
    """Read a whole regular file of at most ``limit`` bytes (never more than that is read).

    Args:
        path: The file.
        what: What the file is, for messages: "calibration file", "criteria file".
        hint: What to give instead of a folder, e.g. "give the path of the YAML file".
        limit: The most bytes the file may hold.

    Raises:
        ConfigError: As :func:`open_regular_file`; the file cannot be read (a read error,
            such as a special file under /proc that says it is regular); or it holds more than
            ``limit`` bytes.
    """
    with open_regular_file(path, what, hint) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise _unreadable(path, what, exc, reading=True) from None
    if len(data) > limit:
        raise ConfigError(
            f"{what} {path} is over the {limit:,}-byte bound on a {what}; it is not read: give a smaller file"
        )
    return data


def load_yaml_file(path: Path, what: str) -> tuple[Any, bytes]:
    """Parse a YAML file with the bounded loader (:mod:`localjury._yaml`); return what it holds
    and the file's bytes (for a caller that also hashes it or reports lines), read once.

    A leading UTF-8 byte order mark is ignored.

    Raises:
        ConfigError: The file does not exist, is not a regular file, cannot be read, is over
            :data:`~localjury._yaml.MAX_YAML_BYTES`, is not UTF-8, is not valid YAML, or goes
            over a bound of the loader (aliases expanded past what a file may hold, nesting
            too deep, a cycle); the message names the file and the rule.
    """
    data = read_bounded(path, what, "give the path of the YAML file", MAX_YAML_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {path} is not valid UTF-8 (byte {exc.start}: {exc.reason}); save it as UTF-8"
        ) from None
    try:
        return load_bounded(text), data
    except YamlBoundError as exc:
        raise ConfigError(f"{what} {path} is not read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {exc}") from exc
    except RecursionError:
        # The loader bounds nesting well below the recursion limit; kept for a deep stack.
        raise ConfigError(f"{what} {path} is nested too deeply to read; flatten it") from None
    except ValueError as exc:
        # PyYAML's constructors call int() and datetime() on plain scalars: a 5000-digit
        # number or a date like 2024-13-01 raises here instead of a YAMLError.
        raise ConfigError(
            f"{what} {path} holds a value YAML cannot convert ({exc}); quote it to keep it as text"
        ) from exc


def read_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file, or raise a ConfigError naming ``what`` it is and the path: the one
    way localjury reads YAML (see :func:`load_yaml_file` for the bounds and errors)."""
    return load_yaml_file(path, what)[0]


#: The longest line of a JSON Lines file read (a dataset's record, a results row, a label): a
#: longer one is read past, never held whole. Far above what any judge reads (a record's text is
#: bounded by its judges' context, about 32 MiB a field for a context of 131,072 tokens). Reading
#: and decoding a line at the bound takes about twice its size; parsing one made of text does too,
#: but one made of millions of tiny values (``[{},{},...]``) builds Python objects of many times it.
MAX_LINE_BYTES = 1 << 30


@dataclass(frozen=True)
class Overlong:
    """A line (or a row of a table) over the bound, read past."""

    size: int
    """Its bytes (for a Parquet row: of its texts, and 8 for each other value)."""
    head: str
    """Something to name it by: its first characters, or its id."""
    is_id: bool = False
    """``head`` is the row's own id."""


def bounded_lines(fh: IO[bytes], path: Path, what: str, limit: int = MAX_LINE_BYTES) -> Iterator[bytes | Overlong]:
    """Yield the lines of an open file, the first without a UTF-8 byte order mark; a line over
    ``limit`` bytes as an :class:`Overlong`, without holding more of it than that.

    Raises:
        ConfigError: A read fails (naming ``what`` the file is and its path).
    """
    first = True
    try:
        while line := fh.readline(limit + 1):
            whole = len(line) <= limit or line.endswith(b"\n")
            if first:
                line = line.removeprefix(codecs.BOM_UTF8)
                first = False
            if whole:
                yield line
                continue
            head, size = line[:4096], len(line)
            del line
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                size += len(rest)
            yield Overlong(size + len(rest.rstrip(b"\n")), head.decode("utf-8", "replace"))
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def parse_json(data: bytes | str) -> Any:
    """Parse one JSON document (a line, an item) of a user's file.

    Raises:
        ValueError: Its message says why, in words that follow "line N: ": not UTF-8, not
            valid JSON (with the column), nested deeper than Python reads (a RecursionError
            inside), or a number longer than Python converts.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(data.rstrip("\r\n"))  # a column past the line's end names no place in it
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError(
            f"nested too deeply to read (JSON arrays and objects more than about {sys.getrecursionlimit()} levels deep)"
        ) from None
    except ValueError as exc:  # a number longer than sys.get_int_max_str_digits()
        raise ValueError(f"not readable as JSON: {exc}") from None


def json_lines(path: Path, what: str, hint: str, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed value)`` for each non-blank line of a JSON Lines file, read
    through :func:`open_regular_file` one bounded line at a time.

    Args:
        path: The file.
        what: What the file is, for messages: "results file", "labeled data set".
        hint: What to give instead of a folder, e.g. "give the path of the JSONL file".
        limit: The longest line read.

    Raises:
        ConfigError: As :func:`open_regular_file`; a read fails; or a line is over ``limit``
            or does not parse (see :func:`parse_json`): the message names the file and the line.
    """
    with open_regular_file(path, what, hint) as fh:
        for n, line in enumerate(bounded_lines(fh, path, what, limit), start=1):
            if isinstance(line, Overlong):
                raise ConfigError(
                    f"{path}, line {n}: {line.size:,} bytes, over the {limit:,}-byte bound on a line of a {what}; "
                    "it is not read"
                )
            if not line.strip():
                continue
            try:
                yield n, parse_json(line)
            except ValueError as exc:
                raise ConfigError(f"{path}, line {n}: {exc}; a {what} holds one JSON value a line") from None
