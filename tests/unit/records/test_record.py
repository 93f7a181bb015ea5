import json
import os
import pickle
import re
import socket
import threading

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localjury._files import read_yaml
from localjury.errors import ConfigError, RecordError
from localjury.records.readers import iter_records
from localjury.records.record import Record, coerce_records, content_id, dedupe, parse_record


def write_jsonl(path, lines):
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines))
    return path


def test_canonical_fields_and_given_id():
    r = parse_record({"id": 7, "user_input": "q", "response": "a", "retrieved_contexts": ["c"], "reference": "r"})
    assert r == Record(id="7", user_input="q", response="a", retrieved_contexts=["c"], reference="r")


def test_aliases_map_to_current_names():
    r = parse_record({"question": "q", "answer": "a", "contexts": ["c1", "c2"], "ground_truth": "g"})
    assert (r.user_input, r.response, r.retrieved_contexts, r.reference) == ("q", "a", ["c1", "c2"], "g")


def test_alias_and_name_that_disagree_are_an_error():
    with pytest.raises(RecordError, match="field 'response': given both as 'response' and as its alias 'answer'"):
        parse_record({"response": "a", "answer": "b"})


def test_content_hash_id_is_stable_and_content_sensitive():
    a = parse_record({"question": "q", "answer": "a"})
    b = parse_record({"user_input": "q", "response": "a", "extra": 1})
    c = parse_record({"user_input": "q", "response": "a!"})
    assert a.id == b.id == content_id({"user_input": "q", "response": "a"})
    assert len(a.id) == 16 and a.id != c.id


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({"user_input": "q"}, "response", "missing"),
        ({"response": 3}, "response", "must be a string, got int"),
        ({"response": "a", "user_input": ["x"]}, "user_input", "must be a string, got list"),
        ({"response": "a", "retrieved_contexts": "one passage"}, "retrieved_contexts", "must be a list of strings"),
        ({"response": "a", "contexts": ["ok", 5]}, "retrieved_contexts", "item 1 must be a string, got int"),
        ({"response": "a", "id": 1.5}, "id", "must be a string or an integer"),
        ({"response": "a", "id": "  "}, "id", "must not be empty"),
    ],
)
def test_bad_records_name_record_and_field(raw, field, message):
    with pytest.raises(RecordError, match=message) as info:
        parse_record(raw, location="line 3")
    assert info.value.field == field
    assert "(line 3)" in str(info.value) and f"field {field!r}" in str(info.value)


def test_jsonl_keeps_going_past_bad_lines(tmp_path):
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [
            '{"id": "a", "user_input": "q", "response": "r"}',
            "{not json",
            b'{"id": "c", "response": "\xff\xfe"}',
            "",
            "[1, 2]",
            '{"id": "e", "user_input": "q"}',
            '{"id": "f", "answer": "ok"}',
        ],
    )
    entries = list(iter_records(path))
    assert [type(e).__name__ for e in entries] == [
        "Record",
        "RecordError",
        "RecordError",
        "RecordError",
        "RecordError",
        "Record",
    ]
    assert "line 2" in str(entries[1]) and "not valid JSON" in str(entries[1])
    assert "line 3" in str(entries[2]) and "not valid UTF-8" in str(entries[2])
    assert "expected a JSON object, got list" in str(entries[3])
    assert entries[4].record_id == "e" and entries[4].field == "response"
    assert entries[5].id == "f"


def test_csv_with_json_contexts_and_empty_cells(tmp_path):
    path = tmp_path / "d.csv"
    pd.DataFrame(
        [
            {"id": "1", "question": "q1", "answer": "a1", "contexts": json.dumps(["c1", "c2"]), "reference": ""},
            {"id": "2", "question": "q2", "answer": "a2", "contexts": "", "reference": "ref"},
            {"id": "3", "question": "q3", "answer": "a3", "contexts": "c1, c2", "reference": ""},
            {"id": "4", "question": "q4", "answer": "", "contexts": "", "reference": ""},
        ]
    ).to_csv(path, index=False)
    e1, e2, e3, e4 = iter_records(path)
    assert e1.retrieved_contexts == ["c1", "c2"] and e1.reference is None
    assert e2.retrieved_contexts is None and e2.reference == "ref"
    assert isinstance(e3, RecordError) and e3.field == "retrieved_contexts" and "JSON list" in str(e3)
    assert isinstance(e4, RecordError) and e4.field == "response"


def test_parquet_with_list_column(tmp_path):
    path = tmp_path / "d.parquet"
    pd.DataFrame(
        [
            {"user_input": "q", "response": "a", "retrieved_contexts": ["x", "y"]},
            {"user_input": "q2", "response": None, "retrieved_contexts": None},
        ]
    ).to_parquet(path)
    good, bad = iter_records(path)
    assert good.retrieved_contexts == ["x", "y"]
    assert isinstance(bad, RecordError) and bad.field == "response" and "row 2" in str(bad)


def test_json_list_file(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"response": "a"}, {"response": None}]))
    good, bad = iter_records(path)
    assert good.response == "a" and isinstance(bad, RecordError)


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"unsupported dataset format '.txt'"):
        list(iter_records(write_jsonl(tmp_path / "d.txt", ["x"])))
    with pytest.raises(ConfigError, match="dataset file not found"):
        list(iter_records(tmp_path / "nope.jsonl"))


def test_duplicate_ids_become_errors():
    entries = list(dedupe([Record(id="a", response="x"), Record(id="a", response="y"), Record(id="b", response="z")]))
    assert isinstance(entries[1], RecordError) and "duplicate id" in str(entries[1])
    assert [e.id for e in entries if isinstance(e, Record)] == ["a", "b"]


# --- A leading UTF-8 byte order mark (Notepad, Excel's "CSV UTF-8") ------------------------------

BOM = "\ufeff"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("d.jsonl", BOM + '{"id": "1", "response": "a"}\n{"id": "2", "response": "b"}\n'),
        ("d.json", BOM + '[{"id": "1", "response": "a"}, {"id": "2", "response": "b"}]'),
        ("d.csv", BOM + "id,response\n1,a\n2,b\n"),
        ("q.csv", BOM + '"id","response"\n"1","a"\n"2","b"\n'),
    ],
)
def test_a_leading_bom_is_ignored_in_every_text_format(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    entries = list(iter_records(path))
    assert entries == [Record(id="1", response="a"), Record(id="2", response="b")]


def test_a_bom_does_not_change_a_records_id(tmp_path):
    plain, bom = tmp_path / "plain.jsonl", tmp_path / "bom.jsonl"
    plain.write_text('{"question": "q", "answer": "a"}\n', encoding="utf-8")
    bom.write_text(BOM + '{"question": "q", "answer": "a"}\n', encoding="utf-8")
    assert [r.id for r in iter_records(bom)] == [r.id for r in iter_records(plain)]


def test_yaml_files_may_start_with_a_bom(tmp_path):
    path = tmp_path / "criteria.yaml"
    path.write_text(BOM + "dated: The response names a date.\n", encoding="utf-8")
    assert read_yaml(path, "criteria file") == {"dated": "The response names a date."}


# --- Duplicates name both places ----------------------------------------------------------------


def test_a_duplicate_id_names_its_own_place_and_the_first_records(tmp_path):
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [
            '{"id": "x", "response": "a"}',
            '{"question": "q", "answer": "same"}',
            '{"id": "dup", "response": "first"}',
            '{"id": "y", "response": "b"}',
            "",
            '{"user_input": "q", "response": "same"}',
            '{"id": "dup", "response": "second"}',
        ],
    )
    entries = list(dedupe(iter_records(path)))
    assert [type(e).__name__ for e in entries] == ["Record", "Record", "Record", "Record", "RecordError", "RecordError"]
    content, dup = entries[4], entries[5]
    assert dup.location == "d.jsonl line 7" and dup.field == "id" and dup.record_id == "dup"
    assert str(dup).startswith("record 'dup' (d.jsonl line 7), field 'id': duplicate id: the same id as d.jsonl line 3")
    assert "(or, without ids, the same content)" in str(dup)
    assert content.location == "d.jsonl line 6" and "the same id as d.jsonl line 2" in str(content)


def test_duplicates_in_csv_and_python_records_name_rows_and_items(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,response\n1,a\n2,b\n1,c\n", encoding="utf-8")
    *_, dup = dedupe(iter_records(path))
    assert dup.location == "d.csv row 3" and "the same id as d.csv row 1" in str(dup)
    items = [Record(id="a", response="x"), {"id": "b", "response": "y"}, {"id": "a", "response": "z"}]
    *_, dup = dedupe(coerce_records(items))
    assert dup.location == "item 3" and "the same id as item 1" in str(dup)
    *_, dup = dedupe(coerce_records([{"id": "b", "response": "y"}, Record(id="b", response="x")]))
    assert dup.location == "item 2" and "the same id as item 1" in str(dup)


def test_a_records_place_is_not_part_of_its_value():
    raw = {"id": "a", "question": "q", "answer": "x"}
    one, two = parse_record(raw, location="d.jsonl line 1"), parse_record(raw, location="e.jsonl line 9")
    assert one == two and hash(one) == hash(two) and one == Record(id="a", user_input="q", response="x")
    assert one.model_dump() == Record(id="a", user_input="q", response="x").model_dump()
    assert "line" not in one.model_dump_json() and "line" not in repr(one)
    assert pickle.loads(pickle.dumps(one)) == one
    given = Record(id="a", response="x")
    list(dedupe(coerce_records([given, given])))
    _, dup = dedupe([given, given])  # reading a record given in Python did not change it
    assert dup.location is None and "duplicate id: an earlier record has the same id" in str(dup)


# --- Paths that are not regular files -----------------------------------------------------------


def test_a_folder_is_not_a_dataset_file(tmp_path):
    folder = tmp_path / "data.jsonl"
    folder.mkdir()
    with pytest.raises(ConfigError, match=r"data.jsonl is a folder, not a dataset file; give the path of a \.jsonl"):
        list(iter_records(folder))


def _mkfifo(path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(path)
    return path


def _without_blocking(fifo, call):
    """Run ``call``; should it block on ``fifo``, unblock it and fail the test."""
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # a writer that closes: the reader sees EOF
        thread.join(5)
        pytest.fail(f"opened the FIFO {fifo} and waited for a writer")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def test_a_fifo_is_refused_without_being_opened(tmp_path):
    fifo = _mkfifo(tmp_path / "d.jsonl")
    with pytest.raises(ConfigError, match=r"d.jsonl is not a regular file \(a FIFO\)"):
        _without_blocking(fifo, lambda: list(iter_records(fifo)))


def test_a_socket_is_not_a_dataset_file(tmp_path):
    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no Unix sockets on this platform")
    path = tmp_path / "s.csv"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(ConfigError, match=r"s.csv is not a regular file \(a socket\)"):
            list(iter_records(path))


def test_a_path_through_a_file_cannot_be_read(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"cannot read dataset file .*file/d.jsonl: Not a directory"):
        list(iter_records(tmp_path / "file" / "d.jsonl"))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may read any file")
def test_an_unreadable_dataset_file_is_a_config_error(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", ['{"response": "a"}'])
    path.chmod(0)
    with pytest.raises(ConfigError, match=r"cannot read dataset file .*d.jsonl: Permission denied; check its perm"):
        list(iter_records(path))
    yaml_path = tmp_path / "c.yaml"
    yaml_path.write_text("a: 1\n")
    yaml_path.chmod(0)
    with pytest.raises(ConfigError, match=r"cannot read criteria file .*c.yaml: Permission denied; check its perm"):
        read_yaml(yaml_path, "criteria file")


def test_yaml_paths_that_are_not_regular_files_are_config_errors(tmp_path):
    folder = tmp_path / "criteria.yaml"
    folder.mkdir()
    with pytest.raises(ConfigError, match=r"criteria.yaml is a folder, not a criteria file"):
        read_yaml(folder, "criteria file")
    fifo = _mkfifo(tmp_path / "models.yaml")
    with pytest.raises(ConfigError, match=r"models.yaml is not a regular file \(a FIFO\)"):
        _without_blocking(fifo, lambda: read_yaml(fifo, "models registry"))
    with pytest.raises(ConfigError, match=r"cannot read criteria file .*models.yaml/c.yaml: Not a directory"):
        read_yaml(fifo / "c.yaml", "criteria file")
    with pytest.raises(ConfigError, match=r"criteria file not found: .*nope.yaml"):
        read_yaml(tmp_path / "nope.yaml", "criteria file")


def test_yaml_that_is_not_utf8_or_nested_too_deeply_is_a_config_error(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"dated: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"criteria file .*c.yaml is not valid UTF-8 \(byte 10"):
        read_yaml(path, "criteria file")
    path.write_text("a: " + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match=r"criteria file .*c.yaml is not read: line 1 is nested more than 64 levels"):
        read_yaml(path, "criteria file")
    path.write_text("a: " + "1" * 5000)
    with pytest.raises(ConfigError, match=r"criteria file .*c.yaml holds a value YAML cannot convert"):
        read_yaml(path, "criteria file")


# --- Deep nesting, cycles, and values that json cannot hold -------------------------------------

DEEP = 100_000
DEEP_ARRAY = "[" * DEEP + "]" * DEEP
DEEP_OBJECT = '{"a": ' * DEEP + "1" + "}" * DEEP


def nested(depth, leaf="x"):
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_line_nested_too_deeply_is_a_record_error_and_the_next_lines_load(tmp_path):
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [
            '{"id": "a", "response": "x"}',
            DEEP_ARRAY,
            '{"response": ' + DEEP_OBJECT + "}",
            '{"id": "b", "response": "y", "meta": ' + "[" * 500 + "]" * 500 + "}",
            '{"id": "c", "response": "z"}',
        ],
    )
    a, deep_array, deep_object, b, c = iter_records(path)
    assert (a.id, b.id, c.id) == ("a", "b", "c")
    for error, line in ((deep_array, 2), (deep_object, 3)):
        assert isinstance(error, RecordError) and error.location == f"d.jsonl line {line}"
        assert "nested too deeply" in str(error) and error.record_id.startswith("raw-")


def test_an_item_of_a_json_list_nested_too_deeply_is_its_error_and_the_others_load(tmp_path):
    path = tmp_path / "d.json"
    path.write_text('[{"response": "a"}, ' + DEEP_ARRAY + ', {"id": "c", "response": "z"}]')
    a, deep, c = iter_records(path)
    assert a.response == "a" and c.id == "c"
    assert isinstance(deep, RecordError) and deep.location == "d.json row 2" and "nested too deeply" in str(deep)


def test_a_csv_contexts_cell_nested_too_deeply_is_a_record_error(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(f'id,response,contexts\n1,a,"{DEEP_ARRAY}"\n2,b,"[""c""]"\n', encoding="utf-8")
    bad, good = iter_records(path)
    assert isinstance(bad, RecordError) and bad.field == "retrieved_contexts" and "nested too deeply" in str(bad)
    assert good.retrieved_contexts == ["c"]


def test_python_records_nested_too_deeply_or_circular_are_record_errors():
    loop = {"id": "loop"}
    loop["response"] = loop
    anonymous_loop = {"answer": "a", "question": []}
    anonymous_loop["question"].append(anonymous_loop)
    contexts_loop = ["c"]
    contexts_loop.append(contexts_loop)
    items = [
        {"response": nested(DEEP)},
        nested(DEEP),
        loop,
        anonymous_loop,
        {"response": "a", "contexts": contexts_loop},
        {"response": "a", "answer": "a", "contexts": nested(DEEP), "retrieved_contexts": nested(DEEP)},
        {"id": "ok", "response": "fine", "meta": nested(DEEP)},
    ]
    *errors, ok = coerce_records(items)
    assert ok == Record(id="ok", response="fine")  # extra fields are the caller's business, however deep
    for i, error in enumerate(errors, start=1):
        assert isinstance(error, RecordError) and error.location == f"item {i}"
    assert errors[2].record_id == "loop" and errors[2].field == "response" and "got dict" in str(errors[2])
    assert errors[3].field == "user_input" and errors[3].record_id.startswith("raw-")
    assert errors[4].field == "retrieved_contexts" and "item 1 must be a string, got list" in str(errors[4])
    assert "nested too deeply" in str(errors[5])


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({"id": 10**5000, "response": "a"}, "id", r"more than 4300 digits; give the id as a string"),
        ({1: "x", "a": "y", "response": 3}, "response", "must be a string, got int"),
        ({("a",): "x", "response": None}, "response", "missing"),
        ({"response": "a\ud800b"}, "response", r"not valid Unicode: an unpaired surrogate '\\ud800' at character 1"),
        ({"id": "\udc00", "response": "a"}, "id", r"not valid Unicode: an unpaired surrogate '\\udc00' at character 0"),
        ({"response": "a", "contexts": ["ok", "\ud83d"]}, "retrieved_contexts", r"item 1 is not valid Unicode"),
    ],
)
def test_values_json_cannot_hold_are_record_errors(raw, field, message):
    (error,) = coerce_records([raw])
    assert isinstance(error, RecordError) and error.field == field and error.location == "item 1"
    assert re.search(message, str(error)), str(error)
    error.record_id.encode("utf-8")  # the id goes into results.jsonl: it must be writable


def test_jsonl_numbers_and_escapes_json_cannot_hold_are_record_errors(tmp_path):
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [
            '{"id": ' + "7" * 5000 + ', "response": "a"}',
            '{"id": "s", "response": "\\ud800"}',
            '{"id": "\\udfff", "response": "a"}',
            '{"id": "fine", "response": "\\ud83d\\ude00"}',
        ],
    )
    big, lone, lone_id, fine = iter_records(path)
    assert isinstance(big, RecordError) and big.location == "d.jsonl line 1" and "4300 digits" in str(big)
    assert isinstance(lone, RecordError) and lone.record_id == "s" and lone.field == "response"
    assert isinstance(lone_id, RecordError) and lone_id.field == "id" and lone_id.record_id.startswith("raw-")
    assert fine.response == "\U0001f600"


def test_ids_of_valid_records_do_not_change():
    # The judgment store and results key on these: a change would orphan every stored judgment.
    assert parse_record({"question": "q", "answer": "a"}).id == "5331704d1618610a"
    assert parse_record({"id": 7, "response": "a"}).id == "7"
    assert parse_record({"response": "a", "contexts": ["c"], "ground_truth": "g"}).id == "81136d3ac082d0c0"


# --- Property: nothing but a Record or a RecordError comes out ----------------------------------


class Huge(int):
    """10**5000: str() and json refuse to write it (Python's 4300-digit limit); repr does not."""

    def __repr__(self):
        return "Huge()"

    __str__ = int.__repr__


class Deep(dict):
    """A dict nested 100,000 levels deep, with a repr that Hypothesis can print."""

    def __repr__(self):
        return "Deep()"


LOOP: dict = {"response": "r"}
LOOP["self"] = LOOP
LOOP_LIST: list = ["c"]
LOOP_LIST.append(LOOP_LIST)
hostile_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3)
    | st.binary(max_size=8)
    | st.sampled_from([Huge(10**5000), Deep(nested(DEEP)), LOOP, LOOP_LIST, float("nan")])
)
hostile_keys = (
    st.sampled_from(["id", "response", "answer", "user_input", "question", "contexts", "retrieved_contexts"])
    | st.text(max_size=5)
    | st.integers()
    | st.tuples(st.integers())
)
hostile_values = st.recursive(
    hostile_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_keys, inner, max_size=4),
    max_leaves=10,
)
hostile_items = st.dictionaries(hostile_keys, hostile_values, max_size=6) | hostile_values


def as_line(value):
    try:
        return json.dumps(value)  # lone surrogates become \\udxxx escapes, 10**5000 a 5001-digit number
    except (ValueError, TypeError, RecursionError):
        return DEEP_OBJECT


def check_only_records_and_named_errors(entries):
    for e in entries:
        assert isinstance(e, Record | RecordError), e
        if isinstance(e, Record):
            e.model_dump_json()  # writable to results.jsonl and hashable by the store
        else:
            assert e.location and str(e).startswith(f"record {e.record_id!r} ({e.location})")
            e.record_id.encode("utf-8")


HOSTILE = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@HOSTILE
@given(items=st.lists(hostile_items, max_size=6))
def test_any_python_records_are_records_or_named_errors(items):
    entries = list(dedupe(coerce_records(items)))
    assert len(entries) == len(items)
    check_only_records_and_named_errors(entries)


@HOSTILE
@given(lines=st.lists(hostile_items.map(as_line) | st.sampled_from([DEEP_ARRAY, "7" * 5000, BOM]), max_size=6))
def test_any_jsonl_line_is_a_record_or_a_named_error(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("hostile") / "d.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    entries = list(dedupe(iter_records(path)))
    content = "".join(line + "\n" for line in lines).removeprefix(BOM)  # a leading BOM is no content
    assert len(entries) == sum(1 for line in content.splitlines() if line.strip())
    check_only_records_and_named_errors(entries)


@pytest.mark.parametrize("given", ["", "   "])
def test_a_blank_id_does_not_name_its_error(given):
    with pytest.raises(RecordError, match="field 'id': must not be empty") as info:
        parse_record({"id": given, "response": "a"}, location="line 2")
    assert info.value.record_id.startswith("raw-")  # a results row keyed by "" would name nothing


def test_write_atomic_replaces_whole_or_not_at_all(tmp_path, monkeypatch):

    from localjury._writes import write_atomic

    target = tmp_path / "memo.json"
    target.write_text("old")
    write_atomic(target, "new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["memo.json"]

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "newer")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["memo.json"]
