"""Text from outside localjury (model and metric names, paths, descriptions) written into a
Markdown report as text: whatever it holds, it renders as itself and never as markup, HTML
or an extra table cell."""

from __future__ import annotations

import html
import re

#: Line breaks of every kind: inside a list item or a table row, a break would end it.
_BREAKS = re.compile(r"\r\n|[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")
#: Characters that make inline Markdown anywhere in a line (code spans, emphasis, links and
#: images, table cells, strikethrough, a heading's closing #s), each escaped with a backslash.
_INLINE = re.compile(r"([\\`*_\[\]|~#])")
#: What makes a line a block when it starts it: a bullet or a thematic break, a setext
#: underline, an ordered list item (``#`` is escaped everywhere, ``>`` is an entity).
_BLOCK_START = re.compile(r"^(?:[+=-]|\d{1,9}(?=[.)]))")


def md_text(value: object) -> str:
    """``value`` as Markdown text that renders as itself, on one line.

    ``&``, ``<`` and ``>`` become HTML entities (no raw HTML, no autolink), Markdown's inline
    punctuation is backslash-escaped (``|`` included, so it never splits a table cell), line
    breaks become spaces, and a leading character that would start a block (``>``, ``-``,
    ``+``, ``=``, ``1.``) is escaped. Leading and trailing spaces are dropped, as a table cell
    or a list item drops them when it renders.
    """
    text = _BREAKS.sub(" ", str(value)).strip()
    text = _INLINE.sub(r"\\\1", html.escape(text, quote=False))
    return _BLOCK_START.sub(lambda m: m.group() + "\\" if m.group().isdigit() else "\\" + m.group(), text)
