"""A model's tokenizer alone: its prompts formatted and counted without loading its weights."""

from __future__ import annotations

import os

# Loading from local folders only: make the Hugging Face libraries fail instead of calling out.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from localjury.engines.base import PromptFormatter, PromptTokens, load_tokenizer
from localjury.errors import EngineError
from localjury.models.registry import ModelSpec


class TokenizerOnly(PromptTokens):
    """The Hugging Face tokenizer every engine formats and counts a model's prompts with (the
    model's folder, or the one converted beside its GGUF file), loaded alone.

    Raises:
        EngineError: The tokenizer cannot be loaded.
    """

    def __init__(self, spec: ModelSpec, engine: str) -> None:
        self.spec = spec
        folder = spec.tokenizer_dir()
        try:
            self.tokenizer = load_tokenizer(folder, trust_remote_code=spec.trust_remote_code)
        except Exception as exc:
            raise EngineError(
                f"cannot load the tokenizer from {folder}: {exc}", engine=engine, model=spec.name
            ) from exc
        self.prompts = PromptFormatter(self.tokenizer, spec)

    def close(self) -> None:
        """Drop the tokenizer."""
        del self.tokenizer
