"""The span conventions a trace may follow, each read into a :class:`~.spans.View`:

- **OpenInference** (Phoenix, Arize, the ``openinference-instrumentation-*`` packages):
  ``openinference.span.kind``, ``llm.input_messages.<i>.message.*`` and ``llm.output_messages.*``
  (roles, contents, tool calls), ``retrieval.documents.<i>.document.content``,
  ``input.value``/``output.value``.
- **GenAI** (the OpenTelemetry semantic conventions, OpenLLMetry): ``gen_ai.operation.name``;
  messages in the current form (``gen_ai.input.messages``/``gen_ai.output.messages``/
  ``gen_ai.system_instructions``, JSON with typed parts) or the older ones
  (``gen_ai.prompt.<i>.*``/``gen_ai.completion.<i>.*`` attributes; span events
  ``gen_ai.content.prompt``/``gen_ai.content.completion``, or ``gen_ai.<role>.message`` and
  ``gen_ai.choice`` events with their ``content``).
- **MLflow** (its tracing, in an MLflow trace's JSON or exported over OTLP): ``mlflow.spanType``,
  ``mlflow.spanInputs`` and ``mlflow.spanOutputs``, each JSON text; an ``LLM`` or ``CHAT_MODEL``
  span's inputs and outputs read as chat messages (an OpenAI request and its completion), a
  ``RETRIEVER`` span's outputs (MLflow ``Document`` objects) as documents.
"""

from __future__ import annotations

import json
from typing import Any

from localjury.records.traces.payloads import chat_messages, documents, json_text, message, text_or_none, tool_call
from localjury.records.traces.spans import Span, View, kind_of

_LLM_OPERATIONS = {"chat", "text_completion", "generate_content", "completion"}


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.<i>.rest`` attributes as a list of ``{rest: value}``, by index."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix):
            index, _, rest = key[len(prefix) :].partition(".")
            if index.isdigit() and rest:
                items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


def _openinference_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    messages = []
    for m in _indexed(attrs, prefix):
        content = m.get("message.content")
        if content is None:
            texts = [
                str(p["message_content.text"]) for p in _indexed(m, "message.contents.") if "message_content.text" in p
            ]
            content = "\n".join(texts) if texts else None
        calls = [
            tool_call(c.get("tool_call.id"), c.get("tool_call.function.name"), c.get("tool_call.function.arguments"))
            for c in _indexed(m, "message.tool_calls.")
        ]
        messages.append(message(m.get("message.role"), content, calls, m.get("message.tool_call_id")))
    return messages


def _openinference(attrs: dict[str, Any]) -> View:
    view = View(kind=kind_of(attrs.get("openinference.span.kind")))
    view.messages_in = _openinference_messages(attrs, "llm.input_messages.")
    view.messages_out = _openinference_messages(attrs, "llm.output_messages.")
    view.text_in, view.text_out = attrs.get("input.value"), attrs.get("output.value")
    view.documents = [
        str(d["document.content"]) for d in _indexed(attrs, "retrieval.documents.") if "document.content" in d
    ]
    return view


def _parts_messages(raw: Any, role: str | None = None) -> list[dict[str, Any]]:
    """GenAI's current form: a JSON list of messages, each a role and typed parts (text,
    tool_call, tool_call_response); ``gen_ai.system_instructions`` is a list of parts."""
    items = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise ValueError("messages are not a JSON list")
    if role is not None:
        items = [{"role": role, "parts": items}]
    messages = []
    for m in items:
        texts, calls, answered = [], [], None
        for part in m.get("parts") or []:
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "tool_call":
                calls.append(tool_call(part.get("id"), part.get("name"), part.get("arguments")))
            elif kind == "tool_call_response":
                answered = part.get("id")
                texts.append(json_text(part.get("response", part.get("result", ""))))
        msg_role = "tool" if answered is not None else m.get("role")
        messages.append(message(msg_role, "\n".join(texts) if texts else None, calls, answered))
    return messages


def _flat_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """GenAI's older form (OpenLLMetry): ``gen_ai.prompt.<i>.role``/``.content``/``.tool_calls.<j>.*``."""
    messages = []
    for m in _indexed(attrs, prefix):
        calls = [tool_call(c.get("id"), c.get("name"), c.get("arguments")) for c in _indexed(m, "tool_calls.")]
        messages.append(message(m.get("role", "assistant"), m.get("content"), calls, m.get("tool_call_id")))
    return messages


def _event_messages(events: list[tuple[str, dict[str, Any]]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """GenAI's span-event forms: ``gen_ai.content.prompt``/``gen_ai.content.completion`` events
    holding the messages as JSON (``gen_ai.prompt``/``gen_ai.completion``), or one event a
    message (``gen_ai.<role>.message``, ``gen_ai.choice``) with its ``content``."""
    messages_in: list[dict[str, Any]] = []
    messages_out: list[dict[str, Any]] = []
    for name, attrs in events:
        if name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
            raw = attrs.get("gen_ai.prompt" if name.endswith("prompt") else "gen_ai.completion", "[]")
            items = json.loads(raw) if isinstance(raw, str) else raw
            target = messages_in if name.endswith("prompt") else messages_out
            target += chat_messages(items if isinstance(items, list) else [], "assistant")
        elif (name.startswith("gen_ai.") and name.endswith(".message")) or name == "gen_ai.choice":
            role = "assistant" if name == "gen_ai.choice" else name.removeprefix("gen_ai.").removesuffix(".message")
            one = message(attrs.get("role", role), text_or_none(attrs.get("content")), [], attrs.get("id"))
            (messages_out if name == "gen_ai.choice" else messages_in).append(one)
    return messages_in, messages_out


def _genai(attrs: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> View:
    operation = str(attrs.get("gen_ai.operation.name", ""))
    llm = operation in _LLM_OPERATIONS or any(k.startswith(("gen_ai.prompt.", "gen_ai.input.messages")) for k in attrs)
    view = View(
        kind="llm" if llm else "tool" if operation == "execute_tool" else "agent" if "agent" in operation else "other"
    )
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        if "gen_ai.system_instructions" in attrs:
            view.messages_in += _parts_messages(attrs["gen_ai.system_instructions"], role="system")
        view.messages_in += _parts_messages(attrs.get("gen_ai.input.messages", "[]"))
        view.messages_out = _parts_messages(attrs.get("gen_ai.output.messages", "[]"))
    elif any(k.startswith("gen_ai.prompt.") for k in attrs):
        view.messages_in = _flat_messages(attrs, "gen_ai.prompt.")
        view.messages_out = _flat_messages(attrs, "gen_ai.completion.")
    else:
        view.messages_in, view.messages_out = _event_messages(events)
        view.kind = "llm" if view.messages_out and view.kind == "other" else view.kind
    if view.kind == "tool":
        view.text_in, view.text_out = attrs.get("gen_ai.tool.call.arguments"), attrs.get("gen_ai.tool.call.result")
    return view


def _json_value(value: Any) -> Any:
    """An attribute MLflow writes as JSON text, read back (text that is not JSON as it is)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _mlflow(attrs: dict[str, Any]) -> View:
    span_type = _json_value(attrs["mlflow.spanType"])
    kind = kind_of("llm" if span_type == "CHAT_MODEL" else span_type)
    value_in, value_out = _json_value(attrs.get("mlflow.spanInputs")), _json_value(attrs.get("mlflow.spanOutputs"))
    view = View(kind=kind, text_in=text_or_none(value_in), text_out=text_or_none(value_out))
    if kind == "llm":
        view.messages_in, view.messages_out = chat_messages(value_in, "user"), chat_messages(value_out, "assistant")
    elif kind == "retriever":
        view.documents = documents(value_out)
    return view


def view_of(span: Span) -> View | None:
    """The span through its convention; None when it follows none."""
    attrs = span.attributes
    if "openinference.span.kind" in attrs:
        return _openinference(attrs)
    if "mlflow.spanType" in attrs:
        return _mlflow(attrs)
    if any(k.startswith("gen_ai.") for k in attrs):
        return _genai(attrs, span.events)
    return None
