"""The server engine (:mod:`~localjury.engines.server.server`): judge through an
OpenAI-compatible server's chat completions; its HTTP client (:mod:`~localjury.engines.server.client`,
over :mod:`~localjury.engines.server.transport`) and what its answers mean
(:mod:`~localjury.engines.server.answers`). Here, its facts alone: no model files, no hidden
states, thinking left to the server, and no quoted evidence."""

from __future__ import annotations

from localjury.engines._facts import EngineFacts, Entry
from localjury.models._engine_settings import ServerSettings


def _quotes_refusal(spec: Entry | None) -> str:
    return (
        "quoted evidence is not available on the server engine: an OpenAI-compatible server takes one JSON "
        "schema per request, not a grammar over each record's own text, so its quotes could not be held to "
        "the record; judge this model without --evidence, or run it on transformers, llamacpp or vllm"
    )


FACTS = EngineFacts(
    name="server",
    cls="ServerEngine",
    install="pip install localjury  (its HTTP client, httpx2, is a core dependency)",
    loads=None,
    settings=ServerSettings,
    thinking=False,  # the server thinks its own way, in the budget's tokens added to max_tokens
    quotes_refusal=_quotes_refusal,
)
