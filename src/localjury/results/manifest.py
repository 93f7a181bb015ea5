"""Run manifests: what a results file was made with.

Beside every results file, ``<stem>.manifest.json`` records the command, localjury's and
its dependencies' versions, each model's folder with a SHA-256 of each weight, config and
tokenizer file (for a model on a server: its URL and what the server reports of it), the
engine settings, the seed, the dataset's SHA-256 (taken before the run read it), and the
SHA-256 of the results and summary files it was written with. Checking one against this
machine (``localjury verify``) is :mod:`localjury.results.verify`.
"""

from __future__ import annotations

import platform
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from localjury._files import shown
from localjury._version import __version__
from localjury.engines._catalog import ENGINES
from localjury.models.identity import ModelRecord
from localjury.results._commit import StagedFile

#: Packages whose versions can change any judgment: localjury's core dependencies.
CORE_PACKAGES = ("torch", "transformers", "outlines", "outlines_core", "pydantic", "numpy")
#: Packages whose versions can change a judgment: the core ones, then those each engine's facts name.
PACKAGES = tuple(dict.fromkeys([*CORE_PACKAGES, *(d for e in ENGINES.values() for d in e.manifest_packages)]))


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


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that can change a judgment."""
    found: dict[str, str] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


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
    """Assemble a manifest for a finished run (``dataset``: its :func:`~localjury._hashing.dataset_record`, taken
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
