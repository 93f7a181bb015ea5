"""MkDocs hook: the CLI's options, in the docs as its ``--help`` gives them.

A page marks where a command's options go with ``<!-- cli-options: run -->`` (a subcommand:
``<!-- cli-options: models pull -->``); at build time the marker becomes a Markdown table of
that command's arguments and options (names, value, default, help), read from the click
command that typer builds from the app. The help texts are written once, in the CLI; a
marker naming a command the CLI does not have fails the build.

Declared under ``hooks:`` in mkdocs.yml (``exclude_docs`` keeps this folder out of the site).
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import PurePath
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"<!--\s*cli-options:\s*([\w][\w -]*?)\s*-->")


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace each ``cli-options`` marker of the page with its command's table."""
    if "cli-options" not in markdown:
        return markdown
    return MARKER.sub(lambda m: options_table(m.group(1).split()), markdown)


def options_table(path: list[str]) -> str:
    """The Markdown table of ``localjury PATH...``'s arguments and options, in their order.

    Raises:
        PluginError: No such command.
    """
    import typer

    from localjury.cli import app

    command = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="localjury")
    for name in path:
        sub = command.get_command(ctx, name) if hasattr(command, "get_command") else None
        if sub is None:
            raise PluginError(f"cli-options marker: `localjury {' '.join(path)}` is no command of the CLI")
        command, ctx = sub, typer.Context(sub, info_name=name, parent=ctx)
    rows = ["| option | value | default | meaning |", "|---|---|---|---|"]
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        rows.append("| " + " | ".join(_row(param, ctx)) + " |")
    return "\n".join(rows)


def _row(param: Any, ctx: Any) -> list[str]:
    is_option = param.param_type_name == "option"
    if is_option:
        names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
    else:
        names = f"`{(param.metavar or param.name).upper()}`"
    flag = is_option and getattr(param, "is_flag", False)
    value = "" if flag else _value(param, ctx)
    if param.required:
        default = "required"
    elif flag or param.default is None or param.default is False or param.default in ([], ()):
        default = ""  # none, off, or nothing given (a repeatable option)
    else:
        default = f"`{_shown(param.default)}`"
    return [names, value, default, _markdown(getattr(param, "help", None) or "")]


def _value(param: Any, ctx: Any) -> str:
    """What the option takes: its metavar, else its type (with its range)."""
    if param.metavar:
        return f"`{param.metavar}`"
    # click's parameters carry a ParamType (``type.name``: "integer range", "path", "text");
    # typer 0.29's own click (typer._click) a type descriptor shown as "<int range>", "<list[str]>".
    kind = param.type.name if hasattr(param, "type") else param.display_type(ctx).strip("<>")
    word = next((w for key, w in _TYPES if key in kind), "TEXT")
    low, high = (getattr(getattr(param, "type", param), end, None) for end in ("min", "max"))
    if low is not None and high is not None:
        return f"{word} {_shown(low)} to {_shown(high)}"
    if low is not None:
        return f"{word} ≥ {_shown(low)}"
    return word if high is None else f"{word} ≤ {_shown(high)}"


_TYPES = [("int", "INTEGER"), ("float", "NUMBER"), ("path", "PATH"), ("file", "PATH"), ("bool", "BOOLEAN")]


def _shown(value: Any) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, list | tuple):
        return ", ".join(_shown(v) for v in value)
    return str(value)


def _markdown(text: str) -> str:
    """A help text as one table cell: whitespace folded, and outside its `code` spans the
    characters Markdown or HTML would read (``<out stem>``, ``2**32``, a ``|``) escaped."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        part = parts[i].replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        parts[i] = re.sub(r"([*_|\[\]])", r"\\\1", part)
    return "`".join(parts)
