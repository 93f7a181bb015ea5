"""The engine interface: one batched call in (prompts, schema, n, sampling), n texts per prompt out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from localjury.types import Completion, Message, ProgressFn, Sampling

if TYPE_CHECKING:
    from localjury.engines._prompts import PromptFormatter

__all__ = ["BatchEngine", "Completion", "Engine", "Message", "ProgressFn", "Sampling", "render_plain"]
from localjury.errors import ConfigError
from localjury.registry import ModelSpec


class Engine(Protocol):
    """A loaded judge model that generates in batches.

    An engine is created loaded (its constructor takes the :class:`ModelSpec`), runs any
    number of :meth:`generate` calls, and frees its memory in :meth:`close`.
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
        progress: ProgressFn | None = None,
    ) -> list[list[Completion]]:
        """Draw ``n`` samples for every prompt, constrained to ``schema`` when given.

        All prompts arrive in one call so the engine can batch them as it sees fit; samples
        of one prompt are one request with ``n`` return sequences, never ``n`` calls.

        Returns:
            One list of ``n`` completions per prompt, in prompt order.
        """
        ...

    def close(self) -> None:
        """Release the model and its memory. The engine is unusable afterwards."""
        ...


class BatchEngine:
    """The concrete base of the engines: what :class:`Engine` asks that does not depend on
    the backend. :meth:`generate` checks the call and hands it to the backend's
    ``_generate``; prompts are formatted (``prompts``, a
    :class:`~localjury.engines._prompts.PromptFormatter`) and counted with the model's
    Hugging Face ``tokenizer``, both of which a subclass sets when it loads.
    """

    name: ClassVar[str]
    spec: ModelSpec
    tokenizer: Any
    prompts: PromptFormatter

    def format_prompt(self, messages: Sequence[Message]) -> str:
        """Apply the chat template (with the generation prompt) or the plain format."""
        return self.prompts.format(messages)

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        """Prompt lengths in tokens, as :meth:`generate` will encode them."""
        return [len(ids) for ids in self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]

    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int,
        sampling: Sampling,
        schema: dict[str, Any] | None,
        progress: ProgressFn | None = None,
    ) -> list[list[Completion]]:
        """Draw ``n`` samples per prompt; see :class:`Engine`.

        Raises:
            ConfigError: ``n`` above 1 at temperature 0 (the samples would all be the same).
        """
        if n > 1 and sampling.temperature <= 0:
            raise ConfigError(f"model {self.spec.name!r}: {n} samples per prompt need a temperature above 0")
        if not prompts:
            return []
        return self._generate(prompts, n=n, sampling=sampling, schema=schema, progress=progress)

    def _generate(
        self,
        prompts: Sequence[str],
        *,
        n: int,
        sampling: Sampling,
        schema: dict[str, Any] | None,
        progress: ProgressFn | None,
    ) -> list[list[Completion]]:
        """The backend's generation of a checked, non-empty call."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the model and its memory."""
        raise NotImplementedError


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
