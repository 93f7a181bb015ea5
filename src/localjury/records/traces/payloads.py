"""A record's message parts, and what sources log as a span's input and output values (Langfuse
observations, MLflow spans, GenAI's JSON events) read as them: chat messages in OpenAI's shape
(a list of messages, ``{"messages": [...]}``, one message, or a completion whose first choice
holds it) and retrieved documents."""

from __future__ import annotations

import json
from typing import Any


def json_text(value: Any) -> str:
    """A value as a message's text: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def text_or_none(value: Any) -> str | None:
    """:func:`json_text`, None kept as None."""
    return None if value is None else json_text(value)


#: Roles some conventions write for the four a record knows.
_ROLES = {"developer": "system", "model": "assistant", "function": "tool", "human": "user", "ai": "assistant"}


def tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """A message's tool call (OpenAI's chat shape), its arguments as JSON text."""
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": str(name or ""), "arguments": json_text(arguments or {})},
    }
    if call_id:
        call["id"] = str(call_id)
    return call


def message(
    role: Any, content: str | None, tool_calls: list[dict[str, Any]], tool_call_id: Any = None
) -> dict[str, Any]:
    """A record's message (OpenAI's chat shape) from a span's parts."""
    role = _ROLES.get(str(role), str(role))
    out: dict[str, Any] = {"role": role, "content": content}
    if tool_calls:
        out["tool_calls"] = tool_calls
    if tool_call_id:
        out["tool_call_id"] = str(tool_call_id)
    return out


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
