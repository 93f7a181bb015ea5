"""Where records come from: dataset files (JSONL, JSON, CSV, Parquet), Hugging Face
``datasets`` (a ``Dataset``, or a ``save_to_disk`` folder) and RAGAS-shaped evaluation
datasets, read again from the start for each pass of a run (:func:`record_reader`).

A reader never stops at a bad record: it yields a :class:`~localjury.errors.RecordError`
in that record's place, naming the record, its place and the field, and goes on with the
next one; only a source that cannot be read at all is a ``ConfigError``.
"""

from __future__ import annotations

import codecs
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from localjury._files import MAX_LINE_BYTES, Overlong, bounded_lines, check_regular_file, open_regular_file, parse_json
from localjury._hashing import is_saved_dataset
from localjury.errors import ConfigError, MissingDependencyError, RecordError
from localjury.records._parquet import parquet_rows
from localjury.records._saved import check_saved_dataset
from localjury.records._tables import csv_rows, json_items
from localjury.records.conversation import from_ragas_turns
from localjury.records.inspect_log import iter_inspect_log
from localjury.records.record import Record, coerce_records, dedupe, parse_record, raw_id

SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet", ".pq", ".pb", ".binpb", ".eval")
#: OpenTelemetry traces in OTLP protobuf, as the Collector's file exporter writes them (``format: proto``).
_OTLP_PROTO_SUFFIXES = (".pb", ".binpb")
_DATASET_HINT = (
    "give the path of a "
    + ", ".join(SUPPORTED_SUFFIXES[:-1])
    + f" or {SUPPORTED_SUFFIXES[-1]} file, or a folder that Hugging Face datasets' save_to_disk wrote"
)
#: How a JSON file of traces begins, by source (:data:`localjury.records.traces.READERS`): an OTLP
#: export request (its one field, camelCase as OTLP JSON writes it); an MLflow trace
#: (``Trace.to_json``: its info first), alone, in a list or a line.
_TRACE_HEADS = {
    "otlp": re.compile(rb'^\s*\{\s*"resource_?[sS]pans"\s*:'),
    "mlflow": re.compile(rb'^\s*\[?\s*\{\s*"info"\s*:\s*\{'),
}
#: A Phoenix span in its first 4 KiB (``get_spans``' context object or the dataframe's column)
#: beside its ``span_kind``.
_PHOENIX_SPAN = (re.compile(rb'"context(?:\.span_id"|"\s*:\s*\{\s*"trace_id")'), re.compile(rb'"span_kind"\s*:'))
#: The columns of Phoenix's spans dataframe that no dataset of records has.
_PHOENIX_COLUMNS = {"context.trace_id", "context.span_id"}
#: Rows read from a Hugging Face dataset at a time: what a pass holds of it beside its chunk.
HF_BATCH_ROWS = 256
#: The fields read from a RAGAS-shaped sample (attributes of the same names).
_SAMPLE_FIELDS = (
    "id",
    "user_input",
    "response",
    "retrieved_contexts",
    "reference",
    "reference_tool_calls",
    "response_a",
    "response_b",
)


def _hf_kind(obj: object) -> str | None:
    """``"dataset"`` for a Hugging Face ``Dataset`` or ``IterableDataset``, ``"dict"`` for a
    ``DatasetDict`` (several splits), else None."""
    if type(obj).__module__.split(".")[0] != "datasets":
        return None  # datasets is not imported for anything else: it is an optional dependency
    import datasets

    if isinstance(obj, datasets.DatasetDict | datasets.IterableDatasetDict):
        return "dict"
    return "dataset" if isinstance(obj, datasets.Dataset | datasets.IterableDataset) else None


def record_reader(records: str | Path | Iterable[Any]) -> Callable[[], Iterator[Record | RecordError]]:
    """A function that reads ``records`` from the start each time it is called (a run reads
    them once per model and once more to assemble the results), yielding each record or
    the error that rejects it.

    A file is read again from disk each time, a Hugging Face dataset (a ``Dataset``, or a
    ``save_to_disk`` folder, memory-mapped) from its Arrow table a batch at a time, a
    RAGAS-shaped ``EvaluationDataset`` from its ``samples``: none of them is copied into
    memory. Other iterables (a list of dicts or ``Record`` objects, a generator) are read
    into a list once, since a generator cannot be read twice.

    Raises:
        ConfigError: A ``DatasetDict`` (several splits) instead of one split; see
            :func:`iter_records` for files and folders (raised when the function is called).
    """
    if isinstance(records, str | Path):
        return partial(iter_records, Path(records))
    kind = _hf_kind(records)
    if kind == "dict":
        splits = list(records)  # type: ignore[arg-type]
        raise ConfigError(
            f"a DatasetDict holds {len(splits)} splits ({', '.join(map(str, splits))}); give one of them, "
            f"e.g. dataset[{(splits or ['test'])[0]!r}]"
        )
    if kind == "dataset":
        return partial(iter_hf_dataset, records)
    if is_ragas_dataset(records):
        return partial(iter_ragas, records)
    items = list(records)
    return partial(coerce_records, items)


def iter_hf_dataset(dataset: Any, *, where: str = "") -> Iterator[Record | RecordError]:
    """Read a Hugging Face ``datasets.Dataset`` (or ``IterableDataset``) row by row.

    The rows come from the dataset's Arrow table ``HF_BATCH_ROWS`` at a time (memory-mapped
    for a dataset loaded from disk): nothing is copied into memory beyond the batch read.
    Columns are read as records' fields (``question``, ``answer``, ``contexts`` and
    ``ground_truth`` as aliases; others ignored); a row's place in messages is its index,
    from 0, as ``dataset[i]`` finds it: "row index 7".

    Args:
        dataset: The dataset.
        where: Put before each row's place in messages (a folder's name).
    """
    plain = dataset.with_format(None)  # python objects whatever the dataset's format (numpy, torch)
    i = 0
    for batch in plain.iter(batch_size=HF_BATCH_ROWS):
        columns = list(batch)
        size = len(batch[columns[0]]) if columns else 0
        for j in range(size):
            raw = {c: batch[c][j] for c in columns}
            try:
                yield parse_record(raw, location=f"{where}row index {i}")
            except RecordError as exc:
                yield exc
            i += 1


def is_ragas_dataset(obj: object) -> bool:
    """Whether ``obj`` looks like a RAGAS ``EvaluationDataset``: an object (not a mapping or
    a list) whose ``samples`` is a list. RAGAS itself is never imported."""
    return (
        not isinstance(obj, Mapping | str | bytes | list | tuple)
        and not isinstance(obj, Record)
        and isinstance(getattr(obj, "samples", None), list)
    )


def iter_ragas(dataset: Any) -> Iterator[Record | RecordError]:
    """Read a RAGAS ``EvaluationDataset``-shaped object: each of its ``samples`` (RAGAS's
    ``SingleTurnSample``, or any object or mapping with the same fields) is a record. Its
    ``user_input``, ``response``, ``retrieved_contexts`` and ``reference`` are read; a sample
    whose ``user_input`` is a conversation (RAGAS's ``MultiTurnSample``: ``HumanMessage``,
    ``AIMessage`` with its ``tool_calls``, ``ToolMessage``) is a conversation record, its turns
    the record's ``messages`` (and its ``reference_tool_calls``, RAGAS ``ToolCall`` objects, the
    calls :class:`~localjury.metrics.tool_calls.ToolCallAccuracy` expects). A sample's place in
    messages is its index in ``samples``: "sample index 3"."""
    for i, sample in enumerate(dataset.samples):
        location = f"sample index {i}"
        if isinstance(sample, Mapping):
            raw: Any = sample
        else:
            raw = {f: v for f in _SAMPLE_FIELDS if (v := getattr(sample, f, None)) is not None}
        turns = raw.get("user_input") if isinstance(raw, Mapping) else None
        if isinstance(turns, list):
            # A MultiTurnSample: its user_input is the conversation, read as messages.
            raw = {k: v for k, v in raw.items() if k != "user_input"}
            try:
                raw["messages"] = from_ragas_turns(turns)
            except Exception as exc:
                yield RecordError(
                    f"a multi-turn sample whose turns cannot be read as messages ({type(exc).__name__}: {exc})",
                    record_id=raw_id(repr(sample), location),
                    field="user_input",
                    location=location,
                )
                continue
        try:
            yield parse_record(raw, location=location)
        except RecordError as exc:
            yield exc


def load_saved_dataset(path: Path) -> Any:
    """Open a ``save_to_disk`` folder with ``datasets.load_from_disk`` (memory-mapped, not
    read into memory), once :func:`check_saved_dataset` has checked what it names; a
    DatasetDict folder must hold one split.

    Raises:
        MissingDependencyError: The ``datasets`` package is not installed.
        ConfigError: The folder names files outside it or special files (see
            :func:`check_saved_dataset`), cannot be read, or holds several splits.
    """
    check_saved_dataset(path)
    # Before datasets (and huggingface_hub) is imported: a run never calls out.
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise MissingDependencyError(
            f"{path} is a Hugging Face datasets folder (save_to_disk); reading it needs the datasets package: "
            "pip install 'localjury[datasets]'"
        ) from None
    datasets.disable_progress_bars()
    try:
        loaded = datasets.load_from_disk(str(path), keep_in_memory=False)
    except Exception as exc:  # datasets raises several unrelated types for a damaged folder
        raise ConfigError(f"cannot read {path} as a Hugging Face datasets folder: {exc}") from exc
    if isinstance(loaded, datasets.DatasetDict):
        if len(loaded) != 1:
            first = next(iter(loaded), "test")
            raise ConfigError(
                f"{path} holds a DatasetDict of {len(loaded)} splits ({', '.join(loaded)}); give one split's "
                f"folder, e.g. {path / first}"
            )
        loaded = next(iter(loaded.values()))
    return loaded


def _overlong(item: Overlong, location: str, row: str, record: str) -> RecordError:
    """The error of a row over :data:`MAX_LINE_BYTES` (``row``: "line"; ``record``: "a JSONL
    record"), named by its id where it gave one, else by a hash of its size and first bytes."""
    how = "skipped unread" if row in ("line", "item") else "skipped"
    return RecordError(
        f"the {row} is {item.size:,} bytes, over the {MAX_LINE_BYTES:,}-byte bound on {record}; it is {how} "
        "(no judge could read a record this long)",
        record_id=item.head if item.is_id else raw_id(f"{item.size} bytes: {item.head or location}"),
        location=location,
    )


def _json_record(data: bytes, location: str, *, lines: bool = False) -> Record | RecordError | None:
    """The record a JSONL line or a JSON list's item holds, or its error; None for a blank
    line (``lines``: white space only, Unicode's included), which a JSONL file may hold."""
    text = data.decode("utf-8", "replace")
    if lines and not text.strip():
        return None
    try:
        raw = parse_json(data)
    except ValueError as exc:
        return RecordError(str(exc), record_id=raw_id(text), location=location)
    try:
        return parse_record(raw, location=location)
    except RecordError as exc:
        return exc


def _iter_jsonl(path: Path) -> Iterator[Record | RecordError]:
    with open_regular_file(path, "dataset file", _DATASET_HINT) as fh:
        for lineno, line in enumerate(bounded_lines(fh, path, "dataset file", MAX_LINE_BYTES), start=1):
            location = f"{path.name} line {lineno}"
            if isinstance(line, Overlong):
                yield _overlong(line, location, "line", "a JSONL record")
            elif (entry := _json_record(line, location, lines=True)) is not None:
                yield entry


def _iter_table(path: Path, suffix: str) -> Iterator[Record | RecordError]:
    """The records of a JSON list, a CSV or a Parquet file, streamed (see
    :mod:`localjury.records._tables`); a row over :data:`MAX_LINE_BYTES` is its error."""
    with open_regular_file(path, "dataset file", _DATASET_HINT) as fh:
        if suffix == ".json":
            for i, item in enumerate(json_items(fh, path, MAX_LINE_BYTES), start=1):
                location = f"{path.name} row {i}"
                if isinstance(item, Overlong):
                    yield _overlong(item, location, "item", "a record of a JSON list")
                elif (entry := _json_record(item, location)) is not None:
                    yield entry
            return
        rows = csv_rows(fh, path, MAX_LINE_BYTES) if suffix == ".csv" else parquet_rows(fh, path, MAX_LINE_BYTES)
        for i, row in enumerate(rows, start=1):
            location = f"{path.name} row {i}"
            if isinstance(row, Overlong):
                yield _overlong(row, location, "row", f"a {'CSV' if suffix == '.csv' else 'Parquet'} record")
                continue
            try:
                yield parse_record(row, location=location, csv_cells=suffix == ".csv")
            except RecordError as exc:
                yield exc


def _head(path: Path) -> bytes:
    """The file's first 4 KiB, without a UTF-8 byte order mark."""
    with open_regular_file(path, "dataset file", _DATASET_HINT) as fh:
        try:
            return fh.read(4096).removeprefix(codecs.BOM_UTF8)
        except OSError as exc:
            raise ConfigError(f"cannot read dataset file {path}: {exc.strerror or exc}") from exc


def _trace_source(path: Path, suffix: str) -> str | None:
    """The trace source a file holds, by its suffix and its start: OTLP (protobuf by suffix, JSON
    by its first line), an MLflow or a Phoenix export (Phoenix's spans dataframe in Parquet by
    its columns); None for a file of records."""
    if suffix in _OTLP_PROTO_SUFFIXES:
        return "otlp"
    if suffix in (".parquet", ".pq"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return "phoenix" if set(pq.read_schema(path).names) >= _PHOENIX_COLUMNS else None
        except (OSError, pa.ArrowException):
            return None  # the table reader says what is wrong with it
    if suffix not in (".json", ".jsonl", ".ndjson"):
        return None
    head = _head(path)
    if all(pattern.search(head) for pattern in _PHOENIX_SPAN):
        return "phoenix"
    return next((name for name, pattern in _TRACE_HEADS.items() if pattern.match(head)), None)


def _holds_object(path: Path) -> bool:
    """Whether a ``.json`` file holds an object (an inspect_ai log), not a list: its first
    character other than white space is ``{``."""
    return _head(path).lstrip().startswith(b"{")


def iter_records(path: str | Path) -> Iterator[Record | RecordError]:
    """Read a dataset file, yielding each record or, in its place, the error that rejects it.

    Formats by suffix: ``.jsonl``/``.ndjson`` (one object a line), ``.json`` (a list of
    objects), ``.csv`` (a header row; ``retrieved_contexts`` as a JSON list in its cell),
    ``.parquet``; an inspect_ai eval log, ``.eval`` or a ``.json`` file that holds an object
    (one record a sample, see :func:`localjury.records.inspect_log.iter_inspect_log`; needs the
    ``inspect`` extra); or a folder that Hugging Face ``datasets``' ``save_to_disk`` wrote (read
    memory-mapped, see :func:`iter_hf_dataset`; needs the ``datasets`` extra); OpenTelemetry traces
    in OTLP JSON, a ``.json``/``.jsonl`` file whose first line is an export request, or OTLP
    protobuf, a ``.pb``/``.binpb`` file (protobuf needs the ``traces`` extra); an MLflow trace
    export, or a Phoenix spans export in JSON or Parquet (one record a trace, see
    :mod:`localjury.records.traces`).

    A leading UTF-8 byte order mark is ignored in every text format. Every format is streamed,
    never read whole: a JSON list item by item, CSV a few hundred rows at a time, Parquet in
    batches of bounded size; a line, item or row over :data:`MAX_LINE_BYTES` is that record's
    error, as is an item of a JSON list that is not valid JSON.

    Raises:
        ConfigError: The file does not exist, is a folder (other than a datasets folder), a
            FIFO, a socket or a device, has an unknown suffix, or cannot be read at all (a read
            error, or a ``.json`` file that is not one list: raised where the reading finds it).
        MissingDependencyError: A datasets folder, without the ``datasets`` package; an OTLP
            protobuf file, without ``opentelemetry-proto``.
    """
    path = Path(path)
    if is_saved_dataset(path):
        yield from iter_hf_dataset(load_saved_dataset(path), where=f"{path.name} ")
        return
    check_regular_file(path, "dataset file", _DATASET_HINT)
    suffix = path.suffix.lower()
    source = _trace_source(path, suffix)
    if source is not None:
        from localjury.records.traces import READERS  # imported only for traces

        yield from READERS[source](path, None)
    elif suffix in (".jsonl", ".ndjson"):
        yield from _iter_jsonl(path)
    elif suffix == ".eval" or (suffix == ".json" and _holds_object(path)):
        yield from iter_inspect_log(path)
    elif suffix in (".json", ".csv", ".parquet", ".pq"):
        yield from _iter_table(path, ".parquet" if suffix == ".pq" else suffix)
    else:
        raise ConfigError(
            f"unsupported dataset format {suffix!r} for {path}; expected one of: " + ", ".join(SUPPORTED_SUFFIXES)
        )


class Dataset:
    """The records, read again for each pass and never held in memory whole: a file is
    streamed, a Hugging Face dataset read from its (memory-mapped) Arrow table a batch at a
    time, a RAGAS-shaped dataset from its samples (see :func:`~localjury.records.readers.record_reader`)."""

    def __init__(self, records: str | Path | Iterable[Any]) -> None:
        """Open the records for reading; a dataset file is checked here, before a run hashes it
        or loads a model.

        Raises:
            ConfigError: A dataset file that does not exist, is not a regular file, or cannot
                be read (``/proc/self/mem``: it says it is regular, and its reads fail).
        """
        self.path: Path | None = Path(records) if isinstance(records, str | Path) else None
        """The dataset file or folder, when the records come from one."""
        if self.path is not None and not is_saved_dataset(self.path):
            open_regular_file(self.path, "dataset file", _DATASET_HINT).close()
        self._read = record_reader(records)

    def entries(self) -> Iterator[Record | RecordError]:
        return dedupe(self._read())

    def chunks(self, size: int) -> Iterator[list[Record | RecordError]]:
        it = self.entries()
        while chunk := list(itertools.islice(it, size)):
            yield chunk
