"""What reaches the terminal is what the data says.

Record ids, paths, model names and error messages carry text from the data and the command
line. :class:`SafeConsole` prints every string literally: no Rich markup (``[/oops]`` or
``[link=...]`` are shown, not interpreted), no ``:emoji:`` codes, and control and
bidirectional-override characters shown as escapes (``\\x1b``) instead of being sent to the
terminal, where they could clear the screen, move the cursor or reorder the text.

:func:`print_table` prints a table fitted to the terminal's width: a name (of a model, a
metric, a column) is what a user types next, so it is never cut nor broken inside a word;
free text wraps, and what still does not fit is left out, with a line saying so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.text import Text

#: C0 and C1 controls but newline and tab, DEL, and the bidirectional formatting characters.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """``text`` with each control or bidirectional-override character as a visible escape."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class SafeConsole(Console):
    """A Rich console that prints every string as it is (see the module docstring).

    Styling goes through ``style=`` arguments, never through markup inside the text.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("highlight", False)
        super().__init__(markup=False, emoji=False, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        kwargs["markup"] = False
        kwargs["emoji"] = False
        return super().render_str(escape_controls(text), **kwargs)


#: A column's kind. ``name``: what a user types next (a model, a metric, an aspect); never
#: left out, never broken inside a word. ``figure``: never broken inside a word; it may wrap
#: between words. ``text``: free text; it wraps, and folds a word longer than the room.
Kind = Literal["name", "figure", "text"]

#: Free text narrower than this reads badly: the column is left out instead.
_TEXT_FLOOR = 30
#: Where a name cannot be whole even with every column that may go left out, it folds down to
#: this width at least (a last resort, for a name longer than the terminal).
_NAME_FLOOR = 12
#: A bracketed group up to this long stays on one line: "[0.61, 0.78]", "(x16)", "(always 1)".
_GROUP = 24
_UNIT = re.compile(r"(?:\([^()\n]*\)|\[[^\[\]\n]*\]|\S)+")


@dataclass(frozen=True)
class Column:
    """One column of a table fitted to the terminal: its heading, its cells, how it may bend.

    A heading is the column's name: it wraps between words, never inside one.
    """

    header: str
    values: Sequence[str | Text]
    kind: Kind = "figure"
    importance: int | None = None
    """Which columns go first where the terminal is too narrow: the lowest, the rightmost of
    equals; ``None`` (and every ``name`` column) never goes."""
    justify: JustifyMethod | None = None
    """Default: right for figures, left for names and text."""


def _units(line: str) -> list[str]:
    """What a line may break between: words, and bracketed groups of up to ``_GROUP``."""
    units: list[str] = []
    for unit in _UNIT.findall(line):
        units += unit.split() if cell_len(unit) > _GROUP else [unit]
    return units


def _wrap(text: str, width: int) -> str:
    """``text`` broken between its units into lines of at most ``width`` (where a unit fits)."""
    lines = []
    for line in text.splitlines() or [""]:
        current = ""
        for unit in _units(line):
            if current and cell_len(current) + 1 + cell_len(unit) > width:
                lines.append(current)
                current = unit
            else:
                current = f"{current} {unit}" if current else unit
        lines.append(current)
    return "\n".join(lines)


def _plain(cell: str | Text) -> str:
    return cell.plain if isinstance(cell, Text) else escape_controls(cell)


def _widest(texts: Iterable[str], split: Callable[[str], list[str]]) -> int:
    return max((cell_len(part) for text in texts for part in split(text)), default=0)


def _tall(cell: str | Text, width: int) -> bool:
    """Whether ``cell`` takes more than one line ``width`` wide."""
    lines = _plain(cell).splitlines()
    return len(lines) > 1 or _widest(lines, lambda line: [line]) > width


@dataclass
class _Fit:
    column: Column
    natural: int  # the widest line, heading included: the width at which nothing wraps
    least: int  # the narrowest width the column may take
    width: int = 0

    @property
    def droppable(self) -> bool:
        return self.column.kind != "name" and self.column.importance is not None


def _gaps(fits: Sequence[_Fit]) -> int:
    """Two characters between columns (the box's divider and one of padding), none at the edges."""
    return 2 * (len(fits) - 1)


def _fit(columns: Sequence[Column], width: int) -> tuple[list[_Fit], list[Column]]:
    """Each kept column's width, and the columns left out, for a table ``width`` wide."""
    fits = []
    for column in columns:
        values = [_plain(v) for v in column.values]
        header = _widest([column.header], _units)
        natural = max(_widest([column.header, *values], str.splitlines), 1)
        if column.kind == "text":
            least = max(header, min(natural, _TEXT_FLOOR))
        else:
            least = max(header, _widest(values, _units), 1)
        fits.append(_Fit(column, natural, least))

    def need(kept: Sequence[_Fit]) -> int:
        return sum(f.least for f in kept) + _gaps(kept)

    if need([f for f in fits if not f.droppable]) > width:
        # Not even the columns that always stay fit with their names whole: let names fold.
        for f in fits:
            if f.column.kind == "name":
                f.least = min(f.least, max(_widest([f.column.header], _units), _NAME_FLOOR))
    kept = list(fits)
    while need(kept) > width and any(f.droppable for f in kept):
        lowest = min(f.column.importance for f in kept if f.droppable)  # type: ignore[type-var]
        kept.remove(next(f for f in reversed(kept) if f.droppable and f.column.importance == lowest))
    for f in kept:
        f.width = f.natural
    excess = sum(f.width for f in kept) + _gaps(kept) - width
    # Free text wraps first; then names and figures, between their words: the widest first.
    for kinds in (("text",), ("name", "figure")):
        while excess > 0:
            bendable = [f for f in kept if f.column.kind in kinds and f.width > f.least]
            if not bendable:
                break
            max(bendable, key=lambda f: f.width).width -= 1
            excess -= 1
    return kept, [f.column for f in fits if f not in kept]


def print_table(
    console: Console,
    columns: Sequence[Column],
    *,
    title: str | None = None,
    row_styles: Sequence[str | None] = (),
) -> list[str]:
    """Print a table fitted to the console's width, and a dim line naming the columns left out.

    Names and figures break between words (and bracketed groups), never inside one; free text
    wraps. Where even then the table does not fit, the columns of lowest importance are left
    out; a name longer than the terminal folds, as a last resort.

    Args:
        console: Where to print; its width is the room.
        columns: The columns, left to right, each with a cell per row.
        title: The table's title, above it.
        row_styles: A style per row (``None``: none).

    Returns:
        The headings of the columns left out.
    """
    from rich import box
    from rich.table import Table

    kept, left_out = _fit(columns, console.width)
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0)
    )
    cells: list[list[str | Text]] = []
    for f in kept:
        justify = f.column.justify or ("right" if f.column.kind == "figure" else "left")
        table.add_column(_wrap(f.column.header, f.width), justify=justify, overflow="fold", width=f.width)
        if f.column.kind == "text":
            cells.append(list(f.column.values))
        else:  # broken here between units, so that Rich never breaks inside a group
            cells.append([v if isinstance(v, Text) else _wrap(escape_controls(v), f.width) for v in f.column.values])
    rows = len(columns[0].values) if columns else 0
    # A blank line between rows where a row but the last takes more than one line.
    table.leading = int(any(_tall(v, f.width) for f, c in zip(kept, cells, strict=True) for v in c[: rows - 1]))
    styles = [*row_styles, *[None] * (rows - len(row_styles))]
    for i in range(rows):
        table.add_row(*[c[i] for c in cells], style=styles[i])
    console.print(table)
    if left_out:
        names = ", ".join(c.header for c in left_out)
        console.print(f"({names} left out at {console.width} columns; widen the terminal)", style="dim")
    return [c.header for c in left_out]
