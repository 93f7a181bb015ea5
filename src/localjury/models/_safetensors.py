"""The layout check of a safetensors file: whole, or what is wrong with it, from its header alone."""

from __future__ import annotations

import json
from pathlib import Path

#: The longest header the safetensors library accepts (its MAX_HEADER_SIZE).
MAX_HEADER = 100_000_000


def safetensors_problem(path: Path) -> str | None:
    """Return what is wrong with a safetensors file's layout, or ``None`` when it is whole.

    Reads the 8-byte little-endian header length and the JSON header only, never the tensors:
    the file must be exactly 8 + the header + the end of its last tensor long (the
    safetensors library refuses any other size when it loads).

    Raises:
        OSError: The file cannot be read.
    """
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return f"truncated: {size:,} bytes, too short for the 8-byte header length"
        length = int.from_bytes(head, "little")
        if length > MAX_HEADER:
            return (
                f"not a safetensors file: a header length of {length:,} bytes "
                f"(safetensors allows at most {MAX_HEADER:,})"
            )
        if 8 + length > size:
            return f"truncated: {size:,} bytes, its header alone needs {8 + length:,}"
        raw = fh.read(length)
    try:
        header = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        return f"not a safetensors file: its header is not JSON ({exc})"
    if not isinstance(header, dict):
        return "not a safetensors file: its header is not a JSON object"
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            return f"not a safetensors file: tensor {name!r} in its header has no valid data_offsets (begin, end)"
        end = max(end, offsets[1])
    expected = 8 + length + end
    if size < expected:
        return f"truncated: {size:,} bytes, the header says {expected:,}"
    if size > expected:
        extra = size - expected
        return f"too long: {size:,} bytes, the header says {expected:,} ({extra:,} bytes after the last tensor)"
    return None
