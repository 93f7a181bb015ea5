import json

import pandas as pd
import pytest

from localjury.errors import ConfigError, RecordError
from localjury.records import Record, content_id, dedupe, iter_records, parse_record


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
