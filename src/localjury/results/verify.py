"""A manifest read back and checked against this machine (``localjury verify``, ``show``).

A manifest may come from someone else (a results folder that was sent): it is read as data,
a regular file of bounded size, asking for at most :data:`MAX_CHECKS` checks; each file it
names is hashed only as a regular file on a disk, once, and no further than the manifest says
it held (:mod:`localjury._hashing`); the dataset it names is read by ``show`` only
when it is plainly the file the run read; and a model's server is asked again only on this
machine, unless the user's own registry allows that server elsewhere, and for no longer than
:data:`SERVER_TIMEOUT` (at most :data:`MAX_SERVED` servers).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pydantic import BaseModel, ValidationError

from localjury._files import read_bounded
from localjury._hashing import Seen, found_dataset_sha256, found_sha256, matches
from localjury._version import __version__
from localjury.engines._catalog import loads
from localjury.engines.server.client import served_model
from localjury.errors import ConfigError, LocaljuryError
from localjury.models.identity import ModelRecord, identity_files, served_identity
from localjury.models.registry import ModelSpec, load_registry
from localjury.results.manifest import Manifest, package_versions


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


#: How long verify waits for a model's server to connect and to answer its one question
#: (``GET /models``), whatever the manifest's entry says: its timeouts are data too.
SERVER_TIMEOUT = 30.0
#: The most models on servers verify asks (a jury has a few); the others are not checked.
MAX_SERVED = 32


def _check_served(model: ModelRecord, asked: int = 0) -> Check:
    """Ask a model's server again what it serves, and compare with the manifest; not when
    ``asked``, the servers asked already, has reached :data:`MAX_SERVED`."""
    assert model.served is not None
    what = f"model {model.name}: served at {model.served.base_url} as {model.served.model!r}"
    if asked >= MAX_SERVED:
        found = f"not checked: the manifest names more than {MAX_SERVED} models on servers"
        return Check(what=what, ok=False, expected=model.sha256, found=found)
    try:
        # A manifest may come from someone else: it cannot let verify reach another machine.
        # Only the user's own registry can, for the same model at the same address.
        spec = ModelSpec(name=model.name, **{**model.settings, "allow_remote": _remote_allowed(model)})
        want = served_identity(spec, model.served)
        waits = {k: min(getattr(spec.server, k), SERVER_TIMEOUT) for k in ("request_timeout", "connect_timeout")}
        ask = spec.model_copy(
            update={"served_model": model.served.model, "server": spec.server.model_copy(update=waits)}
        )
        here = served_model(ask, retries=0)
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


#: The most packages, models and model files a manifest may ask ``verify`` to check: a run's
#: manifest names a few packages and, per model, its weight shards (a few hundred for the
#: largest models), config and tokenizer files.
MAX_CHECKS = 10_000


def verify(manifest: Manifest, manifest_path: Path | None = None, results: Path | None = None) -> list[Check]:
    """Re-hash every model file, the dataset, the results and the summary (only as much of each
    as the manifest says it held, each file once: see :mod:`localjury._hashing`), and
    compare versions with the manifest.

    Args:
        manifest: The manifest read.
        manifest_path: Where it was read from: files it names by name are looked up beside it.
        results: The results file to check (default: the one the manifest names).

    Raises:
        ConfigError: The manifest asks for more than :data:`MAX_CHECKS` checks (nothing is
            read then).
    """
    files = sum(len(m.files) for m in manifest.models)
    if (asked := len(manifest.packages) + len(manifest.models) + files) > MAX_CHECKS:
        where = f"manifest {manifest_path}" if manifest_path is not None else "the manifest"
        raise ConfigError(
            f"{where} asks for {asked:,} checks ({len(manifest.packages):,} packages, {len(manifest.models):,} "
            f"models, {files:,} model files), over the {MAX_CHECKS:,} that verify makes; nothing is read: a "
            "manifest that `localjury run` writes names a few packages and each model's files, so check where "
            "this one comes from"
        )
    seen: Seen = {}
    version = manifest.localjury_version
    checks = [Check(what="localjury", ok=version == __version__, expected=version, found=__version__)]
    now = package_versions()
    for name in sorted(set(manifest.packages) | set(now)):
        want, have = manifest.packages.get(name), now.get(name)
        checks.append(Check(what=f"package {name}", ok=want == have, expected=want, found=have))
    served = 0
    for model in manifest.models:
        if model.served is not None:
            checks.append(_check_served(model, served))
            served += 1
        else:
            checks.extend(_check_model(model, seen))
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
        have = found_sha256(path, record.size, seen)
        checks.append(Check(what=f"{what} {path}", ok=matches(record.sha256, have), expected=record.sha256, found=have))
    return checks


def _check_model(model: ModelRecord, seen: Seen) -> list[Check]:
    """Hash a local model's identity files again (a GGUF model's: the files the manifest names;
    another's: those in its folder, at most :data:`MAX_CHECKS` of them)."""
    folder = Path(model.path)
    if not folder.is_dir():
        return [Check(what=f"model {model.name}", ok=False, expected=model.path, found="folder missing")]
    if loads(str(model.settings.get("engine"))) == "gguf":
        files = {n: found_sha256(folder / n, seen=seen) for n in model.files}
    else:
        found = identity_files(folder)
        if len(found) > MAX_CHECKS:
            return [Check(what=f"model {model.name}", ok=False, expected=f"{len(model.files):,} files",
                          found=f"{len(found):,} files, over the {MAX_CHECKS:,} verify checks: not read")]  # fmt: skip
        files = {str(p.relative_to(folder)): found_sha256(p, seen=seen) for p in found}
    return [
        Check(what=f"model {model.name}: {name}", ok=matches(model.files.get(name), files.get(name)),
              expected=model.files.get(name), found=files.get(name))
        for name in sorted(set(model.files) | set(files))
    ]  # fmt: skip
