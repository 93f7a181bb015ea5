"""What the engines with a decode loop of their own share (transformers, llama.cpp): prompts
formatted and counted by a Hugging Face tokenizer, outputs constrained by Outlines' guides."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from localjury.engines._outlines import JsonSchemaIndex
from localjury.engines._prompts import PromptFormatter
from localjury.metrics.base import Message


class LocalDecoding:
    """Prompt formatting, token counting and one compiled schema index per schema.

    A subclass sets ``tokenizer``, ``prompts``, ``_vocabulary`` (Outlines' vocabulary of that
    tokenizer) and an empty ``_indexes`` when it loads.
    """

    tokenizer: Any
    prompts: PromptFormatter
    _vocabulary: Any
    _indexes: dict[str, JsonSchemaIndex]

    def format_prompt(self, messages: Sequence[Message]) -> str:
        """Apply the chat template (with the generation prompt) or the plain format."""
        return self.prompts.format(messages)

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        """Prompt lengths in tokens, as ``generate`` will encode them."""
        return [len(ids) for ids in self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]

    def _index(self, schema: dict[str, Any]) -> JsonSchemaIndex:
        """The schema's index over this model's vocabulary, built once per schema (building
        it, vocabulary x regex, is the costly part)."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._indexes:
            self._indexes[key] = JsonSchemaIndex(self._vocabulary, schema)
        return self._indexes[key]
