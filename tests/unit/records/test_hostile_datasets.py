"""Datasets built to hurt the reader: Parquet files whose dictionaries expand a few KB on disk to
terabytes as Python strings, row groups whose dictionaries would hold every distinct value, and
Hugging Face ``save_to_disk`` folders whose ``state.json`` names files outside the folder, devices
or FIFOs. Each bad row is its record's error (naming the file and the row), the good rows are
still read, and a folder that names what is not its own is refused before ``datasets`` opens it."""

import json
import os
import shutil
import signal
import sys
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from localjury.errors import ConfigError, RecordError
from localjury.records import _parquet, _tables, readers
from localjury.records.readers import iter_records
from localjury.records.record import Record

MiB = 1 << 20


@contextmanager
def deadline(seconds):
    """Fail, rather than hang, where a read waits on a FIFO."""

    def fail(*_):
        raise TimeoutError(f"still running after {seconds} s (waiting on a FIFO?)")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# --- Parquet dictionaries ---------------------------------------------------------------------


def bomb(path, rows, refs, long_bytes, *, good_every=0, flat=False):
    """A Parquet file whose ``retrieved_contexts`` (or, ``flat``, ``response``) references one
    ``long_bytes`` string of its dictionary ``refs`` times a row (once, flat); every
    ``good_every``-th row references a short entry instead."""
    dictionary = pa.array(["x" * long_bytes, "a short context"])
    good = np.zeros(rows, dtype=bool)
    if good_every:
        good[::good_every] = True
    ids = [f"r{i}" for i in range(rows)]
    if flat:
        column = pa.DictionaryArray.from_arrays(pa.array(good.astype(np.int32)), dictionary)
        table = pa.table({"id": ids, "user_input": ["q"] * rows, "response": column})
    else:
        indices = np.repeat(good.astype(np.int32), refs)
        offsets = pa.array(np.arange(0, rows * refs + 1, refs, dtype=np.int32))
        contexts = pa.ListArray.from_arrays(offsets, pa.DictionaryArray.from_arrays(indices, dictionary))
        table = pa.table(
            {"id": ids, "user_input": ["q"] * rows, "response": ["a"] * rows, "retrieved_contexts": contexts}
        )
    pq.write_table(table, path, compression="zstd", dictionary_pagesize_limit=2 * long_bytes + MiB)
    return good


def test_a_dictionary_list_bomb_of_terabytes_is_read_in_seconds_each_row_its_error(tmp_path):
    """2,000 rows, each a list of 2,000 references to one 1 MB string: 4 TB as Python strings,
    a few KB on disk. Each row is measured from its indices (2 GB, over the bound) and is its
    error; the rows that reference the short entry are read."""
    path = tmp_path / "bomb.parquet"
    good = bomb(path, 2000, 2000, MiB, good_every=500)
    assert path.stat().st_size < 100_000
    with deadline(120):
        entries = list(iter_records(path))
    assert len(entries) == 2000
    records = [e for e in entries if isinstance(e, Record)]
    assert [r.id for r in records] == [f"r{i}" for i in np.flatnonzero(good)]
    assert records[0].retrieved_contexts == ["a short context"] * 2000
    second = entries[1]
    assert isinstance(second, RecordError) and second.location == "bomb.parquet row 2" and second.record_id == "r1"
    assert "the row is 2,097,168,004 bytes, over the 1,073,741,824-byte bound on a Parquet record" in str(second)


@pytest.mark.parametrize("flat", [False, True], ids=["list column", "string column"])
def test_a_dictionary_bomb_over_a_lowered_bound_is_measured_before_it_is_decoded(tmp_path, monkeypatch, flat):
    """With the bound at 100 KB, rows that reference a 200 KB entry are errors; the string is
    never copied out of its dictionary for them (no batch decodes it as plain strings)."""
    monkeypatch.setattr(readers, "MAX_LINE_BYTES", 100_000)
    path = tmp_path / "d.parquet"
    good = bomb(path, 300, 50, 200_000, good_every=3, flat=flat)
    decoded = []
    iter_batches = pq.ParquetFile.iter_batches

    def watched(self, *args, **kwargs):
        for batch in iter_batches(self, *args, **kwargs):
            decoded.append(max((c.nbytes for c in batch.columns), default=0))
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", watched)
    entries = list(iter_records(path))
    assert [isinstance(e, Record) for e in entries] == good.tolist()
    bad = entries[1]
    assert isinstance(bad, RecordError) and bad.location == "d.parquet row 2" and bad.record_id == "r1"
    assert "over the 100,000-byte bound on a Parquet record" in str(bad)
    assert max(decoded) < 2 * MiB  # as plain strings, a batch would hold several 200 KB copies


@pytest.mark.parametrize("lead", [[], None], ids=["empty list", "null"])
def test_a_bomb_behind_a_first_row_without_contexts_is_still_read_as_its_dictionary(tmp_path, monkeypatch, lead):
    """The plan learns a column's longest dictionary entry from the row group's first row;
    where that row holds no value of it, the dictionary is not known, and it is read as one."""
    monkeypatch.setattr(readers, "MAX_LINE_BYTES", 100_000)
    dictionary = pa.array(["x" * 200_000])
    contexts = pa.ListArray.from_arrays(
        pa.array([0, 0, 50, 100], mask=np.array([lead is None, False, False, False])),
        pa.DictionaryArray.from_arrays(pa.array(np.zeros(100, dtype=np.int32)), dictionary),
    )
    path = tmp_path / "d.parquet"
    table = pa.table({"id": ["a", "b", "c"], "response": ["x", "y", "z"], "retrieved_contexts": contexts})
    pq.write_table(table, path, dictionary_pagesize_limit=MiB)
    with path.open("rb") as fh:
        meta = pq.ParquetFile(fh).metadata
        plan = _parquet._group_plan(fh, meta, 0, _parquet._text_columns(meta), 100_000)
    assert plan[0] == ["retrieved_contexts.list.element"]
    first, second, third = iter_records(path)
    assert isinstance(first, Record) and first.id == "a"
    assert isinstance(second, RecordError) and second.location == "d.parquet row 2" and second.record_id == "b"
    assert isinstance(third, RecordError) and third.location == "d.parquet row 3"


def test_a_json_column_is_measured_as_its_text_and_read_as_its_dictionary(tmp_path, monkeypatch):
    """A column of Parquet's JSON type (Arrow's json extension type) was measured at 8 bytes a
    value, and never read as a dictionary: now it is text like any other."""
    monkeypatch.setattr(readers, "MAX_LINE_BYTES", 100_000)
    long = json.dumps("x" * 200_000)
    values = pa.array([long if i % 3 else '"short"' for i in range(60)])
    table = pa.table(
        {"id": [f"r{i}" for i in range(60)], "response": pa.ExtensionArray.from_storage(pa.json_(), values)}
    )
    path = tmp_path / "d.parquet"
    pq.write_table(table, path, compression="zstd")
    assert path.stat().st_size < 20_000
    entries = list(iter_records(path))
    assert [isinstance(e, Record) for e in entries] == [i % 3 == 0 for i in range(60)]
    assert entries[0].response == '"short"'
    assert entries[1].location == "d.parquet row 2" and "the row is 200,004 bytes, over the 100,000-byte" in str(
        entries[1]
    )


def distinct_rows(rows):
    return {
        "id": [f"r{i}" for i in range(rows)],
        "response": [f"answer number {i}" for i in range(rows)],
        "retrieved_contexts": [[f"context {i}", f"another context {i}"] if (i + 1) % 5 else [] for i in range(rows)],
    }


def test_a_large_row_group_of_distinct_texts_is_read_as_plain_strings(tmp_path):
    """A dictionary read keeps every distinct value of a row group once its writer falls back
    to plain pages: 1,000,000 such rows in one group held 656 MB. Short texts are read plain."""
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table(distinct_rows(200_000)), path, row_group_size=200_000)
    with path.open("rb") as fh:
        meta = pq.ParquetFile(fh).metadata
        assert meta.num_row_groups == 1 and meta.row_group(0).column(2).has_dictionary_page
        dictionaries, rows = _parquet._group_plan(fh, meta, 0, _parquet._text_columns(meta), readers.MAX_LINE_BYTES)
    assert dictionaries == [] and rows == _tables.PARQUET_BATCH_ROWS


@pytest.mark.parametrize("batch_bytes", [300, 5000, 16 * MiB])
def test_a_dictionary_read_that_grows_goes_on_as_plain_strings_with_the_same_rows(tmp_path, monkeypatch, batch_bytes):
    """Forced to start as dictionaries and to switch at the first growth, the reader reads the
    rows again as plain strings from where it stood: the same records, in order, none twice."""
    monkeypatch.setattr(_parquet, "PLAIN_CHUNK_BYTES", 0)
    monkeypatch.setattr(_parquet, "GROWN_BYTES", 0)
    monkeypatch.setattr(_tables, "BATCH_BYTES", batch_bytes)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table(distinct_rows(3000)), path, row_group_size=1500, dictionary_pagesize_limit=2000)
    switched = []
    grown = _parquet._grown
    monkeypatch.setattr(_parquet, "_grown", lambda *a: switched.append(out := grown(*a)) or out)
    entries = list(iter_records(path))
    expected = pq.read_table(path).to_pylist()
    assert [(e.id, e.response, e.retrieved_contexts) for e in entries] == [
        (r["id"], r["response"], r["retrieved_contexts"]) for r in expected
    ]
    assert [e._location for e in entries[:2]] == ["d.parquet row 1", "d.parquet row 2"]
    assert any(switched)


# --- Hugging Face save_to_disk folders ---------------------------------------------------------

datasets = pytest.importorskip("datasets")
ROWS = [{"id": f"r{i}", "user_input": "q", "response": f"answer {i}"} for i in range(5)]


@pytest.fixture
def saved(tmp_path):
    folder = tmp_path / "saved"
    datasets.Dataset.from_list(ROWS).save_to_disk(str(folder))
    return folder


def name_in_state(folder, filename):
    state = json.loads((folder / "state.json").read_text())
    state["_data_files"] = [{"filename": filename}]
    (folder / "state.json").write_text(json.dumps(state))


@pytest.fixture
def no_datasets_load(monkeypatch):
    """Fail where the folder reaches datasets.load_from_disk: the check comes first."""

    def load(*args, **kwargs):
        raise AssertionError("datasets.load_from_disk was called")

    monkeypatch.setattr(datasets, "load_from_disk", load)


@pytest.mark.parametrize(
    ("filename", "why"),
    [
        ("../../etc/passwd", "a path outside the folder"),
        ("/etc/passwd", "a path outside the folder"),
        ("/dev/zero", "a path outside the folder"),
        ("sub/../../x.arrow", "a path outside the folder"),
        ("", "not a file name"),
        (7, "not a file name"),
    ],
)
def test_state_json_naming_a_file_outside_the_folder_is_refused_before_datasets_reads(
    saved, no_datasets_load, filename, why
):
    name_in_state(saved, filename)
    with pytest.raises(ConfigError, match=rf"{saved}: state\.json names the file {repr(filename)[:40]!s}.*, {why}"):
        list(iter_records(saved))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "link out", "folder"])
def test_state_json_naming_a_special_file_or_a_link_out_is_refused(saved, no_datasets_load, tmp_path, kind):
    target = saved / "data.arrow"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "link to /dev/zero":
        target.symlink_to("/dev/zero")
    elif kind == "link out":
        outside = tmp_path / "outside.arrow"
        outside.write_bytes(b"secret")
        target.symlink_to(outside)
    else:
        target.mkdir()
    name_in_state(saved, "data.arrow")
    why = "leads outside the folder" if kind in ("link out", "link to /dev/zero") else "not a regular file"
    with deadline(30), pytest.raises(ConfigError, match=rf"{saved}: state\.json names the file 'data\.arrow'.*{why}"):
        list(iter_records(saved))


def test_a_state_json_that_is_huge_or_a_link_out_is_not_read(saved, no_datasets_load, monkeypatch, tmp_path):
    from localjury.records import _saved

    monkeypatch.setattr(_saved, "MAX_STATE_BYTES", 100)
    with pytest.raises(ConfigError, match=rf"{saved}: state\.json is [0-9,]+ bytes, over the 100-byte bound"):
        list(iter_records(saved))
    monkeypatch.undo()
    outside = tmp_path / "state.json"
    shutil.move(saved / "state.json", outside)
    (saved / "state.json").symlink_to(outside)
    with pytest.raises(ConfigError, match=rf"{saved}: holds 'state\.json'.*leads outside the folder"):
        list(iter_records(saved))


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("{not json", r"state\.json is not read: not valid JSON"),
        ('{"_data_files": "data.arrow"}', r"state\.json has no list of at most 10,000 data files"),
        (
            '{"_data_files": [{"filename": "gone.arrow"}]}',
            r"state\.json names the file 'gone\.arrow', which cannot be read",
        ),
    ],
)
def test_a_state_json_that_is_not_what_save_to_disk_writes_is_refused(saved, no_datasets_load, state, message):
    (saved / "state.json").write_text(state)
    with pytest.raises(ConfigError, match=rf"{saved}: {message}"):
        list(iter_records(saved))


def test_a_dataset_dict_naming_a_split_outside_the_folder_is_refused(tmp_path, no_datasets_load):
    folder = tmp_path / "dict"
    datasets.DatasetDict({"test": datasets.Dataset.from_list(ROWS)}).save_to_disk(str(folder))
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": ["../../etc"]}))
    with pytest.raises(ConfigError, match=rf"{folder}: dataset_dict\.json names the split '\.\./\.\./etc'"):
        list(iter_records(folder))
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": "test"}))
    with pytest.raises(ConfigError, match=rf"{folder}: dataset_dict\.json has no list of splits"):
        list(iter_records(folder))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_the_folder_does_not_name_neither_hangs_the_read_nor_the_hash(saved):
    """A FIFO beside the data files: the records are read, the manifest's hash of the folder
    leaves it out, and a dry run plans the records."""
    from localjury import AspectCritic, dry_run
    from localjury._hashing import dataset_files, folder_sha256
    from tests.fakes import ScriptedEngine, factory, judgment, spec

    os.mkfifo(saved / "pipe")
    (saved / "zero").symlink_to("/dev/zero")
    with deadline(60):
        assert [e.id for e in iter_records(saved)] == [r["id"] for r in ROWS]
        assert saved / "pipe" not in dataset_files(saved) and len(folder_sha256(saved)) == 64
        plan = dry_run(
            saved,
            [AspectCritic("dated", "The response must include a date.")],
            [spec("A")],
            estimate=0,
            engine_factory=factory(lambda m, p, j: judgment(1), []),
            tokenizer_factory=lambda s: ScriptedEngine(s, lambda m, p, j: judgment(1), []),
        )
    assert plan.models[0].records == len(ROWS)


def test_a_sound_folder_is_still_read(saved):
    assert [e.id for e in iter_records(saved)] == [r["id"] for r in ROWS]


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="FIFOs, symbolic links and SIGALRM")
