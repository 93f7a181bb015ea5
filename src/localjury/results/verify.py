"""A manifest read back and checked against this machine (``localjury verify``, ``show``).

A manifest may come from someone else (a results folder that was sent): it is read as data,
a regular file of bounded size; each file it names is hashed only as a regular file and no
further than the manifest says it held (:mod:`localjury.results._filehash`); the dataset it
names is read by ``show`` only when it is plainly the file the run read; and a model's server
is asked again only on this machine, unless the user's own registry allows that server
elsewhere.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pydantic import BaseModel, ValidationError

from localjury._files import read_bounded
from localjury._version import __version__
from localjury.engines._catalog import loads
from localjury.engines.server.client import served_model
from localjury.errors import ConfigError, LocaljuryError
from localjury.models.registry import ModelSpec, load_registry
from localjury.results._filehash import found_dataset_sha256, found_sha256, matches
from localjury.results.manifest import Manifest, ModelRecord, identity_files, package_versions, served_identity


def recorded_dataset(manifest: Manifest) -> Path | None:
    """The dataset file a manifest names, when it may be read as that dataset: a regular file
    (links followed) of the size the manifest records. A manifest may come from someone else:
    what it names is not read unless it is plainly the file the run read (a path under /proc
    says it is a regular file of 0 bytes, and reads without end)."""
    recorded = manifest.dataset or {}
    path, size = recorded.get("path"), recorded.get("size")
    if not isinstance(path, str) or not isinstance(size, int) or size <= 0:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return Path(path) if stat.S_ISREG(st.st_mode) and st.st_size == size else None


#: A manifest holds hashes and settings: a few kilobytes, megabytes for a model of many files.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


def read_manifest(path: Path) -> Manifest:
    """A manifest file, read as data that may come from someone else: a regular file (a FIFO
    is refused, never waited on) of at most :data:`MAX_MANIFEST_BYTES`, validated.

    Raises:
        ConfigError: Naming the file and the rule it breaks, or what does not validate.
    """
    data = read_bounded(path, "manifest", "give the path of the manifest file (--manifest)", MAX_MANIFEST_BYTES)
    try:
        return Manifest.model_validate_json(data)
    except (ValidationError, ValueError) as exc:
        raise ConfigError(f"{path} is not a localjury manifest: {str(exc).splitlines()[0]}") from None


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
    assert model.served is not None
    what = f"model {model.name}: served at {model.served.base_url} as {model.served.model!r}"
    try:
        # A manifest may come from someone else: it cannot let verify reach another machine.
        # Only the user's own registry can, for the same model at the same address.
        spec = ModelSpec(name=model.name, **{**model.settings, "allow_remote": _remote_allowed(model)})
        want = served_identity(spec, model.served)
        here = served_model(spec.model_copy(update={"served_model": model.served.model}), retries=0)
    except (LocaljuryError, ValidationError) as exc:
        reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        return Check(what=what, ok=False, expected=model.sha256, found=f"not checked: {reason}")
    found = served_identity(spec, here)
    return Check(what=what, ok=found == want, expected=want, found=found)


def _remote_allowed(model: ModelRecord) -> bool:
    """Whether the user's own registry (not the manifest) lets this model's server be on
    another machine: an entry of that name, at that address, with ``allow_remote``."""
    try:
        mine = load_registry().models.get(model.name)
    except ConfigError:
        return False
    served = model.served
    return mine is not None and mine.allow_remote and served is not None and mine.base_url == served.base_url


def verify(manifest: Manifest, manifest_path: Path | None = None, results: Path | None = None) -> list[Check]:
    """Re-hash every model file, the dataset, the results and the summary (only as much of each
    as the manifest says it held: see :mod:`localjury.results._filehash`), and compare
    versions with the manifest.

    Args:
        manifest: The manifest read.
        manifest_path: Where it was read from: files it names by name are looked up beside it.
        results: The results file to check (default: the one the manifest names).
    """
    version = manifest.localjury_version
    checks = [Check(what="localjury", ok=version == __version__, expected=version, found=__version__)]
    now = package_versions()
    for name in sorted(set(manifest.packages) | set(now)):
        want, have = manifest.packages.get(name), now.get(name)
        checks.append(Check(what=f"package {name}", ok=want == have, expected=want, found=have))
    for model in manifest.models:
        checks.extend([_check_served(model)] if model.served is not None else _check_model(model))
    if manifest.dataset is not None:  # a regular file or a datasets folder, no more than it held
        data, want = Path(str(manifest.dataset.get("path"))), manifest.dataset.get("sha256")
        have = found_dataset_sha256(data, manifest.dataset.get("size"))
        checks.append(Check(what=f"dataset {data}", ok=matches(want, have), expected=want, found=have))
    folder = manifest_path.parent if manifest_path is not None else Path.cwd()
    for what, record, given in (("results", manifest.results, results), ("summary", manifest.summary, None)):
        if record is None:
            checks.append(Check(what=what, ok=False, expected="a SHA-256 in the manifest", found="none recorded"))
            continue
        path = given or folder / record.path
        have = found_sha256(path, record.size)
        checks.append(Check(what=f"{what} {path}", ok=matches(record.sha256, have), expected=record.sha256, found=have))
    return checks


def _check_model(model: ModelRecord) -> list[Check]:
    """Hash a local model's identity files again (a GGUF model's: the files the manifest names)."""
    folder = Path(model.path)
    if not folder.is_dir():
        return [Check(what=f"model {model.name}", ok=False, expected=model.path, found="folder missing")]
    if loads(str(model.settings.get("engine"))) == "gguf":
        files = {n: found_sha256(folder / n) for n in model.files}
    else:
        files = {str(p.relative_to(folder)): found_sha256(p) for p in identity_files(folder)}
    return [
        Check(what=f"model {model.name}: {name}", ok=matches(model.files.get(name), files.get(name)),
              expected=model.files.get(name), found=files.get(name))
        for name in sorted(set(model.files) | set(files))
    ]  # fmt: skip
