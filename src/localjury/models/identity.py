"""What a judge model is, by its files or by its server: the SHA-256 of each file that makes a
local model what it is (weights, config, tokenizer, chat template; a GGUF and its tokenizer),
remembered by (path, size, mtime) under ``$LOCALJURY_HOME``, or what its server reports of it;
and the record of it a manifest keeps (:class:`ModelRecord`). The judgment store keys a
model's generations by this identity. Which files an engine loads, and asking a server, are
the engines' (:func:`localjury.engines.model_record`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from localjury._files import localjury_home
from localjury._hashing import Unhashable, content_hash, stable_sha256
from localjury._writes import write_atomic
from localjury.errors import ConfigError
from localjury.models.registry import ModelSpec

ServerKind = Literal["vllm", "llama-cpp-python", "llama.cpp", "other"]
"""Which OpenAI-compatible server serves a model, as told by its ``/v1/models`` answer."""


class ServedModel(BaseModel):
    """A model on an OpenAI-compatible server, as the server reports it (``GET /v1/models``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    """The server's API URL (the entry's ``base_url``, without a trailing slash)."""
    model: str
    """The model's id on the server; every request names it."""
    owned_by: str | None = None
    """The entry's ``owned_by`` (``vllm`` for vLLM, ``me`` for llama-cpp-python...)."""
    root: str | None = None
    """What vLLM reports as the model's source (its path or hub name); null elsewhere."""
    max_model_len: int | None = None
    """The longest sequence the server plans for, where it says (vLLM)."""
    flavour: ServerKind = "other"
    """Which server this is, as far as localjury can tell."""


#: The files that make a model what it is: weights, config, tokenizer, chat template.
IDENTITY_PATTERNS = (
    "*.safetensors",
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
)


class ModelRecord(BaseModel):
    """One judge model as the run used it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """The model's name in models.yaml."""
    path: str
    """Its local folder, or for a model on a server its URL."""
    sha256: str | None
    """A hash over its identity files' hashes (for a model on a server: over its URL, what
    the server reports of it and the request settings that change samples); null when the
    folder is not there."""
    files: dict[str, str]
    """SHA-256 of each weight, config and tokenizer file, by file name (none on a server)."""
    settings: dict[str, Any]
    """Its models.yaml entry as the run used it (engine, dtype, sampling settings...)."""
    served: ServedModel | None = None
    """For a model on a server: what the server reported of it when the run started."""

    def pin(self, spec: ModelSpec) -> ModelSpec:
        """The spec the run loads: for a model on a server, pinned to the model id its
        judgments are stored under, so that the engine refuses a server that has changed model."""
        if self.served is None:
            return spec
        return spec.model_copy(update={"served_model": self.served.model})


def file_sha256(path: Path, *, memo: bool = True) -> str:
    """SHA-256 of a file; remembered under ``$LOCALJURY_HOME`` by (path, size, mtime) so a
    run does not rehash gigabytes of weights each time (``memo=False`` rehashes)."""
    stat = path.stat()
    memo_file = localjury_home() / "file-hashes.json"
    memo_key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    known: dict[str, str] = {}
    if memo and memo_file.is_file():
        try:
            known = json.loads(memo_file.read_text())
        except (OSError, ValueError):
            known = {}
        if memo_key in known:
            return known[memo_key]
    try:
        value = stable_sha256(path)
    except Unhashable as exc:
        raise ConfigError(f"cannot hash {path}: {exc.reason}") from None
    if memo:
        known[memo_key] = value
        try:
            memo_file.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(memo_file, json.dumps(known))
        except OSError:
            pass  # a read-only home only costs a rehash next time
    return value


def identity_files(folder: Path, patterns: tuple[str, ...] = IDENTITY_PATTERNS) -> list[Path]:
    """The identity files in a model folder (links followed: a Hugging Face cache's are links)."""
    files: set[Path] = set()
    for pattern in patterns:
        files.update(p for p in folder.glob(pattern) if p.is_file())
    return sorted(files)


def model_files(folder: Path, *, memo: bool = True, patterns: tuple[str, ...] = IDENTITY_PATTERNS) -> dict[str, str]:
    """SHA-256 of each identity file in a model folder, by relative name."""
    return {str(p.relative_to(folder)): file_sha256(p, memo=memo) for p in identity_files(folder, patterns)}


#: The tokenizer files among IDENTITY_PATTERNS (a GGUF model's identity is its GGUF and these).
TOKENIZER_PATTERNS = tuple(p for p in IDENTITY_PATTERNS if p.startswith(("tokenizer", "special", "chat")))


def gguf_files(spec: ModelSpec, *, memo: bool = True) -> tuple[Path, dict[str, str]]:
    """What a model on an engine that loads GGUF files (llamacpp) is: its GGUF file and its tokenizer's files, by name
    relative to the GGUF's folder (absolute when the tokenizer sits elsewhere)."""
    gguf = spec.gguf_file()
    folder = gguf.parent
    files = {gguf.name: file_sha256(gguf, memo=memo)} if gguf.is_file() else {}
    tokenizer = spec.tokenizer_dir()
    if tokenizer.is_dir():
        for name, digest in model_files(tokenizer, memo=memo, patterns=TOKENIZER_PATTERNS).items():
            files[name if tokenizer == folder else str(tokenizer / name)] = digest
    return folder, files


def combined(files: dict[str, str]) -> str:
    """One hash over a model's file hashes."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def served_identity(spec: ModelSpec, served: ServedModel) -> str:
    """What keys the generations of a model on a server: its URL, what the server reports of
    it (its id, owner and source: never a timestamp), and the request settings that change
    samples."""
    return content_hash(
        base_url=served.base_url,
        model=served.model,
        owned_by=served.owned_by,
        root=served.root,
        sample_requests=spec.server.sample_requests,
        extra_body=spec.server.extra_body,
    )


def record_of(spec: ModelSpec, files: Literal["gguf", "hf"] | None, served: ServedModel | None = None,
              *, memo: bool = True) -> ModelRecord:  # fmt: skip
    """A model as a run uses it: its identity files hashed (``files``: those its engine loads, a
    GGUF or a Hugging Face folder), or, on a server, what the server reported (``served``); and
    its settings."""
    # An entry without a thinking setting records none (manifests stay as they were before it).
    unset = {"thinking"} if spec.thinking is None else set()
    settings = spec.model_dump(mode="json", exclude={"name", "description", *unset})
    if served is not None:
        return ModelRecord(
            name=spec.name,
            path=served.base_url,
            sha256=served_identity(spec, served),
            files={},
            settings=settings,
            served=served,
        )
    if files == "gguf":
        folder, hashed = gguf_files(spec, memo=memo)
    else:
        folder = spec.local_dir()
        hashed = model_files(folder, memo=memo) if folder.is_dir() else {}
    return ModelRecord(
        name=spec.name,
        path=str(folder),
        sha256=combined(hashed) if hashed else None,
        files=hashed,
        settings=settings,
    )
