"""Prompt formatting shared by the engines: the tokenizer's chat template, or the plain
format for base models (with the BOS token some GGUF-converted tokenizers do not add)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from localjury.errors import ConfigError
from localjury.models.registry import ModelSpec
from localjury.types import Message


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
