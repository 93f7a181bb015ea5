"""Evidence quoted verbatim, by construction: a metric's JSON schema, with its quote arrays
(marked :data:`~localjury.types.QUOTE_KEY`) bound to one prompt's quotable texts, written as
an llguidance Lark grammar.

Each quote is a JSON string whose body can only be a run of consecutive chunks of one
quotable text as JSON writes it (llguidance's ``substring_chunks`` lexeme, a suffix automaton
over the chunks): the judge cannot write a year, a name or a phrase the record does not hold.
The chunks are words, single characters and whole escape sequences of the JSON-escaped text,
so a quote starts and ends at a word or punctuation boundary and never inside ``\\"`` or
``\\n``; parsed back with ``json.loads`` it is an exact substring of the text. Everything else
in the schema is compiled as JSON by llguidance (``%json``), with the separators ``", "`` and
``": "`` the prompts' examples are written with. Pure string work: no model, no llguidance
import; the engines hand the grammar to llguidance (:mod:`~localjury.engines.constrain.grammars`) or
to vLLM's ``guidance`` backend.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from localjury.errors import ConfigError
from localjury.types import QUOTE_KEY

#: Scripts written without spaces between words (Thai, Lao, Khmer, Myanmar, CJK, kana, Hangul):
#: each character is a chunk of its own, so that a quote can start and end inside a clause.
_UNSPACED = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
#: One chunk of a JSON-escaped text: an escape sequence, a character of an unspaced script, a
#: word, or any other single character.
_CHUNK = re.compile(rf"\\u[0-9a-fA-F]{{4}}|\\.|[{_UNSPACED}]|[^\W{_UNSPACED}]+|.", re.DOTALL)
#: A quote's length bound when its schema gives none (characters as JSON writes them).
DEFAULT_QUOTE_CHARS = 200
#: The most characters (as JSON writes them) of one prompt's quotable texts a grammar offers,
#: all texts together, in order; quotes cannot come from what lies past it. llguidance 1.7 refuses
#: a grammar whose quote lexemes hold 200,000 one-character chunks, or 400,000 characters of words
#: ("initial lexer configuration (grammar) too big"), and compiles one of 100,000 characters in
#: about 0.1 s with SmolLM2's tokenizer: no record's text can make it fail to compile.
QUOTE_SOURCE_CHARS = 100_000
#: A word chunk: the only kind that can be cut into pieces (an escape sequence cannot).
_WORD = re.compile(rf"[^\W{_UNSPACED}]+")


def has_quotes(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` marks an array (anywhere in it) as quotes of the prompt's texts."""
    return QUOTE_KEY in json.dumps(schema)


def chunks(text: str) -> list[str]:
    """The chunks a quote of ``text`` is made of, in order: ``text`` as a JSON string body
    (without its quotes) cut into escape sequences, words and single characters (every
    character of a script written without spaces)."""
    return _CHUNK.findall(json.dumps(text, ensure_ascii=False)[1:-1])


def quotable_chunks(sources: Sequence[str], bound: int, budget: int | None = None) -> Iterator[list[str]]:
    """Each source's chunks that quotes of at most ``bound`` characters are made of, in order;
    a source that offers none is left out.

    A word longer than ``bound`` is cut into pieces of ``bound`` characters (its last shorter):
    it can still be quoted, by its prefix or by any one piece, and a quote is still an exact
    span. A source whose every chunk is longer than ``bound`` (escape sequences, under a bound
    of a few characters) offers nothing: a quote may open only where some span can fill it.
    All sources together offer at most ``budget`` characters (:data:`QUOTE_SOURCE_CHARS` unless
    given): the source the budget ends in is cut after its last whole chunk, and those after it
    offer nothing.
    """
    left = QUOTE_SOURCE_CHARS if budget is None else budget
    for text in sources:
        if bound < 1 or left < 1:
            return
        # A chunk's JSON is at least as long as its text: the first left + 1 characters hold
        # every chunk the budget can take, and the chunk cut at their end is never taken.
        pieces: list[str] = []
        for chunk in chunks(text[: left + 1]):
            if len(chunk) > bound and _WORD.fullmatch(chunk):
                pieces += [chunk[i : i + bound] for i in range(0, len(chunk), bound)]
            else:
                pieces.append(chunk)
        kept = 0
        while kept < len(pieces) and len(pieces[kept]) <= left:
            left -= len(pieces[kept])
            kept += 1
        if any(len(piece) <= bound for piece in pieces[:kept]):
            yield pieces[:kept]
        if kept < len(pieces):
            return


def quote_grammar(schema: dict[str, Any], sources: Sequence[str]) -> str:
    """The Lark grammar (llguidance's dialect) of ``schema`` whose quote arrays may hold only
    spans of ``sources``; a quote array is empty when no source offers a span
    (:func:`quotable_chunks`: empty sources, and what lies past :data:`QUOTE_SOURCE_CHARS`,
    offer none).

    Objects whose properties are all required, and arrays, are written by the grammar itself,
    with the separators ``", "`` and ``": "`` (an object's properties in the schema's order);
    any other value is llguidance's JSON of its sub-schema. Without quote arrays it is the schema's grammar with
    those separators (vLLM's guidance backend takes it for every schema).

    Raises:
        ConfigError: A part of the schema this cannot follow (a ``$ref`` outside ``$defs``,
            quotes that are not an array of strings, a quote array inside a union).
    """
    return _Grammar(schema, [s for s in sources if s]).lark()


class _Grammar:
    def __init__(self, schema: dict[str, Any], sources: list[str]) -> None:
        self.schema = schema
        self.defs: dict[str, Any] = schema.get("$defs", {})
        self.sources = sources
        self.rules: list[str] = []
        self.terminals: list[str] = []
        self.spans: dict[int, str] = {}  # quote length bound -> its terminals, one per source

    def lark(self) -> str:
        start = self.value(self.schema)
        return "\n".join([f"start: {start}", *self.rules, *self.terminals]) + "\n"

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/$defs/") or ref[len("#/$defs/") :] not in self.defs:
                raise ConfigError(f"quote grammar: cannot follow $ref {ref!r}")
            node = {**self.defs[ref[len("#/$defs/") :]], **{k: v for k, v in node.items() if k != "$ref"}}
        return node

    def rule(self, body: str) -> str:
        name = f"r{len(self.rules)}"
        self.rules.append(f"{name}: {body}")
        return name

    def value(self, node: dict[str, Any]) -> str:
        node = self.resolve(node)
        if node.get(QUOTE_KEY):
            return self.quotes(node)
        properties = node.get("properties") or {}
        if node.get("type") == "object" and properties and set(properties) <= set(node.get("required", ())):
            parts = []
            for i, (key, sub) in enumerate(node["properties"].items()):
                lead = ("{" if i == 0 else ", ") + json.dumps(key) + ": "
                parts.append(f"{json.dumps(lead)} {self.value(sub)}")
            return self.rule(" ".join(parts) + ' "}"')
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            return self.array(self.value(node["items"]), node)
        whole = self.inline(node)
        if has_quotes(whole):
            raise ConfigError("quote grammar: quotes must be an array of strings, inside objects and arrays only")
        return self.rule("%json " + json.dumps(whole))

    def inline(self, node: dict[str, Any]) -> dict[str, Any]:
        """A sub-schema with every $ref replaced by its definition (llguidance's ``%json``
        sees the sub-schema alone, not the root's ``$defs``)."""
        node = self.resolve(node)
        out: dict[str, Any] = {}
        for key, val in node.items():
            if isinstance(val, dict):
                out[key] = self.inline(val) if key != "properties" else {k: self.inline(v) for k, v in val.items()}
            elif isinstance(val, list) and key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                out[key] = [self.inline(v) for v in val]
            else:
                out[key] = val
        return out

    def array(self, item: str, node: dict[str, Any]) -> str:
        low = int(node.get("minItems", 0))
        high = node.get("maxItems")
        if high is not None and int(high) == 0:
            return self.rule('"[]"')
        if high is None:
            more = f' ("," " " {item})*'
        elif int(high) == 1:
            more = ""
        else:
            more = f' ("," " " {item}){{{max(low - 1, 0)},{int(high) - 1}}}'
        if low >= 1:
            return self.rule(f'"[" {item}{more} "]"')
        return self.rule(f'"[" ({item}{more})? "]"')

    def quotes(self, node: dict[str, Any]) -> str:
        items = self.resolve(node.get("items") or {})
        if node.get("type") != "array" or items.get("type") != "string":
            raise ConfigError(f"quote grammar: {QUOTE_KEY} marks an array of strings, got {node!r}")
        bound = int(items.get("maxLength", DEFAULT_QUOTE_CHARS))
        if bound not in self.spans:
            names = []
            for parts in quotable_chunks(self.sources, bound):
                names.append(f"Q{len(self.terminals)}")
                lexeme = json.dumps({"substring_chunks": parts}, ensure_ascii=False)
                self.terminals.append(f"{names[-1]}: %regex {lexeme} & /(.|\\n){{1,{bound}}}/")
            self.spans[bound] = " | ".join(names)
        if not self.spans[bound]:  # nothing a quote could hold: no quote may open
            return self.rule('"[]"')
        quote = self.rule(f'"\\"" ({self.spans[bound]}) "\\""')
        return self.array(quote, node)
