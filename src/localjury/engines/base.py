"""The engine interface: one batched call in (a :class:`GenerateCall`: prompts, n, sampling,
schema), n texts per prompt out; and the prompt formatting the engines share
(:class:`PromptFormatter`): the tokenizer's chat template, or the plain format for base models
(with the BOS token some GGUF-converted tokenizers do not add)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from localjury.engines.constrain.thinking_budget import ThinkingBudget, with_thinking
from localjury.errors import ConfigError
from localjury.models.registry import ModelSpec
from localjury.types import Completion, Message, Pooling, ProgressFn, Sampling, Usage
from localjury.votes.heads import DecisionHead, verdict_prefix

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "BatchEngine",
    "Completion",
    "Engine",
    "GenerateCall",
    "Message",
    "ProgressFn",
    "PromptTokens",
    "Sampling",
    "Usage",
    "render_plain",
]


def load_tokenizer(folder: Path, *, trust_remote_code: bool = False) -> Any:
    """The Hugging Face tokenizer in ``folder``, the one ``AutoTokenizer`` loads.

    A folder of tokenizer files without a model's ``config.json`` (the one a GGUF model's
    tokenizer is converted into) is loaded by the class its ``tokenizer_config.json`` names,
    which is ``AutoTokenizer``'s choice for such a folder, imported alone: importing
    ``AutoTokenizer`` brings torch, scikit-learn and transformers' generation code with it
    (11.6 s on one core of an AMD EPYC Zen 3, against 3.4 s for the class). Any other folder,
    or one whose tokenizer is remote code, goes through ``AutoTokenizer``.
    """
    import transformers

    named = None
    if not trust_remote_code and not (folder / "config.json").exists():
        try:
            config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            config = None
        if isinstance(config, dict) and "auto_map" not in config and isinstance(config.get("tokenizer_class"), str):
            named = getattr(transformers, config["tokenizer_class"].removesuffix("Fast"), None)
    loader: Any = named if isinstance(named, type) and named.__name__ != "PythonBackend" else None
    if loader is not None:
        return loader.from_pretrained(folder, local_files_only=True)
    return transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code,
                                                      local_files_only=True)  # fmt: skip


class PromptFormatter:
    """Render messages for one model as its engine will tokenize them (no special tokens added).

    Raises:
        ConfigError: models.yaml says ``prompt_format: chat`` but the tokenizer has no template.
    """

    def __init__(self, tokenizer: Any, spec: ModelSpec) -> None:
        self.tokenizer = tokenizer
        self.use_chat = spec.prompt_format == "chat" or (spec.prompt_format == "auto" and bool(tokenizer.chat_template))
        if spec.prompt_format == "chat" and not tokenizer.chat_template:
            raise ConfigError(
                f"model {spec.name!r} has prompt_format: chat in models.yaml but its tokenizer has no chat "
                "template; use prompt_format: plain (or auto)"
            )
        # Base models such as Gemma need their BOS token; some tokenizers (GGUF conversions)
        # do not add it themselves.
        bos = tokenizer.bos_token
        adds_bos = bool(tokenizer("a").input_ids[:1] == [tokenizer.bos_token_id])
        self.plain_prefix = bos if (bos and not adds_bos and not self.use_chat) else ""
        template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
        # A template with a thinking switch (Qwen3's) is told whether the judge thinks, where
        # models.yaml says (``thinking``: a budget or off); unset, the template's own default.
        self.template_kwargs: dict[str, bool] = (
            {"enable_thinking": bool(spec.thinking)}
            if spec.thinking is not None and "enable_thinking" in template
            else {}
        )

    def format(self, messages: Sequence[Message]) -> str:
        """Apply the chat template (with the generation prompt) or the plain format."""
        if self.use_chat:
            return str(
                self.tokenizer.apply_chat_template(
                    [{"role": m["role"], "content": m["content"]} for m in messages],
                    tokenize=False,
                    add_generation_prompt=True,
                    **self.template_kwargs,
                )
            )
        return self.plain_prefix + render_plain(messages)


def render_plain(messages: Sequence[Message]) -> str:
    """A prompt for base models without a chat template: the instruction, each example as
    a task followed by its judgment, then the task with the judgment left open."""
    parts: list[str] = []
    for msg in messages:
        if msg["role"] == "system":
            parts.append(msg["content"].strip() + "\n")
        elif msg["role"] == "user":
            parts.append("### Task\n" + msg["content"].strip() + "\n")
        else:
            parts.append("### Judgment\n" + msg["content"].strip() + "\n")
    if messages and messages[-1]["role"] != "assistant":
        parts.append("### Judgment\n")
    return "\n".join(parts)


@dataclass(frozen=True)
class GenerateCall:
    """One batched generation, as a model's pass asks it of an engine: built once by the
    caller and handed down to the backend unchanged.

    All prompts arrive in one call so the engine can batch them as it sees fit; the samples of
    one prompt are one request with ``n`` return sequences, never ``n`` calls.
    """

    prompts: Sequence[str]
    """The formatted prompts (:meth:`Engine.format_prompt`)."""
    n: int
    """Samples drawn per prompt."""
    sampling: Sampling
    """How they are drawn: temperature, top-p, token budget, seed and first sample index."""
    schema: dict[str, Any] | None = None
    """The JSON schema every sample is constrained to; None: unconstrained."""
    quotes: Sequence[Sequence[str]] | None = None
    """Each prompt's quotable texts, one sequence per prompt: where the schema marks quote arrays
    (:data:`~localjury.types.QUOTE_KEY`), each quote can only be an exact span of one of that
    prompt's texts (:mod:`~localjury.engines.constrain.quotes`). None unless a prompt of the call
    has quotable texts: an engine that cannot constrain quotes never sees them otherwise."""
    progress: ProgressFn | None = None
    """Called with the number of prompts done, as they are done."""
    thinking: ThinkingBudget | None = None
    """Each sample thinks first, within this budget, then answers under ``schema``
    (:mod:`~localjury.engines.constrain.thinking_budget`); ``sampling.max_tokens`` stays the answer's.
    None: as the model's ``thinking`` setting says (:meth:`BatchEngine.generate` sets it)."""


class Engine(Protocol):
    """A loaded judge model that generates in batches.

    An engine is created loaded (its constructor takes the :class:`ModelSpec`), runs any
    number of :meth:`generate` calls, and frees its memory in :meth:`close`. After each call
    it may set ``last_usage`` (a :class:`Usage`: the call's prompt tokens and how many it
    reused from a cache, as :class:`BatchEngine` does); a run counts an engine without it
    by :meth:`count_tokens`, none reused.
    """

    name: ClassVar[str]
    spec: ModelSpec

    def format_prompt(self, messages: Sequence[Message]) -> str:
        """Render chat messages in this model's prompt format (chat template or plain)."""
        ...

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        """Return the prompt length in tokens of each prompt."""
        ...

    def generate(self, call: GenerateCall) -> list[list[Completion]]:
        """Draw ``call.n`` samples for every prompt of ``call``, constrained to its schema when
        it has one (see :class:`GenerateCall`). An engine that cannot constrain quotes refuses
        a call whose schema asks for them.

        Returns:
            One list of ``n`` completions per prompt, in prompt order.
        """
        ...

    def decide(self, call: GenerateCall, head: DecisionHead) -> list[Completion]:
        """Decide each of ``call``'s prompts with ``head`` on the model's hidden states instead of
        sampling: one completion each, the head's probability as its verdict probability. A head
        on the prompt's states: one prefill a prompt, no token drawn (``{"verdict": v}``). A head
        after the reason: the judge's greedy answer under the call's schema first, which the
        completion carries (its verdict probability None where the answer wrote no verdict). An
        engine without hidden states refuses."""
        ...

    def close(self) -> None:
        """Release the model and its memory. The engine is unusable afterwards."""
        ...


class PromptTokens:
    """A model's prompts as its engine sees them: formatted (``prompts``, a
    :class:`~localjury.engines.base.PromptFormatter`) and counted with the model's Hugging
    Face ``tokenizer``, both of which a subclass sets when it loads. What a dry run needs of a
    model without loading its weights (:func:`localjury.engines.load_tokenizer`)."""

    spec: ModelSpec
    tokenizer: Any
    prompts: PromptFormatter

    def format_prompt(self, messages: Sequence[Message]) -> str:
        """Apply the chat template (with the generation prompt) or the plain format."""
        return self.prompts.format(messages)

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        """Prompt lengths in tokens, as the engine's ``generate`` will encode them."""
        return [len(ids) for ids in self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]

    def close(self) -> None:
        """Release the model and its memory."""
        raise NotImplementedError


class BatchEngine(PromptTokens):
    """The concrete base of the engines: what :class:`Engine` asks that does not depend on
    the backend. :meth:`generate` checks the call and hands it to the backend's
    ``_generate``; prompts are formatted and counted as :class:`PromptTokens` says.
    """

    name: ClassVar[str]
    thinks: ClassVar[bool] = True
    """Whether the backend constrains a thinking block before the answer (a call's
    ``thinking``); the server engine leaves thinking to the server, with the budget's tokens
    added to its ``max_tokens``."""
    last_usage: Usage | None = None
    """What the last :meth:`generate` call did with its prompts' tokens. A backend's
    ``_generate`` sets it from what it computed; when it does not, every prompt token counts
    as computed (:meth:`count_tokens`, none reused)."""

    def generate(self, call: GenerateCall) -> list[list[Completion]]:
        """Draw ``call.n`` samples per prompt; see :class:`Engine`.

        Raises:
            ConfigError: ``n`` above 1 at temperature 0 (the samples would all be the same),
                or ``quotes`` not one sequence of texts per prompt.
        """
        if call.n > 1 and call.sampling.temperature <= 0:
            raise ConfigError(f"model {self.spec.name!r}: {call.n} samples per prompt need a temperature above 0")
        if call.quotes is not None and len(call.quotes) != len(call.prompts):
            raise ConfigError(f"{len(call.quotes)} sets of quotable texts for {len(call.prompts)} prompts")
        self.last_usage = None
        if not call.prompts:
            self.last_usage = Usage(prompt_tokens=0)
            return []
        thinking = call.thinking
        if thinking is None and self.spec.thinking:
            thinking = ThinkingBudget.of(call.prompts[0], self.spec.thinking, getattr(self, "tokenizer", None))
        if thinking is not None and self.thinks and call.schema is not None:
            # The answer keeps its own max_tokens: the thinking and its close come on top.
            sampling = replace(call.sampling, max_tokens=call.sampling.max_tokens + thinking.extra_tokens())
            call = replace(call, sampling=sampling, thinking=thinking)
            outputs = [[with_thinking(c) for c in samples] for samples in self._generate(call)]
        elif thinking is not None and call.schema is not None:
            # A server thinks its own way: its thinking gets the budget's room beside the answer's.
            sampling = replace(call.sampling, max_tokens=call.sampling.max_tokens + thinking.tokens)
            outputs = self._generate(replace(call, sampling=sampling, thinking=None))
        else:
            outputs = self._generate(replace(call, thinking=None))
        if self.last_usage is None:
            self.last_usage = Usage(prompt_tokens=sum(self.count_tokens(call.prompts)))
        return outputs

    def _generate(self, call: GenerateCall) -> list[list[Completion]]:
        """The backend's generation of a checked call with at least one prompt."""
        raise NotImplementedError

    def decide(self, call: GenerateCall, head: DecisionHead) -> list[Completion]:
        """Each prompt decided by ``head`` on its state at the head's blocks (their outputs one
        after another), read where the head reads it (its ``pooling``, or after the judge's
        reason: :meth:`states_after_reason`); see :class:`Engine`.

        Raises:
            ConfigError: The engine gives no hidden states (see :meth:`hidden_states`).
        """
        if not head.after_reason:
            self.last_usage = None
            if not call.prompts:
                self.last_usage = Usage(prompt_tokens=0)
                return []
            states = self.hidden_states(call.prompts, head.layers, head.pooling)
            self.last_usage = Usage(prompt_tokens=sum(self.count_tokens(call.prompts)))
            return [decided(head, state.reshape(-1)) for state in states]
        answers, states = self.states_after_reason(call, head.layers)
        return [
            decided(head, state.reshape(-1), answer) if verdict_prefix(answer.text) is not None else answer
            for answer, state in zip(answers, states, strict=True)
        ]

    def states_after_reason(self, call: GenerateCall, layers: Sequence[int]) -> tuple[list[Completion], np.ndarray]:
        """Each prompt's answer, one greedy sample under ``call``'s schema and token budget, and
        the hidden states at ``layers`` at the end of the prompt followed by the answer up to its
        verdict (:func:`~localjury.votes.heads.verdict_prefix`: where the judge, having written its
        reason, is about to write its verdict), or by the whole answer where it wrote none. The
        usage counts the generation's prompt tokens and the second prefill's.

        Raises:
            ConfigError: The engine gives no hidden states (see :meth:`hidden_states`).
        """
        import numpy as np

        self._check_layers(layers)  # before any token is drawn
        greedy = replace(call, n=1, sampling=replace(call.sampling, temperature=0.0))
        answers = [samples[0] for samples in self.generate(greedy)]
        drew = self.last_usage.prompt_tokens if self.last_usage is not None else 0
        read = [prompt + (verdict_prefix(a.text) or a.text) for prompt, a in zip(call.prompts, answers, strict=True)]
        states = self.hidden_states(read, layers) if read else np.zeros((0, len(layers), 0), np.float32)
        self.last_usage = Usage(prompt_tokens=drew + sum(self.count_tokens(read)))
        return answers, states

    def block_count(self) -> int:
        """The model's transformer blocks (the layers :meth:`hidden_states` can read)."""
        raise self._no_hidden_states()

    def hidden_states(self, prompts: Sequence[str], layers: Sequence[int], pooling: Pooling = "last") -> np.ndarray:
        """The output of each of ``layers`` (transformer blocks, 0 the first) at each prompt's
        last token (``pooling="last"``), or its mean over the tokens of the prompt's response
        (``"response"``), one prefill a prompt and nothing sampled: an array of (prompts, layers,
        hidden size), float32.

        Raises:
            ConfigError: The engine cannot read hidden states (a server; vLLM unless eager), or
                not so pooled (vLLM); a layer is not one of the model's blocks; a prompt has no
                response to pool.
        """
        raise self._no_hidden_states()

    def pooled_states(
        self, prompts: Sequence[str], layers: Sequence[int], poolings: Sequence[Pooling]
    ) -> dict[Pooling, np.ndarray]:
        """:meth:`hidden_states` pooled each of ``poolings``' ways: pooling -> its array. Here one
        prefill a pooling; the engines with a decode loop of their own read every way in one
        (:class:`~localjury.engines._local.LocalDecoding`).

        Raises:
            ConfigError: As :meth:`hidden_states`, for any of the poolings.
        """
        return {pooling: self.hidden_states(prompts, layers, pooling) for pooling in dict.fromkeys(poolings)}

    def _no_hidden_states(self) -> ConfigError:
        return ConfigError(
            f"model {self.spec.name!r}: the {self.name} engine gives no hidden states, so it cannot fit or run a "
            "decision head; run the model on the transformers or llamacpp engine (--engine)"
        )

    def _check_layers(self, layers: Sequence[int]) -> None:
        """Raise unless every layer is one of the model's blocks."""
        blocks = self.block_count()
        wrong = [i for i in layers if not 0 <= i < blocks]
        if wrong:
            raise ConfigError(f"model {self.spec.name!r} has blocks 0 to {blocks - 1}; no layer {wrong[0]}")


def decided(head: DecisionHead, state: np.ndarray, answer: Completion | None = None) -> Completion:
    """A head's decision from a hidden state, as a completion: its output (its probability, or a
    graded head's normalised score) as the verdict's probability; the text the judge's ``answer`` where it
    wrote one first (a head after the reason), else the head's answer, no token drawn."""
    p = head.output(state)
    if answer is not None:
        return replace(answer, verdict_probs=(p,))
    return Completion(json.dumps(head.answer(p)), 0, True, verdict_probs=(p,))
