"""What localjury knows of an engine without importing it: the form each backend package's
``__init__`` fills in once (its ``FACTS``), which :mod:`~localjury.engines._catalog` gathers by
name and the catalog, ``auto``, ``localjury doctor`` and the run's manifest read. Nothing here
imports a backend (torch, vLLM, llama.cpp), nor any engine's package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from localjury.models._engine_settings import Files, VllmSettings


class Entry(Protocol):
    """What the engines' rules read of a models.yaml entry (a :class:`~localjury.models.registry.ModelSpec`;
    a protocol, so that a backend package's facts import no registry)."""

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

    name: str
    """Its name (models.yaml's ``engine``, ``--engine``); its package is ``localjury.engines.<name>``
    and its engine the class :attr:`cls` of the module ``localjury.engines.<name>.<name>``."""
    cls: str
    """Its class in :attr:`module`, imported only when the engine is loaded."""
    install: str
    """What to install when that module's imports are missing."""
    loads: Files | None
    """The model files it loads; None: none, it judges through the OpenAI-compatible server
    at the entry's ``base_url``."""
    settings: type[BaseModel] | None = None
    """The class of its own block of a models.yaml entry (the block named after it); None: none."""
    package: str | None = None
    """The module of its backend (``localjury doctor`` shows its version); None: none of its own."""
    distributions: tuple[str, ...] = ()
    """The distributions that may install ``package``; the first one installed gives its version."""
    optional: bool = False
    """``package`` comes with an extra, not with localjury: an engine asked for is checked to be
    installed before anything loads."""
    manifest_packages: tuple[str, ...] = ()
    """The distributions whose versions a run's manifest records for it, after the core packages
    (:data:`~localjury.results.manifest.CORE_PACKAGES`): they can change its judgments."""
    auto: int | None = None
    """Its rank among ``engine: auto``'s candidates, the lowest first (the order they are listed
    and measured in, and the rule's choice among the usable); None: never a candidate."""
    generate: bool = True
    """It draws samples under a metric's schema (``Engine.generate``)."""
    probabilities: bool = True
    """It gives verdict probabilities with its samples (log-probabilities of the decision token)."""
    hidden_states: bool = False
    """It reads a model's hidden states (``BatchEngine.hidden_states``): decision heads run on it."""
    thinking: bool = True
    """It holds a judge's thinking to its budget itself (``BatchEngine.thinks``), a grammar
    before the answer's; False: it leaves thinking to the model's server."""
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
    def module(self) -> str:
        """The module that holds its engine."""
        return f"localjury.engines.{self.name}.{self.name}"

    @property
    def served(self) -> bool:
        """Whether it judges through a server rather than files on this machine."""
        return self.loads is None
