"""What the engines with a decode loop of their own share (transformers, llama.cpp): prompts
formatted and counted by a Hugging Face tokenizer, outputs constrained by Outlines' guides."""

from __future__ import annotations

import json
from typing import Any

from localjury.engines._outlines import JsonSchemaIndex
from localjury.engines.base import BatchEngine


class LocalDecoding(BatchEngine):
    """One compiled schema index per schema, beside :class:`BatchEngine`'s prompt formatting
    and token counting.

    A subclass sets ``tokenizer``, ``prompts``, ``_vocabulary`` (Outlines' vocabulary of that
    tokenizer) and an empty ``_indexes`` when it loads.
    """

    _vocabulary: Any
    _indexes: dict[str, JsonSchemaIndex]

    def _index(self, schema: dict[str, Any]) -> JsonSchemaIndex:
        """The schema's index over this model's vocabulary, built once per schema (building
        it, vocabulary x regex, is the costly part)."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._indexes:
            self._indexes[key] = JsonSchemaIndex(self._vocabulary, schema)
        return self._indexes[key]
