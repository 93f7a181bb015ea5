"""What sources log as a span's input and output values (Langfuse observations, MLflow spans,
GenAI's JSON events), read as a record's parts: chat messages in OpenAI's shape (a list of
messages, ``{"messages": [...]}``, one message, or a completion whose first choice holds it) and
retrieved documents."""

from __future__ import annotations

from typing import Any

from localjury.records.traces.spans import json_text, message, text_or_none, tool_call

#: The keys a document's text may be under (LangChain's, LlamaIndex's, MLflow's Document).
_DOCUMENT_TEXT = ("page_content", "content", "text")
#: The types of a message's content parts that hold its text (chat completions', responses').
_TEXT_PARTS = ("text", "input_text", "output_text")


def _content(value: Any) -> str | None:
    """A message's content: a string, or OpenAI's list of parts (their texts joined)."""
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        texts = [
            str(p["text"]) for p in value if p.get("type") in ("text", "input_text", "output_text") and "text" in p
        ]
        if texts:
            return "\n".join(texts)
    return text_or_none(value)


def _calls(value: Any) -> list[dict[str, Any]]:
    functions = [(c.get("id"), c.get("function") or {}) for c in value or []]
    return [tool_call(call_id, f.get("name"), f.get("arguments")) for call_id, f in functions]


def chat_messages(value: Any, role: str) -> list[dict[str, Any]]:
    """An input or output value as chat messages (a message without a role takes ``role``); a
    value of another shape is one message of ``role`` holding its text (None: no message)."""
    if isinstance(value, dict) and "choices" in value:
        value = (value["choices"] or [{}])[0].get("message")
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, dict) and "role" in value:
        value = [value]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(m, dict) for m in value)
        and any("role" in m for m in value)
    ):
        return [message(m.get("role", role), _content(m.get("content")), _calls(m.get("tool_calls")),
                        m.get("tool_call_id")) for m in value]  # fmt: skip
    return [] if value is None else [message(role, json_text(value), [])]


def documents(value: Any) -> list[str]:
    """A retriever's output as the documents' texts (strings, or objects with ``page_content``,
    ``content`` or ``text``; a list, or ``{"documents": [...]}``)."""
    items = value if isinstance(value, list) else value.get("documents", []) if isinstance(value, dict) else []
    texts = []
    for item in items:
        if isinstance(item, dict):
            item = next((item[k] for k in _DOCUMENT_TEXT if k in item), json_text(item))
        texts.append(json_text(item))
    return texts
