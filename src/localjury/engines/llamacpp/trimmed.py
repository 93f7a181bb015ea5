"""A GGUF model cut after one of its blocks, which reads of shallower hidden states run on
(:class:`~localjury.engines.llamacpp.layers.LayerReader`): the source's metadata and the tensors
it keeps byte for byte, the blocks above left out and the block count set. Its header is read by
:class:`~localjury.models._shape.GgufHeader` (``gguf``'s own reader decodes every token of the
vocabulary first: 22 s for Gemma 3's 262k), the tensors' bytes copied from a map of the file.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import re
import shutil
import stat
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from localjury._files import localjury_home
from localjury.models._shape import GgufHeader

log = logging.getLogger(__name__)

#: The layout of a trimmed copy, in its name: a copy of another layout is written again.
TRIM_LAYOUT = 1
_BLOCK_TENSOR = re.compile(r"blk\.(\d+)\.")
#: The disk space a copy must leave free where it is written.
FREE_AFTER_COPY = 1 << 30


def trimmed_gguf(source: Path, top: int, folder: Path | None = None) -> Path:
    """A GGUF of ``source`` cut after block ``top``: its metadata and tensors byte for byte, the
    blocks above ``top`` left out and the block count ``top + 1``. Written once into ``folder``
    (default ``$LOCALJURY_HOME/trimmed``), named after the source's folder and name, a digest of its
    path, size and time, and the blocks kept; written to a temporary file renamed into place, so that
    no reader sees half a copy. A copy already there is compared with the source byte for byte (a
    memory comparison, well under a second a GB) and written again, with a warning, where it differs
    or is not a regular file. Refused (``OSError``) where it would leave less than 1 GiB free."""
    st = source.stat()
    material = f"{TRIM_LAYOUT}\0{source.resolve()}\0{st.st_size}\0{st.st_mtime_ns}"
    folder = folder or localjury_home() / "trimmed"
    digest = hashlib.sha256(material.encode()).hexdigest()[:16]
    path = folder / f"{source.parent.name}-{source.stem}-{digest}-blocks{top + 1}.gguf"
    with source.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        buf, parts = memoryview(mapped), []
        try:
            parts = _trimmed_parts(GgufHeader(f, st.st_size), buf, top, source)
            if _holds(path, parts):
                return path
            if os.path.lexists(path):
                log.warning("%s differs from a copy of %s cut after block %d: written again", path, source, top)
            _write(parts, folder, path, f"blocks 0-{top} of {source.name}")
        finally:
            for part in parts:
                if isinstance(part, memoryview):
                    part.release()
            buf.release()
    return path


def _trimmed_parts(header: GgufHeader, buf: memoryview, top: int, source: Path) -> list[Any]:
    """The bytes of the copy of ``buf`` (a GGUF file, ``header`` reading it) cut after block
    ``top``, in order: its header, metadata and tensor infos (padded), then each tensor's data
    (views of ``buf``)."""
    found = header.metadata(whole=True)
    if found is None:
        raise ValueError("not a little-endian GGUF of version 2 or 3")
    count = f"{found.get('general.architecture')}.block_count"
    blocks = found.get(count)
    if not isinstance(blocks, int) or not 0 <= top < blocks - 1:
        raise ValueError(f"{source.name} has no block {top} below its last")
    kv_end, infos = header.fh.tell(), header.tensors()
    alignment = found.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"{source.name}'s alignment {alignment!r} is not a power of two")
    data_start = -(-header.fh.tell() // alignment) * alignment
    # A tensor's data runs to the next one's (padding included), the last one's to the file's end.
    starts = sorted(offset for *_, offset in infos)
    extent = dict(zip(starts, [*starts[1:], len(buf) - data_start], strict=True))
    kept = [info for info in infos if not (m := _BLOCK_TENSOR.match(info[0])) or int(m.group(1)) <= top]
    head = bytearray(struct.pack("<4sIQQ", b"GGUF", *struct.unpack_from("<I", buf, 4), len(kept),
                                 struct.unpack_from("<Q", buf, 16)[0]))  # fmt: skip
    head += buf[24:kv_end]
    at, width = header.places[count]
    head[at : at + width] = (top + 1).to_bytes(width, "little")
    offset = 0
    for _, start, end, old in kept:
        head += buf[start : end - 8]
        head += struct.pack("<Q", offset)
        offset += extent[old] - old
    head += bytes(-len(head) % alignment)
    return [bytes(head)] + [buf[data_start + old : data_start + extent[old]] for *_, old in kept]


def _holds(path: Path, parts: list[Any]) -> bool:
    """Whether ``path`` is a regular file (not followed if a link) holding exactly ``parts``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size != sum(len(p) for p in parts) or not st.st_size:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            pos = 0
            for part in parts:
                have = np.frombuffer(mapped, np.uint8, len(part), pos)
                same = np.array_equal(have, np.frombuffer(part, np.uint8))
                del have
                if not same:
                    return False
                pos += len(part)
    return True


def _write(parts: list[Any], folder: Path, path: Path, what: str) -> None:
    """``parts`` written to ``path`` through a temporary file in ``folder``, saying so on stderr."""
    total = sum(len(p) for p in parts)
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.disk_usage(folder).free < total + FREE_AFTER_COPY:
        raise OSError(f"{total / 2**20:,.0f} MiB would leave less than 1 GiB free in {folder}")
    print(f"localjury: writing {what} for reading states (once; kept in {folder})", file=sys.stderr, flush=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                out.write(part)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
