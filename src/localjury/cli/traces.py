"""`localjury traces show|annotate`: what agent traces (OTLP, Phoenix, Langfuse, MLflow exports)
become as records, and a run's judgments of them as the annotations Phoenix, Langfuse and MLflow
import."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated

import typer

from localjury.cli._common import app, checked_path, err, out

traces_app = typer.Typer(
    help="Judge agent traces (OTLP, Phoenix, Langfuse, MLflow exports): see what each trace becomes, "
    "write judgments as annotations.",
    no_args_is_help=True,
)
app.add_typer(traces_app, name="traces")
#: The records (and the errors) `traces show` prints; the rest are counted (and written with --out).
SHOWN = 50


@traces_app.command("show")
def traces_show(
    file: Annotated[
        Path,
        typer.Argument(
            callback=checked_path,
            help="OTLP (JSON or protobuf, as the Collector's file exporter writes it) or a Phoenix, Langfuse or "
            "MLflow export.",
        ),
    ],
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="'otlp' (OpenInference, GenAI or MLflow spans), 'phoenix' (spans as JSON or Parquet), "
            "'langfuse' (traces with observations) or 'mlflow' (Trace.to_json()).",
        ),
    ] = "otlp",
    per: Annotated[str, typer.Option("--per", help="One record per 'trace' or per 'llm-span'.")] = "trace",
    contexts: Annotated[
        bool, typer.Option("--contexts/--no-contexts", help="Retriever spans' documents as the records' contexts.")
    ] = True,
    answer: Annotated[
        str,
        typer.Option(
            "--answer",
            help="The final answer: the 'last-llm' span's output message, or the 'root' span's output.value.",
        ),
    ] = "last-llm",
    turn_kinds: Annotated[
        str,
        typer.Option(
            "--turns",
            help="Span kinds whose spans make the turns, comma-separated (llm, tool, agent, chain, retriever, "
            "other), e.g. 'agent,tool'; default: the last LLM span's messages.",
        ),
    ] = "",
    write: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", callback=checked_path, help="Also write the records as JSONL, for `localjury run`."
        ),
    ] = None,
) -> None:
    """Show what each trace of FILE becomes: its record's id (trace id/span id), turns, tool
    calls, contexts and answer, or why it cannot be judged. `localjury run FILE` reads OTLP,
    Phoenix and MLflow files with the defaults; a Langfuse export and other choices go through
    --out and a run of that file."""
    from pydantic import ValidationError

    from localjury._terminal import Column, print_table
    from localjury._writes import open_atomic
    from localjury.errors import ConfigError, RecordError
    from localjury.records.traces import READERS, TraceReading

    kinds = tuple(k.strip() for k in turn_kinds.split(",") if k.strip())
    try:
        reading = TraceReading(per=per, contexts=contexts, answer=answer, turns=kinds)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(
            "--per must be 'trace' or 'llm-span', --answer 'last-llm' or 'root', --turns kinds among llm, tool, "
            f"agent, chain, retriever, other: {exc.errors()[0]['msg']}"
        ) from None
    if source not in READERS:
        raise ConfigError(f"--from must be one of: {', '.join(READERS)}")
    ids: list[str] = []
    turns: list[str] = []
    calls: list[str] = []
    docs: list[str] = []
    answers: list[str] = []
    errors: list[str] = []
    shown = written = failed = 0
    with contextlib.ExitStack() as stack:
        fh = stack.enter_context(open_atomic(write)) if write is not None else None
        for item in READERS[source](file, reading):  # a stream: only the table's first rows are kept
            if isinstance(item, RecordError):
                failed += 1
                if len(errors) < SHOWN:
                    errors.append(str(item))
                continue
            if fh is not None:
                fh.write(item.model_dump_json(exclude_none=True) + "\n")
            written += 1
            if shown >= SHOWN:
                continue
            shown += 1
            messages = item.messages or []
            final = item.response
            if final is None:
                final = next((m.content for m in reversed(messages) if m.role == "assistant" and m.content), "")
            ids.append(item.id)
            turns.append(str(len(messages)))
            calls.append(", ".join(c.function.name for m in messages for c in m.tool_calls or []) or "-")
            docs.append(str(len(item.retrieved_contexts or [])))
            answers.append((final or "")[:80])
    columns = [Column("record", ids, "name"), Column("turns", turns), Column("tool calls", calls, "text"),
               Column("contexts", docs), Column("answer", answers, "text")]  # fmt: skip
    print_table(out, columns)
    if written > shown:
        out.print(f"... and {written - shown} more records")
    for message in errors:
        err.print(f"not judged: {message}")
    if failed > len(errors):
        err.print(f"... and {failed - len(errors)} more traces not judged")
    if write is not None:
        err.print(f"{written} records written to {write}")
    if failed and not written:
        raise typer.Exit(2)


@traces_app.command("annotate")
def traces_annotate(
    results: Annotated[Path, typer.Argument(callback=checked_path, help="A results file of a run on traces.")],
    to: Annotated[str, typer.Option("--to", help="The tool: phoenix, langfuse or mlflow.")],
    write: Annotated[
        Path, typer.Option("--out", "-o", callback=checked_path, help="The annotations file to write (JSON lines).")
    ],
) -> None:
    """Write a run's judgments of traces as TOOL's annotations, one JSON object a line:
    Phoenix span annotations, Langfuse scores or MLflow feedback (docs/traces.md shows how each
    tool's client loads them). Nothing is sent anywhere."""
    from localjury.errors import ConfigError
    from localjury.results.annotations import TOOLS, write_annotations
    from localjury.results.record_result import read_results

    if to not in TOOLS:
        raise ConfigError(f"--to must be one of: {', '.join(TOOLS)}")
    done = write_annotations(read_results(results), to, write)  # type: ignore[arg-type]
    out.print(f"{done.annotations} {to} annotations written to {write}")
    if done.unscored:
        err.print(f"{len(done.unscored)} results without a score left out: {json.dumps(done.unscored[:5])}")
