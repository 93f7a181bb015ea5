"""A model's shape (its hidden size and number of blocks) read from its config without loading
it: a Hugging Face folder's ``config.json``, or a GGUF file's metadata, so that a decision head
that does not fit its model is refused before any model loads.

The GGUF metadata is read by hand (:class:`GgufHeader`), up to the two keys: ``gguf``'s
``GGUFReader`` parses every field and tensor of the file first (6 s for SmolLM2, 24 s for Gemma 3
on an AMD EPYC Zen 3), where these two keys come first and take milliseconds. The llamacpp
engine reads the whole header with it too, where it cuts a model after a block
(:mod:`localjury.engines.llamacpp.trimmed`).
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar

from localjury.models._engine_settings import Files
from localjury.models.registry import ModelSpec

#: The largest config.json read for a model's hidden size (larger: not read, the load checks).
MAX_CONFIG_BYTES = 16 << 20


@dataclass(frozen=True)
class ModelShape:
    """What a head must fit of a model, as its config says without loading it."""

    hidden_size: int | None
    """The size of a block's output (None: the config does not say)."""
    blocks: int | None
    """Its transformer blocks (None: the config does not say)."""
    source: str
    """Where it was read, for messages (``its /models/x/config.json``)."""


def model_shape(spec: ModelSpec, kind: Files | None) -> ModelShape | None:
    """The hidden size and blocks of the model ``spec`` as an engine that loads ``kind`` of files
    loads it (its facts say which), read from its config (a Hugging Face folder's
    config.json, a GGUF file's metadata) without loading its weights; None where there is no
    such file (a server; a model not pulled yet: its load says so) or it does not say."""
    try:
        if kind == "gguf" and spec.gguf_file().is_file():
            return gguf_shape(spec.gguf_file())
        if kind == "hf" and (spec.local_dir() / "config.json").is_file():
            return config_shape(spec.local_dir() / "config.json")
    except OSError:
        return None  # unreadable: the load reports it
    return None


def config_shape(path: Path) -> ModelShape | None:
    """A Hugging Face ``config.json``'s hidden size and layers (a multimodal model's text
    config's, as transformers' ``get_text_config`` reads them)."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    try:
        config = json.loads(data) if len(data) <= MAX_CONFIG_BYTES else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(config, dict):
        return None
    text = config.get("text_config")
    config = text if isinstance(text, dict) else config

    def first(*names: str) -> int | None:
        value = next((config[n] for n in names if n in config), None)
        return value if type(value) is int and value > 0 else None

    return ModelShape(
        first("hidden_size", "n_embd", "d_model"), first("num_hidden_layers", "n_layer", "num_layers"), f"its {path}"
    )


def gguf_shape(path: Path) -> ModelShape | None:
    """A GGUF file's ``<arch>.embedding_length`` and ``<arch>.block_count``, read from its
    header's metadata alone: the keys come before the tokenizer's arrays and the tensors, and
    reading stops once both are found. None where the file is not a GGUF of version 2 or 3 or
    its metadata is malformed (its load says what is wrong)."""
    with open(path, "rb") as fh:
        header = GgufHeader(fh, os.fstat(fh.fileno()).st_size)
        try:
            found = header.metadata()
        except (ValueError, OverflowError):
            return None
    if found is None:
        return None
    arch = found.get("general.architecture")

    def number(key: str) -> int | None:
        value = found.get(f"{arch}.{key}")
        return value if isinstance(value, int) and value > 0 else None

    return ModelShape(number("embedding_length"), number("block_count"), f"the metadata of {path}")


class GgufHeader:
    """The key-value metadata at the head of a GGUF file (version 2 or 3, little-endian): the
    strings and integers, where each integer lies, the rest read past; after the whole metadata,
    the tensors' infos."""

    #: GGUF value types: the integers' formats, the other fixed sizes, a string, an array.
    INTS: ClassVar[dict[int, str]] = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}
    SIZES: ClassVar[dict[int, int]] = {6: 4, 7: 1, 12: 8}  # float32, bool, float64
    STRING, ARRAY = 8, 9

    def __init__(self, fh: BinaryIO, size: int) -> None:
        self.fh, self.size = fh, size
        self.tensor_count = 0
        #: Each integer's place in the file and its width in bytes.
        self.places: dict[str, tuple[int, int]] = {}

    def metadata(self, *, whole: bool = False) -> dict[str, int | str] | None:
        """The metadata up to the model's embedding length and block count (all of it where
        either is missing, or where ``whole``); None for a file that is not GGUF 2 or 3.

        Raises:
            ValueError: It ends inside its metadata, or holds a value of no known type.
        """
        if self.fh.read(4) != b"GGUF" or self.take("<I") not in (2, 3):
            return None
        self.tensor_count = self.take("<Q")
        found: dict[str, int | str] = {}
        for _ in range(self.take("<Q")):
            key, kind = self.text(), self.take("<I")
            if kind == self.STRING:
                found[key] = self.text()
            elif kind in self.INTS:
                self.places[key] = (self.fh.tell(), struct.calcsize(self.INTS[kind]))
                found[key] = self.take(self.INTS[kind])
            else:
                self.skip(kind)
            arch = found.get("general.architecture")
            if not whole and {f"{arch}.embedding_length", f"{arch}.block_count"} <= found.keys():
                break
        return found

    def tensors(self) -> list[tuple[str, int, int, int]]:
        """After the whole :meth:`metadata`: each tensor's name, where its info starts and ends
        in the file, and its data's offset (from the data section's start)."""
        infos = []
        for _ in range(self.tensor_count):
            start, name = self.fh.tell(), self.text()
            self.fh.seek(8 * self.take("<I") + 4, os.SEEK_CUR)  # its dimensions, its type
            offset = self.take("<Q")
            infos.append((name, start, self.fh.tell(), offset))
        return infos

    def take(self, fmt: str) -> int:
        raw = self.fh.read(struct.calcsize(fmt))
        if len(raw) < struct.calcsize(fmt):
            raise ValueError("the file ends inside its metadata")
        return int(struct.unpack(fmt, raw)[0])

    def text(self) -> str:
        length = self.take("<Q")
        if length > self.size:
            raise ValueError("a string longer than the file")
        return self.fh.read(length).decode("utf-8", "replace")

    def skip(self, kind: int, count: int = 1, *, inside: bool = False) -> None:
        """Read past ``count`` values of type ``kind`` (an array's items: ``inside``)."""
        if kind == self.ARRAY and not inside:
            self.skip(self.take("<I"), self.take("<Q"), inside=True)
        elif kind == self.STRING:
            for _ in range(count):
                self.text()
        elif kind in self.SIZES or kind in self.INTS:
            width = self.SIZES.get(kind) or struct.calcsize(self.INTS[kind])
            self.fh.seek(width * count, os.SEEK_CUR)
        else:
            raise ValueError(f"a value of GGUF type {kind}")  # arrays of arrays too: no GGUF localjury reads has one
