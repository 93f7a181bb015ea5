"""`localjury show`: a run's judgments as a reader checks them, quotes marked in their text."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from localjury.cli._common import app, checked_path, out
from localjury.errors import ConfigError


@app.command()
def show(
    results: Annotated[Path, typer.Argument(callback=checked_path, help="A results file written by `localjury run`.")],
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            callback=checked_path,
            help="The records judged, to show each quote in its text (default: the dataset the run's manifest names).",
        ),
    ] = None,
    record: Annotated[
        list[str] | None, typer.Option("--record", "-r", help="Show this record id (repeatable; default: all).")
    ] = None,
    metric: Annotated[
        list[str] | None, typer.Option("--metric", "-m", help="Show this metric (repeatable; default: all).")
    ] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only the judgments that did not pass.")] = False,
    thinking: Annotated[
        bool, typer.Option("--thinking", help="Print each sample's thinking whole (default: folded to its start).")
    ] = False,
) -> None:
    """Show each judgment: every model's verdict, each sample's vote, reason, quotes and
    thinking (judges that think), and the judged text with the quotes marked where they stand
    (runs with --evidence)."""
    from localjury.records.readers import iter_records
    from localjury.records.record import Record
    from localjury.results.manifest import manifest_path_for
    from localjury.results.record_result import read_results
    from localjury.results.show import judgment_view
    from localjury.results.verify import read_manifest, recorded_dataset
    from localjury.votes.voting import passes

    rows = read_results(results)
    rows = [
        r
        for r in rows
        if (not record or r.record_id in record)
        and (not metric or r.metric in metric)
        and (not failed or not passes(r.score, r.rubric.threshold if r.rubric else None))
    ]
    if record:
        missing = sorted(set(record) - {r.record_id for r in rows})
        if missing and not failed:
            raise ConfigError(f"no record {missing[0]!r} in {results}")
    if data is None:
        manifest = manifest_path_for(results)
        data = recorded_dataset(read_manifest(manifest)) if os.path.lexists(manifest) else None
    by_id: dict[str, Record] = {}
    if data is not None:
        wanted = {r.record_id for r in rows}
        by_id = {e.id: e for e in iter_records(data) if isinstance(e, Record) and e.id in wanted}
    for row in rows:
        out.print(judgment_view(row, by_id.get(row.record_id), thinking))
        out.print()
    if not rows:
        out.print("no judgment matches")
