"""Where a judgment's quotes come from and where they stand: the record's quotable texts, the
output model's field of quotes, and each quote located in the texts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from localjury.records.conversation import ChatMessage
from localjury.records.record import Record
from localjury.results.record_result import Quote
from localjury.types import QUOTE_KEY


def quotable_texts(
    inp: BaseModel, fields: Sequence[str], sources: Mapping[str, str] | None = None, record: Record | None = None
) -> list[tuple[str, str]]:
    """The texts of ``inp``'s ``fields`` that quotes may come from, each with its place in the
    record: a field by the record field it was filled from (``sources``, else its own name), a
    list's items as ``name[i]`` (0-based; a string record field shown as a one-item list keeps
    its own name), a conversation's turns shown to the judge as ``conversation[i]``; empty
    texts, and the turn that stands for the turns a cut removed, left out."""
    texts: list[tuple[str, str]] = []
    for name in fields:
        value = getattr(inp, name, None)
        field = (sources or {}).get(name, name)
        if isinstance(value, str):
            texts.append((field, value))
        elif isinstance(value, list):
            whole = record is not None and isinstance(getattr(record, field, None), str)
            for i, item in enumerate(value):
                if isinstance(item, ChatMessage):
                    # The mark of the turns cut to fit a context is localjury's text, not the record's.
                    texts.append((f"{name}[{i}]", "" if item._cut else item.content or ""))
                elif isinstance(item, str):
                    texts.append((field if whole else f"{field}[{i}]", item))
    return [(place, text) for place, text in texts if text]


def quote_field(output_model: type[BaseModel]) -> str | None:
    """The output model's field of quotes (the one marked :data:`~localjury.types.QUOTE_KEY`), or None."""
    for name, info in output_model.model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and extra.get(QUOTE_KEY):
            return name
    return None


def locate_quotes(quotes: Sequence[str], texts: Sequence[tuple[str, str]]) -> list[Quote] | str:
    """Each quote's first occurrence in ``texts`` (as :func:`quotable_texts` gives them), or a
    message naming the first quote that is in none of them."""
    located = []
    for quote in quotes:
        for place, text in texts:
            start = text.find(quote)
            if start >= 0:
                located.append(Quote(text=quote, field=place, start=start, end=start + len(quote)))
                break
        else:
            return f"quotes what is not in the record: {quote[:80]!r}"
    return located
