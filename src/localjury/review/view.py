"""What the page shows of a record: its texts cut to a readable length, each quote of the judges'
evidence marked where it stands, and every text rendered inert (escaped, with the characters that
reorder or hide text shown as what they are)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from markupsafe import Markup, escape

from localjury.results.show import spans

#: The characters of one text the page shows; the rest is counted, not sent.
SHOWN_CHARS = 20_000

#: Characters that reorder text (bidirectional overrides and isolates) or are invisible controls:
#: shown as their code point, so that what the page shows is what the record holds.
_HIDDEN = re.compile("[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def inert(text: Any) -> Markup:
    """A text as HTML that only shows it: escaped, its hidden characters made visible."""
    escaped = str(escape("" if text is None else str(text)))
    return Markup(_HIDDEN.sub(lambda m: f'<span class="ctl">U+{ord(m.group()):04X}</span>', escaped))


@dataclass(frozen=True)
class Shown:
    """One text of a record as shown: its parts (text, quoted or not) and what was left out."""

    name: str
    parts: list[tuple[str, bool]]
    hidden: int
    """Characters past :data:`SHOWN_CHARS`, not shown."""


def shown(name: str, text: str, quotes: list[str]) -> Shown:
    """``text`` cut to :data:`SHOWN_CHARS`, each occurrence of a quote marked."""
    cut = text[:SHOWN_CHARS]
    parts: list[tuple[str, bool]] = []
    at = 0
    for start, end in spans(cut, [SimpleNamespace(text=q) for q in quotes]):  # type: ignore[misc]
        parts += [(cut[at:start], False), (cut[start:end], True)]
        at = end
    parts.append((cut[at:], False))
    return Shown(name, [p for p in parts if p[0]], len(text) - len(cut))


def quotes_by_field(models: list[dict[str, Any]], row: dict[str, Any]) -> dict[str, list[str]]:
    """Every quote of every judge's evidence (statements' too), by the field it quotes."""
    found: dict[str, list[str]] = {}

    def add(evidence: Any) -> None:
        for sample in evidence or []:
            for q in sample or []:
                if isinstance(q, dict) and isinstance(q.get("text"), str):
                    found.setdefault(str(q.get("field")), []).append(q["text"])

    for m in models:
        add(m.get("evidence"))
    for statement in row.get("statements") or []:
        for m in statement.get("models") or []:
            add(m.get("evidence"))
    return found


def record_texts(record: dict[str, Any], quotes: dict[str, list[str]]) -> dict[str, Any]:
    """A record's parts as the page lays them out: the input, the response, the reference, the
    pair, the contexts (numbered) and the conversation's turns (role, text, tool calls), each
    text with its quotes marked."""
    conversation = [q for field, qs in quotes.items() if field.startswith("conversation[") for q in qs]
    out: dict[str, Any] = {}
    for name in ("user_input", "response", "response_a", "response_b", "reference"):
        if isinstance(record.get(name), str):
            out[name] = shown(name, record[name], quotes.get(name, []))
    contexts = record.get("retrieved_contexts") or []
    out["contexts"] = [
        shown(f"retrieved_contexts[{i}]", str(c), quotes.get(f"retrieved_contexts[{i}]", []))
        for i, c in enumerate(contexts)
    ]
    turns = []
    for i, turn in enumerate(record.get("messages") or []):
        if not isinstance(turn, dict):
            continue
        content = turn["content"] if isinstance(turn.get("content"), str) else ""
        mine = [q for q in conversation if q in content] + quotes.get(f"messages[{i}]", [])
        if turn.get("role") == "assistant" and i == len(record["messages"]) - 1 and "response" not in record:
            mine += quotes.get("response", [])
        calls = [
            f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments', '')})"
            for c in turn.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        turns.append({"role": str(turn.get("role")), "text": shown(f"messages[{i}]", content, mine), "calls": calls,
                      "tool": turn.get("name")})  # fmt: skip
    out["turns"] = turns
    return out
