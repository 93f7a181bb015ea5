"""JSON lists, CSV and Parquet files are streamed: read in bounded memory whatever their size
(measured as the peak resident memory of a process that reads them), each row bounded like a
JSONL line, the same records as a whole-file read for a normal file, and every error naming the
file and saying why."""

import csv
import io
import json
import re
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localjury.errors import ConfigError, RecordError
from localjury.records import readers
from localjury.records.readers import iter_records
from localjury.records.record import Record, parse_record

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MiB = 1 << 20

# --- Bounded memory ---------------------------------------------------------------------------

#: Reads a dataset in a process of its own and prints its records and how far its peak resident
#: memory rose while reading (MiB), the modules the readers use imported first.
PEAK = """
import sys
import pandas, pyarrow.parquet
from localjury.records.readers import iter_records
def peak():
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM"))) // 1024
before = peak()
records = sum(1 for _ in iter_records(sys.argv[1]))
print(records, peak() - before)
"""


def read_in_a_process(path):
    done = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    records, rise = map(int, done.stdout.split())
    return records, rise


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")


@linux_only
def test_a_small_parquet_file_of_a_long_repeated_string_reads_in_bounded_memory(tmp_path):
    """20,000 rows of one 64 KB string: 1.3 GB of text, stored once in each row group's
    dictionary (a file of about 64 KB); the whole-file read held all of it, twice. Written as 20
    row groups of one 1,000-row block (64 MB): building the 1.3 GB column here took 13-30 s."""
    path = tmp_path / "d.parquet"
    block = pa.table({"response": pa.repeat(pa.scalar("y" * 65536), 1_000)})
    with pq.ParquetWriter(path, block.schema) as writer:
        for _ in range(20):
            writer.write_table(block)
    assert path.stat().st_size < 100_000
    records, rise = read_in_a_process(path)
    assert records == 20_000
    assert rise < 300  # MiB; reading it whole takes over 2,500


@linux_only
@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_a_large_csv_or_json_list_reads_in_bounded_memory(tmp_path, suffix):
    """100 MB of records: a whole-file read held the file and its parsed rows (200-400 MB)."""
    path = tmp_path / f"d{suffix}"
    text = "y" * 20_000
    with path.open("w") as fh:
        if suffix == ".csv":
            fh.write("id,response\n" + "".join(f"r{i},{text}\n" for i in range(5000)))
        else:
            fh.write("[" + ",".join(json.dumps({"id": f"r{i}", "response": text}) for i in range(5000)) + "]")
    records, rise = read_in_a_process(path)
    assert records == 5000
    assert rise < 100  # MiB


# --- The same records as a whole-file read ----------------------------------------------------


def outcome(entry):
    """A record or an error, as comparable values."""
    if isinstance(entry, Record):
        return "record", entry.id, entry.model_dump(), entry._location
    return "error", str(entry)


def parsed(rows, name, *, csv_cells=False):
    out = []
    for i, row in enumerate(rows, start=1):
        try:
            out.append(parse_record(row, location=f"{name} row {i}", csv_cells=csv_cells))
        except RecordError as exc:
            out.append(exc)
    return [outcome(e) for e in out]


text = st.text(max_size=30) | st.sampled_from(['"', "\\", '\\"', "[", "]", "{", "}", ",", "é", "👩‍👧", "\n"])
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
rows = st.fixed_dictionaries(
    {"response": text}, optional={"id": text | st.integers(), "retrieved_contexts": st.lists(text, max_size=3)}
)


@FAST
@given(items=st.lists(rows | values, max_size=6), indent=st.sampled_from([None, 0, 2]), block=st.integers(1, 9))
def test_a_json_list_is_read_item_by_item_as_a_whole_read_reads_it(tmp_path_factory, monkeypatch, items, indent, block):
    """Whatever the items hold (quotes, escapes, brackets in strings, nesting) and wherever
    the file's blocks end, the items are those of ``json.loads`` of the whole file."""
    from localjury.records import _tables

    monkeypatch.setattr(_tables, "_READ_BYTES", block)
    path = tmp_path_factory.mktemp("json") / "d.json"
    path.write_text(json.dumps(items, indent=indent, ensure_ascii=False), encoding="utf-8")
    assert [outcome(e) for e in iter_records(path)] == parsed(json.loads(path.read_text()), "d.json")


@FAST
@given(table=st.lists(st.lists(text, min_size=3, max_size=3), max_size=600))
def test_a_csv_file_is_read_chunk_by_chunk_as_a_whole_read_reads_it(tmp_path_factory, table):
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["id", "response", "retrieved_contexts"])
    writer.writerows(table)
    path = tmp_path_factory.mktemp("csv") / "d.csv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[], encoding="utf-8-sig")
    except ValueError:
        return  # not CSV pandas reads (an empty file): a configuration error either way
    expected = parsed(frame.to_dict(orient="records"), "d.csv", csv_cells=True)
    assert [outcome(e) for e in iter_records(path)] == expected


def test_a_parquet_file_is_read_batch_by_batch_as_a_whole_read_reads_it(tmp_path, monkeypatch):
    from localjury.records import _tables

    monkeypatch.setattr(_tables, "BATCH_BYTES", 300)  # a few rows a batch, many row groups
    table = pa.table(
        {
            "id": [f"r{i}" if i % 7 else None for i in range(500)],
            "response": pa.array([f"answer {i % 5}" * (i % 13) for i in range(500)]).dictionary_encode(),
            "retrieved_contexts": [[f"c{i}"] * (i % 4) if i % 3 else None for i in range(500)],
            "score": list(range(500)),
        }
    )
    path = tmp_path / "d.parquet"
    pq.write_table(table, path, row_group_size=64)
    expected = parsed(pq.read_table(path).to_pylist(), "d.parquet")
    assert [outcome(e) for e in iter_records(path)] == expected


# --- Each row bounded like a JSONL line --------------------------------------------------------


def write(path, rows):
    if path.suffix == ".json":
        path.write_text(json.dumps(rows))
    elif path.suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.mark.parametrize(
    ("suffix", "what"),
    [(".json", "item is 5,0\\d\\d bytes, over the 1,000-byte bound on a record of a JSON list; it is skipped unread"),
     (".csv", "row is 5,0\\d\\d bytes, over the 1,000-byte bound on a CSV record; it is skipped"),
     (".parquet", "row is 5,0\\d\\d bytes, over the 1,000-byte bound on a Parquet record; it is skipped")],
)  # fmt: skip
def test_a_row_over_the_bound_is_its_error_and_the_others_are_read(tmp_path, monkeypatch, suffix, what):
    monkeypatch.setattr(readers, "MAX_LINE_BYTES", 1000)
    path = tmp_path / f"d{suffix}"
    write(path, [{"id": "a", "response": "1989"}, {"id": "long", "response": "x" * 5000}, {"id": "c", "response": "z"}])
    a, long, c = iter_records(path)
    assert (a.id, c.id) == ("a", "c")
    assert isinstance(long, RecordError) and long.location == f"d{suffix} row 2"
    assert long.record_id == "long" if suffix != ".json" else long.record_id.startswith("raw-")
    assert re.search(what, str(long)), str(long)


def test_a_json_item_over_the_bound_is_read_past_at_any_block_boundary(tmp_path, monkeypatch):
    from localjury.records import _tables

    monkeypatch.setattr(readers, "MAX_LINE_BYTES", 100)
    monkeypatch.setattr(_tables, "_READ_BYTES", 7)
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"id": "a", "response": "x"}, {"response": '"[{,' * 60}, {"id": "c", "response": "z"}]))
    a, long, c = iter_records(path)
    assert (a.id, c.id) == ("a", "c") and "over the 100-byte bound" in str(long)


# --- Errors that name the file and say why -----------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "it is empty"),
        (b"  7", "it starts with b'7', not a list"),
        (b'[{"id": "a", "response": "x"}] extra', "text after the list's closing bracket"),
        (b'[{"id": "a", "response": "x"},', "it ends before the list is closed"),
        (b'[{"id": "a", "response": "x"}}', "a '}' closes the list"),
    ],
)
def test_a_json_file_that_is_not_one_list_is_a_config_error_naming_it(tmp_path, content, message):
    path = tmp_path / "d.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=rf"cannot read .*d.json as a JSON list of records: {message}"):
        list(iter_records(path))


def test_an_item_that_is_not_json_is_its_error_and_the_others_are_read(tmp_path):
    path = tmp_path / "d.json"
    path.write_bytes(b'[{"id": "a", "response": "x"}, {"id": nope}, "\xff", {"id": "c", "response": "z"}]')
    a, nope, bad_utf8, c = iter_records(path)
    assert (a.id, c.id) == ("a", "c")
    assert "not valid JSON" in str(nope) and nope.location == "d.json row 2"
    assert "not valid UTF-8" in str(bad_utf8)


def test_a_parquet_error_without_words_still_says_what_failed(tmp_path, monkeypatch):
    path = tmp_path / "d.parquet"
    write(path, [{"id": "a", "response": "x"}])

    def fail(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", fail)
    monkeypatch.setattr(pq, "read_table", fail)
    with pytest.raises(ConfigError, match=r"cannot read .*d.parquet as Parquet: MemoryError$"):
        list(iter_records(path))
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(ConfigError, match=r"cannot read .*d.parquet as Parquet: \w+"):
        list(iter_records(path))


@FAST
@given(body=st.binary(max_size=300), block=st.integers(1, 9))
def test_any_bytes_in_a_json_list_are_records_named_errors_or_one_config_error(
    tmp_path_factory, monkeypatch, body, block
):
    from localjury.records import _tables

    monkeypatch.setattr(_tables, "_READ_BYTES", block)
    path = tmp_path_factory.mktemp("junk") / "d.json"
    path.write_bytes(b"[" + body)
    try:
        entries = list(iter_records(path))
    except ConfigError as exc:
        assert str(exc).startswith(f"cannot read {path} as a JSON list of records: ")
        return
    assert all(isinstance(e, Record) or (isinstance(e, RecordError) and e.record_id) for e in entries)
