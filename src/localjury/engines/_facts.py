"""What localjury knows of an engine without importing it: the form each backend package's
``__init__`` fills in (its ``FACTS``), which :mod:`~localjury.engines._catalog` gathers by
name. Nothing here imports a backend (torch, vLLM, llama.cpp), nor any engine's package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from localjury.models._engine_settings import VllmSettings

Files = Literal["gguf", "hf"]
"""A model's files as an engine loads them: one GGUF file, or a Hugging Face folder
(config.json and safetensors weights)."""


class Entry(Protocol):
    """What the engines' rules read of a models.yaml entry (a :class:`~localjury.models.registry.ModelSpec`;
    a protocol, so that the registry, which reads the engines' facts, is not imported here)."""

    @property
    def engine(self) -> str: ...
    @property
    def vllm(self) -> VllmSettings: ...
    @property
    def thinking(self) -> int | None: ...


def _unchanged(spec: Entry) -> dict[str, Any]:
    return {}


def _can_quote(spec: Entry | None) -> str | None:
    return None


@dataclass(frozen=True)
class EngineFacts:
    """One engine as the rest of localjury sees it, without importing it."""

    module: str
    """The module that holds it, imported only when the engine is loaded."""
    cls: str
    """Its class in that module."""
    install: str
    """What to install when that module's imports are missing."""
    loads: Files | None
    """The model files it loads; None: none, it judges through the OpenAI-compatible server
    at the entry's ``base_url``."""
    package: str | None = None
    """The module of its backend (``localjury doctor`` shows its version); None: none of its own."""
    distributions: tuple[str, ...] = ()
    """The distributions that may install ``package``; the first one installed gives its version."""
    optional: bool = False
    """``package`` comes with an extra, not with localjury: an engine asked for is checked to be
    installed before anything loads."""
    gpus_per_replica: Callable[[Entry], int] | None = None
    """GPUs one replica of a sharded run (``--cluster ray``) takes on a cluster with GPUs;
    None: its replicas run on CPUs."""
    split: Callable[[Entry], dict[str, Any]] = _unchanged
    """What changes in an entry whose replicas split the model over several GPUs."""
    sample_key: Callable[[Entry], dict[str, Any]] = _unchanged
    """More fields of its samples' key in the judgment store: samples it draws otherwise than
    the other engines are its own."""
    quotes_refusal: Callable[[Entry | None], str | None] = _can_quote
    """Why it cannot judge an entry with quoted evidence, or None where it can (see
    :func:`~localjury.engines._catalog.quotes_refusal`)."""

    @property
    def served(self) -> bool:
        """Whether it judges through a server rather than files on this machine."""
        return self.loads is None
