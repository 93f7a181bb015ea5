"""The engine interface: one batched call in (prompts, schema, n, sampling), n texts per prompt out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from localjury.metrics.base import Message
from localjury.registry import ModelSpec


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one batched call."""

    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    first_sample: int = 0
    """Index of the first sample drawn: a call for samples m..k-1 of a prompt (adaptive
    strictness draws them after the first m) sets it to m, so that an engine that seeds per
    (run seed, prompt, sample index) draws the same samples as one call for all k."""


@dataclass(frozen=True)
class Completion:
    """One sampled output."""

    text: str
    n_tokens: int
    """Output tokens generated, the end-of-sequence token excluded."""
    finished: bool
    """True when the model ended the output itself; False when max_tokens cut it off."""


ProgressFn = Callable[[int], None]
"""Called with the number of prompts just completed."""


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
