"""The engines localjury knows, by name: each backend package's facts (its ``__init__``'s
``FACTS``, an :class:`~localjury.engines._facts.EngineFacts`), and the questions a run, the
manifest and the CLI ask of them instead of comparing engine names: which files an engine loads
and whether they are here, how its replicas and samples are keyed.
:mod:`localjury.engines` loads an engine from its entry. Nothing here imports a backend (torch,
vLLM, llama.cpp): a backend package's ``__init__`` imports nothing heavy, and no backend imports
this module back.

Adding an engine: its package (``engines/<name>/``: its facts in ``__init__.py``, its engine in
``<name>.py``), the package in :data:`BACKENDS`, and its name in models.yaml's
:data:`~localjury.models._engine_settings.EngineName` (a unit test keeps the two in step).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from localjury.engines import llamacpp, server, transformers, vllm
from localjury.engines._facts import EngineFacts, Entry
from localjury.models._engine_settings import Files

if TYPE_CHECKING:
    from localjury.models.registry import ModelSpec

#: The backend packages, in the order of models.yaml's engine names.
BACKENDS = (transformers, vllm, llamacpp, server)
#: The engines by name: each one's facts, read from its package.
ENGINES: dict[str, EngineFacts] = {backend.FACTS.name: backend.FACTS for backend in BACKENDS}


def loads(engine: str) -> Files | None:
    """The model files ``engine`` loads; None for the server engine, and for ``auto`` (it picks
    an engine by the files that are here) or a name that is no engine."""
    facts = ENGINES.get(engine)
    return facts.loads if facts is not None else None


def ready(spec: ModelSpec) -> bool:
    """Whether the files ``spec``'s engine loads are here (the GGUF for an engine that loads GGUF
    files or a ``.gguf`` path, the Hugging Face folder for the others, either for ``auto``, which
    picks among the engines that can load what is here); a model on a server has no files to
    prepare (whether its server is up is checked when a run starts)."""
    if spec.base_url is not None:  # a model on a server
        return True
    if loads(spec.engine) == "gguf" or spec.is_gguf_path:
        return spec.has_files("gguf")
    return spec.has_files("hf") or (spec.engine == "auto" and spec.has_files("gguf"))


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
    (:mod:`~localjury.engines.constrain.quotes`), or None where it can: the server engine never
    can, vLLM only on its guidance backend."""
    facts = ENGINES.get(engine)
    return facts.quotes_refusal(spec) if facts is not None else None
