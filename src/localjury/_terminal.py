"""What reaches the terminal is what the data says.

Record ids, paths, model names and error messages carry text from the data and the command
line. :class:`SafeConsole` prints every string literally: no Rich markup (``[/oops]`` or
``[link=...]`` are shown, not interpreted), no ``:emoji:`` codes, and control and
bidirectional-override characters shown as escapes (``\\x1b``) instead of being sent to the
terminal, where they could clear the screen, move the cursor or reorder the text.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
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
