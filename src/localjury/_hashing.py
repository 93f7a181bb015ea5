"""The two hashes localjury takes: of a value (store keys, per-sample seeds) and of a file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


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
