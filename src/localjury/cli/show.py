"""`localjury show`: a run's judgments as a reader checks them, quotes marked in their text."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from localjury.cli._common import app, checked_path, err, out
from localjury.errors import ConfigError

if TYPE_CHECKING:
    from localjury.records.record import Record
    from localjury.results.record_result import RecordResult


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
    (runs with --evidence).

    A line of the results file that is not a result is reported once the others are shown
    (exit 2); so is a line that cannot be read at all, where the reading stops.
    """
    from localjury.results.show import judgment_view, quotes_of, read_shown
    from localjury.votes.voting import passes

    def keep(r: RecordResult) -> bool:
        return (
            (not record or r.record_id in record)
            and (not metric or r.metric in metric)
            and (not failed or not passes(r.score, r.rubric.threshold if r.rubric else None))
        )

    shown = read_shown(results, keep)
    rows = shown.rows
    if record and shown.complete and not failed:
        missing = sorted(set(record) - {r.record_id for r in rows})
        if missing:
            raise ConfigError(f"no record {missing[0]!r} in {results}")
    wanted = {r.record_id for r in rows if quotes_of(r)}  # the records are read for their quotes only
    source = data if data is not None or not wanted else _recorded_dataset(results)
    by_id = _records(source, wanted, given=data is not None)
    for row in rows:
        out.print(judgment_view(row, by_id.get(row.record_id), thinking))
        out.print()
    if not rows:
        out.print("no judgment matches")
    if (problem := shown.problem()) is not None:
        raise problem


#: What ``show`` does without the records: said after why it has none.
_NO_TEXTS = "the quotes are shown without their texts (pass --data to show them)"


def _recorded_dataset(results: Path) -> Path | None:
    """The dataset the manifest beside ``results`` names, when it may be read as that dataset
    (see :func:`~localjury.results.verify.recorded_dataset`); None, said on stderr, when the
    manifest cannot be read: the quotes are then shown by their offsets."""
    from localjury.results.manifest import manifest_path_for
    from localjury.results.verify import read_manifest, recorded_dataset

    manifest = manifest_path_for(results)
    if not os.path.lexists(manifest):
        return None
    try:
        return recorded_dataset(read_manifest(manifest))
    except ConfigError as exc:
        err.print(f"{exc}; {_NO_TEXTS}", style="yellow", soft_wrap=True)
        return None


def _records(data: Path | None, wanted: set[str], *, given: bool) -> dict[str, Record]:
    """The records of ``data`` whose ids are ``wanted`` (read only as far as the last of them).
    The dataset a manifest named is read as a courtesy: an error reading it is said on stderr
    and the quotes are shown without their texts; one reading ``--data`` is raised."""
    from localjury.records.readers import iter_records
    from localjury.records.record import Record

    found: dict[str, Record] = {}
    if data is None or not wanted:
        return found
    try:
        for entry in iter_records(data):
            if isinstance(entry, Record) and entry.id in wanted:
                found.setdefault(entry.id, entry)
                if len(found) == len(wanted):
                    break
    except ConfigError as exc:
        if given:
            raise
        err.print(f"{exc}; {_NO_TEXTS}", style="yellow", soft_wrap=True)
    return found
