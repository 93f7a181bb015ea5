"""Record text is data: one neutraliser for every record-derived string that reaches a prompt
(a record's fields, the statements a model extracted from it, the answers of the worked
examples a prompt shows: labels' reasons and quotes).

A record (or a statement a model extracted from it) can hold strings that mean something
to the judge's prompt: localjury's own delimiter tags (``</response>``), the chat markers
of the judge's tokenizer (``<|im_end|>``, ``<start_of_turn>``, ``[INST]``), or the headings
of the plain prompt format (``### Judgment``). Left as they are, such a string closes the
record's block early or opens a fake turn. :class:`Neutraliser` finds them and breaks each
with a visible change to its first character (``<`` becomes ``‹``), so the judge still sees
what the record says, and no tokenizer turns it into a control token.

Matching is done on a *skeleton* of the text, so that look-alike variants are caught too:
invisible format and control characters are dropped (``<\u200b/response>``), compatibility
forms folded (fullwidth ``＜``), accents and combining marks removed, case folded, and the
Cyrillic and Greek letters that look like Latin ones mapped to them; whitespace may sit
between ``<``, ``/`` and a tag name (``< /response>``).

A conversation's turns are rendered here too (:func:`render_conversation`), each text through
the judge's neutraliser. The markers of a judge's tokenizer are read from its files
(:func:`localjury.models._tokenizer_files.tokenizer_markers`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import cache, cached_property
from typing import Any

from localjury.records.conversation import CONVERSATION_TAGS, CUT_MARK, ChatMessage

# ruff: noqa: RUF002 (the docstring shows look-alike characters on purpose)

#: Headings of the plain prompt format (base models without a chat template).
PLAIN_TASK = "### Task"
PLAIN_JUDGMENT = "### Judgment"

#: Tag names localjury's prompts use around record text (besides each program's input fields).
FRAME_TAGS = ("user_input", "response", "retrieved_contexts", "reference", "item", "context", "criterion", "statements")

#: Chat markers of the common model families, neutralised whatever the judge's tokenizer:
#: ChatML and Llama-3/Phi (``<|...|>``), DeepSeek (fullwidth bars fold to ``|``), Gemma,
#: Llama-2/Mistral, and the sentence markers of SentencePiece tokenizers.
GENERIC_MARKERS = (
    r"<\s*\|[^|<>\n]{1,64}\|\s*>",
    r"<\s*/?\s*(?:start_of_turn|end_of_turn|bos|eos|pad|unk|mask|s)\s*>",
    r"<<\s*/?\s*sys\s*>>",
    r"\[\s*/?\s*(?:inst|system_prompt|tool_calls|available_tools|tool_results)\s*\]",
    r"#\s*#\s*#\s*(?:task|judgment)",
)

#: What the first character of a match becomes: a look-alike that no normalisation folds back.
_BREAK = {"<": "\u2039", "[": "\u2045", "#": "\u266f", "{": "\u2983"}

#: Cyrillic and Greek letters that render like Latin ones (lower case; the skeleton is case-folded).
_CONFUSABLES = str.maketrans(
    "аеорсхуіјѕԁһӏԛԝɡαβεικνορτυχ",
    "aeopcxyijsdhlqwgabeiknoptux",
)


@cache
def _fold(char: str) -> str:
    """The skeleton of one character: '' for invisible ones, else its folded form."""
    category = unicodedata.category(char)
    if category in ("Cf", "Mn", "Me") or (category == "Cc" and not char.isspace()):
        return ""
    decomposed = unicodedata.normalize("NFKD", char)
    kept = "".join(c for c in decomposed if unicodedata.category(c) not in ("Mn", "Me"))
    return kept.casefold().translate(_CONFUSABLES)


_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def _skeleton(text: str) -> tuple[str, Sequence[int]]:
    """The folded text and, for each of its characters, the index of the original one."""
    if text.isascii():
        if not _ASCII_CONTROL.search(text):
            return text.lower(), range(len(text))
        cleaned = [(c.lower(), i) for i, c in enumerate(text) if c.isprintable() or c.isspace()]
        return "".join(c for c, _ in cleaned), [i for _, i in cleaned]
    chars: list[str] = []
    origin: list[int] = []
    for i, c in enumerate(text):
        for f in _fold(c):
            chars.append(f)
            origin.append(i)
    return "".join(chars), origin


#: The shape of most special tokens, on the skeleton.
_SHAPE = re.compile(r"<[^<>]{1,64}>|\[[^\[\]]{1,64}\]")


class Neutraliser:
    """Break every marker in record text that a judge could read as prompt structure.

    Args:
        tokens: Literal added tokens of the judge's tokenizer, special or not (see :func:`tokenizer_markers`).
        tags: Tag names the prompt uses, besides :data:`FRAME_TAGS`.
    """

    def __init__(self, tokens: Iterable[str] = (), tags: Iterable[str] = ()) -> None:
        self.tokens = tuple(sorted({t for t in tokens if _is_marker(t)}))
        self.tags = tuple(sorted({*FRAME_TAGS, *tags}))
        names = "|".join(re.escape(t.casefold()) for t in sorted(self.tags, key=len, reverse=True))
        tag = r"<\s*/?\s*(?:" + names + r")(?![a-z0-9_])"
        # Tokens shaped like <...> or [...] (nearly all; Gemma has thousands) are looked up in
        # a set; an alternation of thousands of literals would be slow on long texts.
        folded = {"".join(_fold(c) for c in t) for t in self.tokens}
        self._shaped = frozenset(t for t in folded if _SHAPE.fullmatch(t))
        odd = [re.escape(t) for t in sorted(folded - self._shaped, key=len, reverse=True) if t]
        self.pattern = re.compile("|".join([tag, *GENERIC_MARKERS, *odd]))
        self._with: dict[tuple[str, ...], Neutraliser] = {}

    def with_tags(self, tags: Iterable[str]) -> Neutraliser:
        """This neutraliser with more tag names (a program's own input fields)."""
        extra = tuple(sorted(set(tags) - set(self.tags)))
        if not extra:
            return self
        if extra not in self._with:
            self._with[extra] = Neutraliser(self.tokens, (*self.tags, *extra))
        return self._with[extra]

    def __call__(self, text: str) -> str:
        """Return ``text`` with every marker broken; text without one comes back unchanged."""
        if text.isascii() and not any(c in text for c in "<[#"):
            return text  # the common case: nothing that could be a marker
        while True:
            skeleton, origin = _skeleton(text)
            hits = {origin[m.start()] for m in self.pattern.finditer(skeleton)}
            # The skeleton drops invisible characters, so that one inside a tag's name does not
            # hide the tag; one right after it ("<response" + U+202E) ends the name as the judge
            # reads it: the text as written is searched too.
            lowered = text.lower()
            if len(lowered) == len(text):
                hits.update(m.start() for m in self.pattern.finditer(lowered))
            if self._shaped:
                hits.update(origin[m.start()] for m in _SHAPE.finditer(skeleton) if m.group() in self._shaped)
            starts = sorted(hits)
            if not starts:
                return text
            pieces: list[str] = []
            last = 0
            for i in starts:
                pieces.append(text[last:i])
                first = _fold(text[i])[:1]
                pieces.append(_BREAK[first] if first in _BREAK else text[i] + _BREAK["<"])
                last = i + 1
            pieces.append(text[last:])
            text = "".join(pieces)

    def json_value(self, value: Any) -> Any:
        """``value`` (a JSON value, such as a worked example's answer) with every string in it
        neutralised, at any depth; keys, numbers and the rest as they are. An example answer
        shown to the judge is record text too: a label's reason, a quote of a labeled record."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list | tuple):
            return [self.json_value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.json_value(v) for k, v in value.items()}
        return value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Neutraliser) and (self.tokens, self.tags) == (other.tokens, other.tags)

    def __hash__(self) -> int:
        return hash((self.tokens, self.tags))

    def __reduce__(self) -> tuple[object, ...]:
        return (Neutraliser, (self.tokens, self.tags))


class Marked:
    """A juror whose neutraliser is made from its tokenizer's markers
    (:func:`~localjury.models._tokenizer_files.tokenizer_markers`) when a prompt is first rendered for
    it: the run's :class:`~localjury.run.context.JuryModel` is one."""

    markers: tuple[str, ...]

    @cached_property
    def neutralise(self) -> Neutraliser:
        """What record text goes through before it reaches this model's prompts: localjury's
        tags, and its tokenizer's special tokens and chat markers."""
        return Neutraliser(self.markers)


def _is_marker(token: str) -> bool:
    """Whether an added token is a marker worth breaking: at least two characters with a
    bracket, bar or hash among them; not plain words or whitespace, which a record holds
    innocently."""
    stripped = token.strip()
    return len(stripped) >= 2 and any(c in "<>[]|{}#" for c in stripped)


#: The neutraliser for prompts whose judge is not known: localjury's tags and the generic markers.
DEFAULT = Neutraliser()


def render_conversation(messages: Sequence[ChatMessage], neutralise: Neutraliser) -> str:
    """The body of a ``<conversation>`` block: one ``<turn>`` block a message, its role,
    a tool result's tool name and call id as attributes, each tool call a ``<call>``
    block of its JSON arguments; every text neutralised (``neutralise``: the judge's)."""
    neutralise = neutralise.with_tags(CONVERSATION_TAGS)

    def attr(value: str) -> str:
        return json.dumps(neutralise(value), ensure_ascii=False)

    blocks = []
    index = 0
    for m in messages:
        if m._cut:
            index += m._cut
            blocks.append(CUT_MARK.format(n=m._cut))
            continue
        index += 1
        attrs = f'index="{index}" role="{m.role}"'
        if m.name is not None:
            attrs += f" name={attr(m.name)}"
        if m.tool_call_id is not None:
            attrs += f" tool_call_id={attr(m.tool_call_id)}"
        parts = [neutralise(m.content)] if m.content else []
        for call in m.tool_calls or ():
            call_attrs = f"name={attr(call.function.name)}" + (f" id={attr(call.id)}" if call.id else "")
            parts.append(f"<call {call_attrs}>\n{neutralise(call.function.arguments)}\n</call>")
        body = "\n".join(parts)
        blocks.append(f"<turn {attrs}>\n{body}\n</turn>")
    return "\n".join(blocks)
