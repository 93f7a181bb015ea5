"""Where a judgment's quotes come from and where they stand: the record's quotable texts, the
output model's field of quotes, and each quote located in the texts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pydantic import BaseModel

from localjury.metrics.thinking import split_thinking
from localjury.records.conversation import ChatMessage, last_response
from localjury.records.record import Record
from localjury.results.record_result import Quote
from localjury.types import QUOTE_KEY


class Quotable(NamedTuple):
    """A text quotes may come from: its place in the record, the text the judge is shown, and
    where that text starts in the record's own (after a response's thinking, which the judge
    is not shown: :mod:`localjury.metrics.thinking`)."""

    place: str
    text: str
    start: int = 0


def quotable_texts(
    inp: BaseModel, fields: Sequence[str], sources: Mapping[str, str] | None = None, record: Record | None = None
) -> list[Quotable]:
    """The texts of ``inp``'s ``fields`` that quotes may come from, each with its place in the
    record: a field by the record field it was filled from (``sources``, else its own name), a
    list's items as ``name[i]`` (0-based; a string record field shown as a one-item list keeps
    its own name), a conversation's turns shown to the judge as ``conversation[i]`` (offsets
    into the turn's shown text); empty texts, and the turn that stands for the turns a cut
    removed, left out."""
    texts: list[Quotable] = []
    for name in fields:
        value = getattr(inp, name, None)
        field = (sources or {}).get(name, name)
        if isinstance(value, str):
            texts.append(Quotable(field, value, _start_in(record, field, value)))
        elif isinstance(value, list):
            whole = record is not None and isinstance(getattr(record, field, None), str)
            for i, item in enumerate(value):
                if isinstance(item, ChatMessage):
                    # The mark of the turns cut to fit a context is localjury's text, not the record's.
                    texts.append(Quotable(f"{name}[{i}]", "" if item._cut else item.content or ""))
                elif isinstance(item, str):
                    texts.append(Quotable(field if whole else f"{field}[{i}]", item))
    return [t for t in texts if t.text]


def _start_in(record: Record | None, field: str, shown: str) -> int:
    """Where ``shown`` starts in the record's ``field`` (a conversation's ``response``: its last
    assistant turn, as ``localjury show`` finds it): after its thinking when the judge is shown
    the answer alone, else 0."""
    raw = getattr(record, field, None) if record is not None else None
    if raw is None and field == "response" and record is not None and record.messages:
        raw = last_response(record.messages)
    if isinstance(raw, str) and raw != shown:
        split = split_thinking(raw)
        if split.thinking is not None and split.answer == shown:
            return split.start
    return 0


def quote_field(output_model: type[BaseModel]) -> str | None:
    """The output model's field of quotes (the one marked :data:`~localjury.types.QUOTE_KEY`), or None."""
    for name, info in output_model.model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and extra.get(QUOTE_KEY):
            return name
    return None


def locate_quotes(quotes: Sequence[str], texts: Sequence[Quotable]) -> list[Quote] | str:
    """Each quote's first occurrence in ``texts`` (as :func:`quotable_texts` gives them), at its
    offsets in the record's text, or a message naming the first quote that is in none of them."""
    located = []
    for quote in quotes:
        for place, text, base in texts:
            start = text.find(quote)
            if start >= 0:
                located.append(Quote(text=quote, field=place, start=base + start, end=base + start + len(quote)))
                break
        else:
            return f"quotes what is not in the record: {quote[:80]!r}"
    return located
