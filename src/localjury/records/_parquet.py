"""A Parquet file's rows, streamed in bounded memory: a row group at a time, page by page, in
batches of about :data:`~localjury.records._tables.BATCH_BYTES`, each row measured from its Arrow
arrays before it is turned into Python (a row over the bound becomes an :class:`Overlong`).

A text column stored with a dictionary is read one of two ways, chosen for each row group:

- as its dictionary and indices, where its values as plain strings could be too many bytes for
  a batch (a few KB on disk that reference one long string a million times): each row is
  measured from its indices, and none of those strings is copied;
- as plain strings elsewhere, since a dictionary read keeps every distinct value the row group
  holds past the point where its writer stopped using the dictionary (pyarrow's writer stops at
  1 MiB of dictionary): a row group of a million short, distinct strings would be held whole.

A column read as a dictionary whose dictionary starts to grow so (its writer's fallback to
plain pages) is read again as plain strings from the row where it stands, once every row before
it has been measured small enough to decode again within a batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from localjury._files import Overlong
from localjury.errors import ConfigError
from localjury.records import _tables
from localjury.records._tables import _READ_BYTES, _VALUE_BYTES, _overlong_row, _reason

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import pyarrow as pa

#: A text column inside a list, stored with a dictionary, is read as plain strings in a row
#: group where all its values as plain strings hold at most this many bytes (a row may hold all).
PLAIN_CHUNK_BYTES = 64 << 20
#: A column read as a dictionary is read again as plain strings once its dictionary grows by
#: this many bytes past its dictionary page.
GROWN_BYTES = 1 << 20
#: How pyarrow opens the file: pages read as they are decoded, never column chunks whole; JSON
#: and UUID columns as their text and bytes (only those can be read as dictionaries).
_OPEN = {"pre_buffer": False, "buffer_size": _READ_BYTES, "arrow_extensions_enabled": False}


def parquet_rows(fh: IO[bytes], path: Path, limit: int) -> Iterator[dict[str, Any] | Overlong]:
    """A Parquet file's rows, in order; a row whose measured size (:func:`_row_sizes`) is over
    ``limit`` as an :class:`Overlong`, never turned into Python objects.

    Raises:
        ConfigError: pyarrow cannot read the file (the message names the file and says why).
    """
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(fh, **_OPEN).metadata  # type: ignore[arg-type]
        texts = _text_columns(meta)
        for group in range(meta.num_row_groups):
            for batch, sizes in _group_batches(fh, meta, group, texts, limit):
                yield from _batch_rows_of(batch, sizes, limit)
    except ConfigError:
        raise
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise ConfigError(f"cannot read {path} as Parquet: {_reason(exc)}") from exc


@dataclass(frozen=True)
class _Text:
    """A text or bytes column of a Parquet file (a leaf: ``retrieved_contexts.list.element``)."""

    path: str
    """Its path in the file's schema, as ``read_dictionary`` takes it."""
    top: str
    """The top-level column it is part of."""
    repeated: bool
    """Inside a list or a map: a row may hold any number of its values."""


def _text_columns(meta: Any) -> dict[int, _Text]:
    """The text and bytes columns, by leaf index: those pyarrow can read as dictionaries (JSON
    and BSON too, read as their text or bytes: the file is opened without Arrow's extension
    types; a decimal's bytes are a number of at most 32 bytes, read as one)."""
    names = sorted(meta.schema.to_arrow_schema().names, key=len, reverse=True)
    texts = {}
    for j in range(meta.num_columns):
        column = meta.schema.column(j)
        if column.physical_type == "BYTE_ARRAY" and column.logical_type.type != "DECIMAL":
            top = next((n for n in names if column.path == n or column.path.startswith(n + ".")), column.path)
            texts[j] = _Text(column.path, top, column.max_repetition_level > 0)
    return texts


def _group_batches(
    fh: IO[bytes], meta: Any, group: int, texts: dict[int, _Text], limit: int
) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """A row group's batches, each with its rows' measured sizes (see the module's docstring)."""
    import pyarrow.parquet as pq

    dictionaries, rows = _group_plan(fh, meta, group, texts, limit)
    done = largest = 0  # rows yielded, and the largest of them
    while True:
        reader = pq.ParquetFile(fh, metadata=meta, read_dictionary=dictionaries, **_OPEN)  # type: ignore[arg-type]
        skip = done  # rows read before, decoded again and dropped
        first: dict[str, int] = {}  # each dictionary's bytes when first seen
        grown: list[str] = []
        for batch in reader.iter_batches(batch_size=rows, row_groups=[group], use_pandas_metadata=False):
            if skip:
                batch, skip = batch.slice(min(skip, batch.num_rows)), max(0, skip - batch.num_rows)
                if not batch.num_rows:
                    continue
            sizes = _row_sizes(batch)
            yield batch, sizes
            done, largest = done + batch.num_rows, max(largest, int(sizes.max(initial=0)))
            grown = _grown(batch, dictionaries, texts, first)
            if grown and largest <= _tables.BATCH_BYTES:
                break
        else:
            return
        # Decoding the rows read so far again as plain strings holds at most a batch's bytes, as
        # does decoding those after them (each column at its uncompressed size a row).
        dictionaries = [d for d in dictionaries if d not in grown]
        plain = sum(_stored_bytes(c) for c in map(meta.row_group(group).column, range(meta.num_columns)))
        per_row = max(largest, plain // max(1, meta.row_group(group).num_rows), 1)
        rows = max(1, min(rows, _tables.BATCH_BYTES // per_row))


def _grown(batch: pa.RecordBatch, dictionaries: list[str], texts: dict[int, _Text], first: dict[str, int]) -> list[str]:
    """The columns read as dictionaries whose dictionary has grown by :data:`GROWN_BYTES` since
    the first batch (``first`` keeps each top-level column's dictionary bytes then)."""
    grown = []
    for text in texts.values():
        if text.path not in dictionaries:
            continue
        held = sum(d.nbytes for d in _dictionaries(batch.column(text.top)))
        if held - first.setdefault(text.top, held) > GROWN_BYTES:
            grown += [t.path for t in texts.values() if t.top == text.top and t.path in dictionaries]
    return grown


def _group_plan(fh: IO[bytes], meta: Any, group: int, texts: dict[int, _Text], limit: int) -> tuple[list[str], int]:
    """How to start reading one row group: the text columns read as dictionaries, and the rows
    a batch.

    A text column stored with a dictionary is read as its dictionary where a row's values as
    plain strings could be too many bytes for a batch: one value of it is over
    :data:`~localjury.records._tables.BATCH_BYTES` or the row bound ``limit`` (its dictionary's
    longest entry), or, inside a list, all its values could be over :data:`PLAIN_CHUNK_BYTES`;
    and where its longest entry is not known (:func:`_longest_entries`). Each column counts at
    its uncompressed size or at its values' count (a run of one number repeated is a few bytes
    stored), a dictionary column at its indices, a plain one at its longest entry a value.
    """
    row_group = meta.row_group(group)
    rows = max(1, row_group.num_rows)
    stored = {j: t for j, t in texts.items() if row_group.column(j).has_dictionary_page}
    longest = _longest_entries(fh, meta, group, stored.values()) if stored else {}
    dictionaries: list[str] = []
    per_row = 0
    for j in range(row_group.num_columns):
        column = row_group.column(j)
        size = _stored_bytes(column)
        text = stored.get(j)
        entry = longest.get(text.top) if text is not None else None
        if text is None:
            per_row += size // rows
        elif entry is None:  # its dictionary is not known: read as one, in case
            dictionaries.append(text.path)
            per_row += column.num_values * 4 // rows
        elif text.repeated and column.num_values * entry <= PLAIN_CHUNK_BYTES:
            per_row += (size + column.num_values * entry) // rows
        elif not text.repeated and entry <= min(_tables.BATCH_BYTES, limit):
            per_row += max(entry, size // rows)
        else:
            dictionaries.append(text.path)
            per_row += column.num_values * 4 // rows
    return dictionaries, max(1, min(_tables.PARQUET_BATCH_ROWS, _tables.BATCH_BYTES // max(1, per_row)))


def _stored_bytes(column: Any) -> int:
    """A column chunk's bytes: uncompressed, or its values' count (a run of one number repeated
    is a few bytes stored), whichever is more."""
    return max(column.total_uncompressed_size, column.num_values * _VALUE_BYTES)


def _longest_entries(fh: IO[bytes], meta: Any, group: int, texts: Iterable[_Text]) -> dict[str, int]:
    """The longest dictionary entry (bytes) of each top-level column of a row group that holds
    dictionary columns: the group's first row read with those as dictionaries, which gives each
    column's whole dictionary page where that row holds a value of it. A column whose first row
    holds none (a null, an empty list) is left out: its dictionary is not known."""
    import pyarrow.parquet as pq

    texts = list(texts)
    reader = pq.ParquetFile(fh, metadata=meta, read_dictionary=[t.path for t in texts], **_OPEN)  # type: ignore[arg-type]
    tops = sorted({t.top for t in texts})
    first = next(reader.iter_batches(batch_size=1, row_groups=[group], columns=tops, use_pandas_metadata=False), None)
    longest = {}
    for top in tops if first is not None else ():
        found = [d for d in _dictionaries(first.column(top)) if len(d)]  # type: ignore[union-attr]
        if found:
            longest[top] = max(int(_sizes(d).max()) for d in found)
    return longest


def _dictionaries(array: pa.Array) -> Iterator[pa.Array]:
    """The dictionaries of the dictionary arrays in ``array``, at any depth."""
    import pyarrow as pa

    kind = array.type
    if pa.types.is_dictionary(kind):
        yield array.dictionary
    elif pa.types.is_map(kind):
        yield from _dictionaries(array.keys)
        yield from _dictionaries(array.items)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        yield from _dictionaries(array.values)
    elif pa.types.is_struct(kind):
        for field in array.flatten():
            yield from _dictionaries(field)


def _batch_rows_of(batch: pa.RecordBatch, measured: np.ndarray, limit: int) -> Iterator[dict[str, Any] | Overlong]:
    """A batch's rows (``measured``: their sizes), turned into Python a measured
    :data:`~localjury.records._tables.BATCH_BYTES` at a time."""
    bound = _tables.BATCH_BYTES
    if measured.max(initial=0) <= limit and measured.sum() <= bound:
        yield from batch.to_pylist()  # the usual batch, sized from the metadata: at once
        return
    sizes: list[int] = measured.tolist()
    start = 0
    while start < batch.num_rows:
        if sizes[start] > limit:
            yield _overlong_row(sizes[start], _short_id(batch, start))
            start += 1
            continue
        end, held = start, 0
        while end < batch.num_rows and sizes[end] <= limit and (end == start or held + sizes[end] <= bound):
            held += sizes[end]
            end += 1
        yield from batch.slice(start, end - start).to_pylist()
        start = end


def _short_id(batch: pa.RecordBatch, row: int) -> Any:
    """The row's ``id`` when it is short (to name the row's error), else None."""
    if "id" not in batch.schema.names:
        return None
    cell = batch.column("id").slice(row, 1)
    return cell.to_pylist()[0] if _sizes(cell)[0] <= 200 else None


def _row_sizes(batch: pa.RecordBatch) -> np.ndarray:
    """Each row's measured size: the bytes of its texts, and 8 bytes for each other value (a
    number, a list's slot), found from the Arrow arrays without making Python objects."""
    import numpy as np

    total = np.zeros(batch.num_rows, dtype=np.int64)
    for column in batch.columns:
        total += _sizes(column)
    return total


def _sizes(array: pa.Array) -> np.ndarray:
    """Each value's measured size (see :func:`_row_sizes`); a null's is 0."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if isinstance(kind, pa.ExtensionType):  # JSON, UUID...: measured as what they are stored as
        return _sizes(array.storage)
    if pa.types.is_dictionary(kind):
        values = _sizes(array.dictionary)
        indices = array.indices.fill_null(0).to_numpy(zero_copy_only=False)
        sizes = values[indices] if len(values) else np.zeros(len(array), dtype=np.int64)
    elif (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_binary_view(kind)
    ):
        sizes = pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    elif pa.types.is_fixed_size_binary(kind):
        sizes = np.full(len(array), kind.byte_width, dtype=np.int64)
    elif (
        pa.types.is_list(kind)
        or pa.types.is_large_list(kind)
        or pa.types.is_fixed_size_list(kind)
        or (pa.types.is_map(kind))
    ):
        items = _sizes(array.flatten()) + _VALUE_BYTES
        parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        sizes = np.bincount(parents, weights=items, minlength=len(array)).astype(np.int64)
    elif pa.types.is_struct(kind):
        sizes = sum((_sizes(field) for field in array.flatten()), np.zeros(len(array), dtype=np.int64))
    else:
        sizes = np.full(len(array), _VALUE_BYTES, dtype=np.int64)
    if array.null_count:
        sizes = np.where(array.is_null().to_numpy(zero_copy_only=False), 0, sizes)
    return np.asarray(sizes, dtype=np.int64)
