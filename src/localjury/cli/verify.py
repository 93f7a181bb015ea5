"""`localjury verify`: check a run's files against this machine."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from localjury.cli._common import app, checked_path, err, out
from localjury.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from localjury.results.verify import Check


@app.command()
def verify(
    results: Annotated[Path, typer.Argument(callback=checked_path, help="A results file written by `localjury run`.")],
    manifest: Annotated[
        Path | None,
        typer.Option("--manifest", callback=checked_path, help="The manifest (default: <results stem>.manifest.json)."),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="List the checks that pass too.")] = False,
) -> None:
    """Re-check a run's manifest against this machine: same model files, package versions, dataset.

    Hashes every weight, config and tokenizer file again. Exits 1 when anything differs.
    A commit of these files that was cut short is settled first (completed, or undone); a
    commit journal localjury cannot prove it wrote is refused and left as it is. Files are
    read only as regular files on a disk (not a file of /proc, nor a sparse file of holes),
    each once, and no further than the manifest says they held; a manifest asking for more
    than 10,000 checks is refused.
    """
    from localjury.results._outputs import settle_pending
    from localjury.results.manifest import manifest_path_for
    from localjury.results.verify import read_manifest
    from localjury.results.verify import verify as check

    path = manifest or manifest_path_for(results)
    for line in settle_pending([results, path]):
        err.print(line, style="yellow", soft_wrap=True, markup=False)
    if not os.path.lexists(path):
        raise ConfigError(f"no manifest at {path}: `localjury run` writes one beside its results (or pass --manifest)")
    recorded = read_manifest(path)
    checks = check(recorded, manifest_path=path, results=results)
    bad = [c for c in checks if not c.ok]
    shown = checks if show_all else bad
    if shown:
        print_checks(shown, path, out)
    out.print(f"{len(checks) - len(bad)} of {len(checks)} checks match" + ("" if not bad else f"; {len(bad)} differ"))
    if bad:
        raise typer.Exit(1)


#: The most characters of a check's cell printed: longer than any path (4,096 bytes on Linux).
MAX_CELL = 4096


def print_checks(checks: Sequence[Check], path: Path, console: Console) -> None:
    """Print ``localjury verify``'s checks: what, whether it matches, the manifest's value and
    this machine's (a SHA-256 by its first 16 digits; a cell over :data:`MAX_CELL` characters
    cut there)."""
    import re

    from localjury._terminal import Column, print_table

    def short(value: str | None) -> str:
        return value[:16] + "…" if value and re.fullmatch(r"[0-9a-f]{64}", value) else clip(str(value))

    def clip(value: str) -> str:
        # A manifest's text is data: a name of megabytes (no path is) would take minutes to lay out.
        return value if len(value) <= MAX_CELL else f"{value[:MAX_CELL]}… ({len(value):,} characters)"

    columns = [
        Column("check", [clip(c.what) for c in checks], "name"),
        Column("ok", [Text("yes") if c.ok else Text("NO", style="red") for c in checks], justify="left"),
        Column("manifest", [short(c.expected) for c in checks], "text"),
        Column("this machine", [short(c.found) for c in checks], "text"),
    ]
    print_table(console, columns, title=str(path))
