"""The engine interface: one batched call in (prompts, schema, n, sampling), n texts per prompt out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from localjury.engines._prompts import PromptFormatter, render_plain
from localjury.types import Completion, Message, ProgressFn, Sampling, Usage

__all__ = [
    "BatchEngine",
    "Completion",
    "Engine",
    "Message",
    "ProgressFn",
    "PromptTokens",
    "Sampling",
    "Usage",
    "render_plain",
]
from localjury.errors import ConfigError
from localjury.models.registry import ModelSpec


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

    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int,
        sampling: Sampling,
        schema: dict[str, Any] | None,
        quotes: Sequence[Sequence[str]] | None = None,
        progress: ProgressFn | None = None,
    ) -> list[list[Completion]]:
        """Draw ``n`` samples for every prompt, constrained to ``schema`` when given.

        All prompts arrive in one call so the engine can batch them as it sees fit; samples
        of one prompt are one request with ``n`` return sequences, never ``n`` calls.
        ``quotes`` gives each prompt's quotable texts: where the schema marks quote arrays
        (:data:`~localjury.types.QUOTE_KEY`), each quote can only be an exact span of one of
        that prompt's texts (:mod:`~localjury.engines._quotes`). An engine that cannot
        constrain quotes refuses the call.

        Returns:
            One list of ``n`` completions per prompt, in prompt order.
        """
        ...

    def close(self) -> None:
        """Release the model and its memory. The engine is unusable afterwards."""
        ...


class PromptTokens:
    """A model's prompts as its engine sees them: formatted (``prompts``, a
    :class:`~localjury.engines._prompts.PromptFormatter`) and counted with the model's Hugging
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
    last_usage: Usage | None = None
    """What the last :meth:`generate` call did with its prompts' tokens. A backend's
    ``_generate`` sets it from what it computed; when it does not, every prompt token counts
    as computed (:meth:`count_tokens`, none reused)."""

    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int,
        sampling: Sampling,
        schema: dict[str, Any] | None,
        quotes: Sequence[Sequence[str]] | None = None,
        progress: ProgressFn | None = None,
    ) -> list[list[Completion]]:
        """Draw ``n`` samples per prompt; see :class:`Engine`.

        Raises:
            ConfigError: ``n`` above 1 at temperature 0 (the samples would all be the same),
                or ``quotes`` not one sequence of texts per prompt.
        """
        if n > 1 and sampling.temperature <= 0:
            raise ConfigError(f"model {self.spec.name!r}: {n} samples per prompt need a temperature above 0")
        if quotes is not None and len(quotes) != len(prompts):
            raise ConfigError(f"{len(quotes)} sets of quotable texts for {len(prompts)} prompts")
        self.last_usage = None
        if not prompts:
            self.last_usage = Usage(prompt_tokens=0)
            return []
        extra = {"quotes": quotes} if quotes is not None else {}
        outputs = self._generate(prompts, n=n, sampling=sampling, schema=schema, progress=progress, **extra)
        if self.last_usage is None:
            self.last_usage = Usage(prompt_tokens=sum(self.count_tokens(prompts)))
        return outputs

    def _generate(
        self,
        prompts: Sequence[str],
        *,
        n: int,
        sampling: Sampling,
        schema: dict[str, Any] | None,
        progress: ProgressFn | None,
        quotes: Sequence[Sequence[str]] | None = None,
    ) -> list[list[Completion]]:
        """The backend's generation of a checked, non-empty call (``quotes`` only when given)."""
        raise NotImplementedError
