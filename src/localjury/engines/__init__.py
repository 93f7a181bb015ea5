"""Engines by name. A backend is imported only when asked for.

One package per backend (``transformers``, ``llamacpp``, ``vllm``, ``server``): its
``__init__`` holds the engine's facts and imports nothing heavy, its engine lives in the module
named after it (``engines/vllm/vllm.py``). Beside them, what they share: the interface
(:mod:`~localjury.engines.base`), the shared decode loop's base (:mod:`~localjury.engines._local`),
prompts, sampling and tokenizer helpers, the ``auto`` choice (:mod:`~localjury.engines._auto`),
engines kept loaded (:mod:`~localjury.engines.pool`), the output constraints
(:mod:`~localjury.engines.constrain`) and the native code paths (:mod:`~localjury.engines.native`).

Adding an engine: its package under ``localjury.engines``, whose ``FACTS`` say once what it
loads, what it needs and can do, and the rules a run follows for it, listed in
:data:`~localjury.engines._catalog.BACKENDS` (see :mod:`~localjury.engines._catalog`).
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from typing import TYPE_CHECKING

from localjury.engines._catalog import ENGINES, loads
from localjury.engines._catalog import quotes_refusal as quotes_refusal  # re-exported: a run asks it here
from localjury.errors import ConfigError, MissingDependencyError
from localjury.models.identity import ModelRecord, record_of

if TYPE_CHECKING:
    from localjury.engines.base import Engine, PromptTokens
    from localjury.models.registry import ModelFiles, ModelSpec


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
    if spec.base_url is not None:  # a model on a server
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
    facts = ENGINES.get(name)
    if facts is None:
        raise ConfigError(
            f"unknown engine {name!r} for model {spec.name!r}; expected one of: auto, {', '.join(ENGINES)}"
        )
    if facts.optional and facts.package is not None and find_spec(facts.package) is None:
        raise MissingDependencyError(f"model {spec.name!r} asks for the {name} engine: {facts.install}")
    return name


def explain_engine(spec: ModelSpec, *, measure: bool = False) -> tuple[str, str]:
    """The engine ``spec`` will run on here and why, in a few words (``models list``,
    ``doctor``). Without ``measure``, an ``auto`` entry that was never measured here is shown
    with the rule's choice and says so, instead of measuring; with it, its engines are timed
    now (again, if they were before)."""
    if spec.base_url is not None:  # a model on a server
        return "server", f"served at {spec.base_url}"
    if spec.engine != "auto":
        return spec.engine, "set in models.yaml"
    from localjury.engines._auto import choose

    choice = choose(spec, run=measure, fresh=measure)
    return choice.engine, choice.reason


def engine_names() -> list[str]:
    """Names of the engines localjury knows."""
    return list(ENGINES)


def load_engine(spec: ModelSpec, engine: str | None = None, files: ModelFiles | None = None) -> Engine:
    """Load ``spec``'s model into the named engine (default: the one models.yaml names), from
    ``files`` where they were checked already (a run's jury checks them before any record is
    read); inside :func:`localjury.engines.pool.keep_loaded`, the one already loaded for it.

    Raises:
        ConfigError: Unknown engine name.
        MissingDependencyError: The engine's packages are not installed.
    """
    from localjury.engines.pool import kept

    name = resolve_engine(spec, engine)
    facts = ENGINES[name]
    try:
        module = importlib.import_module(facts.module)
    except ImportError as exc:
        missing = repr(exc.name) if exc.name else f"a module that failed to import ({exc})"
        raise MissingDependencyError(f"the {name} engine needs {missing}: {facts.install}") from exc
    cls = getattr(module, facts.cls)
    return kept(spec, name, lambda: cls(spec, files))


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
            f"counting prompt tokens needs {exc.name!r}: {ENGINES['transformers'].install}"
        ) from exc
    return TokenizerOnly(spec, spec.engine)


def model_record(spec: ModelSpec, *, memo: bool = True) -> ModelRecord:
    """``spec``'s model as a run uses it and a manifest records it: the files its engine loads,
    hashed (:func:`~localjury.models.identity.record_of`), or what its server reports of it.

    Raises:
        EngineError: A model's server does not answer.
        ConfigError: It does not serve the entry's model.
    """
    if spec.base_url is not None:
        from localjury.engines.server.client import served_model

        return record_of(spec, None, served_model(spec), memo=memo)
    return record_of(spec, loads(spec.engine), memo=memo)


def model_identity(spec: ModelSpec) -> str:
    """What keys a model's generations in the judgment store: its files' hash, or, for a
    folder that is not there (a test engine), its name and path."""
    record = model_record(spec)
    return record.sha256 or f"unhashed:{spec.name}:{record.path}"
