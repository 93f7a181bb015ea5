"""Conversation records: ``messages`` in the OpenAI chat format, validated, rendered for a
judge as data, and cut to a judge's context by a stated rule.

A message has a ``role`` (``system``, ``user``, ``assistant`` or ``tool``) and ``content``
(a string, or None for an assistant turn that only calls tools); an assistant turn may carry
``tool_calls`` (``{"id", "type": "function", "function": {"name", "arguments"}}``, the
arguments a JSON string), a tool result its ``tool_call_id`` and the tool's ``name``.

The judge reads a conversation as tagged blocks, one a turn (``<turn index="2" role="tool"
name="search">``), each tool call its own ``<call name="...">`` block, every text
(content, names, arguments) through the same neutraliser as the rest of the record.

The cut (:func:`cut_turns`) keeps the system prompt, the first user turn and the most recent
turns, and puts one ``[… N turns cut …]`` turn in place of the middle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, field_validator

Scope = Literal["last_turn", "conversation"]
#: The tags a rendered conversation uses, neutralised in the text it holds.
CONVERSATION_TAGS = ("conversation", "turn", "call")
#: The text of the turn put in place of the turns a cut removes.
CUT_MARK = "[… {n} turns cut …]"
#: A surrogate code point: a string holding one is not Unicode text (no UTF-8 writes it).
_SURROGATE = re.compile("[\ud800-\udfff]")


def not_unicode(text: str) -> str | None:
    """Say why ``text`` is not valid Unicode (a lone surrogate, e.g. from a JSON escape
    ``\\ud800``), or None: such a string cannot be hashed, written to a file or tokenized."""
    found = None if text.isascii() else _SURROGATE.search(text)
    if found is None:
        return None
    return f"not valid Unicode: an unpaired surrogate {found.group()!r} at character {found.start()}"


class FunctionCall(BaseModel):
    """The function an assistant turn calls: its name and its arguments as a JSON string."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments(cls, value: Any) -> Any:
        if isinstance(value, dict):  # some tools save the decoded object: keep it as JSON text
            return json.dumps(value, ensure_ascii=False)
        if value is None:
            return "{}"
        if isinstance(value, str):
            try:
                json.loads(value)
            except ValueError:
                raise ValueError("not valid JSON") from None
        return value


class ToolCall(BaseModel):
    """One tool call of an assistant turn."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: Any) -> Any:
        return "function" if value is None else value


class ChatMessage(BaseModel):
    """One message of a conversation, in the OpenAI chat format."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    """An assistant turn's tool calls."""
    tool_call_id: str | None = None
    """A tool result: the id of the call it answers."""
    name: str | None = None
    """A tool result: the tool's name."""

    _cut: int = PrivateAttr(default=0)
    """Not a message: the mark that stands for this many turns a cut removed."""


def parse_messages(value: Any) -> list[ChatMessage]:
    """Validate a record's ``messages``.

    Raises:
        ValueError: ``"messages[2].tool_calls[0].function.arguments: not valid JSON"``: the
            first problem, its place named as a path from ``messages``.
    """
    if not isinstance(value, list | tuple):
        raise ValueError(f"messages: must be a list of messages, got {type(value).__name__}")
    if not value:
        raise ValueError("messages: must hold at least one message")
    out = []
    for i, item in enumerate(value):
        if hasattr(item, "model_dump") and not isinstance(item, ChatMessage):
            item = item.model_dump()
        try:
            out.append(ChatMessage.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
            msg = first["msg"].removeprefix("Value error, ")
            raise ValueError(f"messages[{i}]{where}: {msg}") from None
        if out[-1].role == "tool" and out[-1].content is None:
            raise ValueError(f"messages[{i}].content: a tool result needs its content")
    check_unicode(out)
    return out


def check_unicode(messages: Sequence[ChatMessage]) -> None:
    """Raise unless every text of the turns (:func:`turn_texts`) is valid Unicode.

    Raises:
        ValueError: ``"messages[2].tool_calls[0].id: not valid Unicode: ..."``: the first text
            that is not, its place named as a path from ``messages``.
    """
    for i, m in enumerate(messages):
        for path, text in _texts_of(m):
            if (why := not_unicode(text)) is not None:
                raise ValueError(f"messages[{i}].{path}: {why}")


def parse_reference_calls(value: Any) -> list[FunctionCall]:
    """Validate a record's ``reference_tool_calls``: the calls an agent is expected to make,
    each ``{"name", "arguments"}`` (the arguments a JSON object, or a JSON string of one), a
    RAGAS ``ToolCall`` (``name`` and ``args``, as an object or a mapping) or an OpenAI tool
    call (``{"type": "function", "function": {...}}``).

    Raises:
        ValueError: ``"reference_tool_calls[1].name: missing"``: the first problem, its place
            named as a path from ``reference_tool_calls``.
    """
    where = "reference_tool_calls"
    if not isinstance(value, list | tuple):
        raise ValueError(f"{where}: must be a list of calls ({{name, arguments}}), got {type(value).__name__}")
    calls = []
    for i, item in enumerate(value):
        if hasattr(item, "model_dump"):
            item = item.model_dump()
        if isinstance(item, Mapping) and isinstance(item.get("function"), Mapping):
            item = item["function"]
        if not isinstance(item, Mapping):
            raise ValueError(f"{where}[{i}]: must be an object with name and arguments, got {type(item).__name__}")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}[{i}].name: missing" if name is None else f"{where}[{i}].name: not a name")
        arguments = item.get("arguments", item.get("args"))
        if arguments is not None and not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}[{i}].arguments: not JSON ({exc})") from None
        try:
            calls.append(FunctionCall(name=name, arguments=arguments))
        except ValidationError:
            raise ValueError(f"{where}[{i}].arguments: not valid JSON") from None
    check_calls_unicode(calls)
    return calls


def check_calls_unicode(calls: Sequence[FunctionCall]) -> None:
    """Raise unless every reference call's name and arguments are valid Unicode.

    Raises:
        ValueError: ``"reference_tool_calls[1].arguments: not valid Unicode: ..."``.
    """
    for i, call in enumerate(calls):
        for field, text in (("name", call.name), ("arguments", call.arguments)):
            if (why := not_unicode(text)) is not None:
                raise ValueError(f"reference_tool_calls[{i}].{field}: {why}")


def tool_calls_made(messages: Sequence[ChatMessage]) -> list[FunctionCall]:
    """Every tool call of the conversation's assistant turns, in the order they were made."""
    return [call.function for m in messages if m.role == "assistant" for call in m.tool_calls or ()]


def tool_results(messages: Sequence[ChatMessage]) -> list[str]:
    """The conversation's tool results, each as ``name {arguments} returned:`` and its content
    (the call found by ``tool_call_id``; the tool's ``name`` alone, or nothing, without one)."""
    calls = {c.id: c.function for m in messages for c in m.tool_calls or () if c.id is not None}
    out = []
    for m in messages:
        if m.role != "tool" or m.content is None:
            continue
        call = calls.get(m.tool_call_id) if m.tool_call_id is not None else None
        if call is not None:
            out.append(f"{call.name} {call.arguments} returned:\n{m.content}")
        elif m.name:
            out.append(f"{m.name} returned:\n{m.content}")
        else:
            out.append(m.content)
    return out


def from_ragas_turns(turns: Sequence[Any]) -> list[dict[str, Any]]:
    """Turn a RAGAS ``MultiTurnSample``'s ``user_input`` (``HumanMessage``, ``AIMessage``,
    ``ToolMessage``: ``.type`` and ``.content``, ``AIMessage.tool_calls`` of ``.name`` and
    ``.args``) into chat messages; mappings with a ``role`` are taken as they are."""
    roles = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
    out: list[dict[str, Any]] = []
    for turn in turns:
        if isinstance(turn, dict):
            out.append(turn)
            continue
        kind = getattr(turn, "type", None) or getattr(turn, "role", None)
        message: dict[str, Any] = {"role": roles.get(str(kind), kind), "content": getattr(turn, "content", None)}
        calls = getattr(turn, "tool_calls", None)
        if calls:
            message["tool_calls"] = [
                {"type": "function", "function": {"name": c.name, "arguments": json.dumps(c.args, default=str)}}
                for c in calls
            ]
        out.append(message)
    return out


def last_turn_split(messages: Sequence[ChatMessage]) -> tuple[list[ChatMessage], ChatMessage] | None:
    """The turns before the last assistant turn with text, and that turn; None without one."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant" and messages[i].content:
            return list(messages[:i]), messages[i]
    return None


def last_response(messages: Sequence[ChatMessage]) -> str | None:
    """The text of the last assistant turn with text, the response of a conversation; None without one."""
    split = last_turn_split(messages)
    return None if split is None else split[1].content


def cut_turns(messages: Sequence[ChatMessage], keep_recent: int) -> tuple[list[ChatMessage], int]:
    """Keep the system prompt(s) at the start, the first user turn and the ``keep_recent``
    most recent turns; put one user turn saying ``[… N turns cut …]`` in place of the N turns
    between them (rendered as a bare line, not a turn). Returns the turns and N (0: nothing
    cut, the turns as given)."""
    head = 0
    while head < len(messages) and messages[head].role == "system":
        head += 1
    first_user = next((i for i in range(head, len(messages)) if messages[i].role == "user"), None)
    if first_user is not None:
        head = first_user + 1
    start = max(head, len(messages) - max(keep_recent, 0))
    n = start - head
    if n <= 0:
        return list(messages), 0
    mark = ChatMessage(role="user", content=CUT_MARK.format(n=n))
    mark._cut = n
    return [*messages[:head], mark, *messages[start:]], n


def turn_texts(messages: Sequence[ChatMessage]) -> list[str]:
    """Every text of the turns that reaches a prompt: contents, names, ids and arguments."""
    return [text for m in messages for _, text in _texts_of(m)]


def _texts_of(message: ChatMessage) -> list[tuple[str, str]]:
    """Every non-empty text of one turn that reaches a prompt or a hash, with its path in the turn."""
    texts = [("content", message.content), ("name", message.name), ("tool_call_id", message.tool_call_id)]
    for j, call in enumerate(message.tool_calls or ()):
        texts += [
            (f"tool_calls[{j}].function.name", call.function.name),
            (f"tool_calls[{j}].function.arguments", call.function.arguments),
            (f"tool_calls[{j}].id", call.id),
        ]
    return [(path, text) for path, text in texts if text]
