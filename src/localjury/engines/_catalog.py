"""The engines localjury knows, by name: each backend package's facts (its ``__init__``'s
``FACTS``, an :class:`~localjury.engines._facts.EngineFacts`), and the questions the registry,
the manifest and a run ask of them instead of comparing engine names. :mod:`localjury.engines`
loads an engine from its entry. Nothing here imports a backend (torch, vLLM, llama.cpp): a
backend package's ``__init__`` imports nothing heavy.

Adding an engine: its package (``engines/<name>/``: its facts in ``__init__.py``, its engine in
a module of its own), its name in :data:`EngineName` and its row in :data:`ENGINES` (a unit
test keeps the two in step).
"""

from __future__ import annotations

from typing import Any, Literal

from localjury.engines._facts import EngineFacts, Entry, Files
from localjury.engines.llamacpp import FACTS as LLAMACPP
from localjury.engines.server import FACTS as SERVER
from localjury.engines.transformers import FACTS as TRANSFORMERS
from localjury.engines.vllm import FACTS as VLLM

EngineName = Literal["transformers", "vllm", "llamacpp", "server"]
"""The engines' names, in :data:`ENGINES`' order (models.yaml's ``engine`` also takes ``auto``)."""

#: The engines by name.
ENGINES: dict[str, EngineFacts] = {
    "transformers": TRANSFORMERS,
    "vllm": VLLM,
    "llamacpp": LLAMACPP,
    "server": SERVER,
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
    (:mod:`~localjury.engines.constrain.quotes`), or None where it can: the server engine never
    can, vLLM only on its guidance backend."""
    facts = ENGINES.get(engine)
    return facts.quotes_refusal(spec) if facts is not None else None
