"""Writing a file whole or not at all: into a temporary file beside it, flushed to disk, then
renamed over it, so that a reader (or a crash) never sees half of it. The labels, the model
identities, ``traces show --out`` and the annotation files write through it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def open_atomic(path: Path) -> Iterator[IO[str]]:
    """A text file written whole or not at all: written into a temporary file beside it, flushed
    to disk and renamed over ``path`` when the block ends; an error in the block leaves ``path``
    as it was and no temporary file behind. For a file written as a stream, line by line.

    Raises:
        OSError: The folder cannot be written.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path, text: str) -> None:
    """Write a whole text file at once (:func:`open_atomic`), so that a reader (or a crash)
    never sees half of it.

    Raises:
        OSError: The folder cannot be written.
    """
    with open_atomic(path) as fh:
        fh.write(text)
