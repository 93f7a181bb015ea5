"""What every command shares: the app, the consoles, shared options, progress, Ctrl-C, and
the CLI's words for library messages."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from localjury._files import check_no_symlink_loop, check_reads_if_regular
from localjury._terminal import SafeConsole, escape_controls

app = typer.Typer(
    name="localjury",
    help="Judge LLM outputs offline with a jury of local open-weight models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="List, inspect and pull judge models (models.yaml).", no_args_is_help=True)
app.add_typer(models_app, name="models")

# Every string printed is shown as it is: record ids, paths and messages carry data.
err = SafeConsole(stderr=True)
out = SafeConsole()
_state = {"debug": False}


def checked_path(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """The callback of every path parameter: a path that leads into a loop of symbolic links,
    or a file that says it is regular but cannot be read (``/proc/self/mem``), is a
    configuration error naming the option, before the command starts."""
    what = param.opts[0] if param.opts and param.opts[0].startswith("-") else (param.name or "path").upper()
    for item in value if isinstance(value, list | tuple) else [value]:
        if item is not None:
            check_no_symlink_loop(Path(item), what)
            check_reads_if_regular(Path(item), what)
    return value


QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    _state["debug"] = debug


def _progress(quiet: bool) -> Any:
    """The progress display of a run: per model, records done, records/s, elapsed, eta."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed:.2f} rec/s" if task.speed else "", style="progress.data.speed")

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),  # a model name is shown as it is
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err,
        disable=quiet,
    )


@contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C during a run: say what the judgment store kept and how to resume, exit 130
    (typer alone would exit silently)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        if _state["debug"]:
            raise
        _report(exc, "interrupted", "")
        raise typer.Exit(130) from None


#: The flags of the settings that library messages name as `setting` (see localjury.errors).
FLAGS = {
    "`cache`": "--cache",
    "`use_cache=False`": "--no-cache",
    "`temperature`": "--temperature",
    "`cpus_per_replica`": "--replica-cpus",
    "`replicas`": "--replicas",
    "`address`": "--address",
    "a Ray `cluster`": "--cluster ray",
    "`metrics`": "--aspect, --criterion, --criteria, --metric or --pairwise",
    "`metric`": "--metric",
    "`limit`": "--limit",
    "`trust_remote_code`": "--trust-remote-code",
    "`registry`": "--registry",
    "`fresh`": "--fresh",
}


def cli_words(message: str) -> str:
    """A library message with each setting it names replaced by the CLI's flag."""
    for setting, flag in FLAGS.items():
        message = message.replace(setting, flag)
    return message


def _report(exc: BaseException, head: str, message: str) -> None:
    """Print one line for ``exc`` (``head`` in red, then the message in the CLI's words),
    then its notes (what the judgment store kept)."""
    err.print(Text.assemble((head, "bold red"), escape_controls(cli_words(message))), soft_wrap=True)
    for note in getattr(exc, "__notes__", ()):
        err.print(Text(escape_controls(cli_words(note)), style="yellow"), soft_wrap=True)
