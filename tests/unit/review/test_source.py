"""The file under review, indexed: each row's place and facts, read back from the file; the kinds
of file a review opens and what it says of a line it cannot read."""

import json

import numpy as np
import pytest

from localjury.errors import ConfigError
from localjury.results.record_result import read_results
from localjury.review import source
from localjury.review.queue import Review
from tests.fakes import scripted_bench, scripted_results

RECORDS = [
    {"id": "wall", "user_input": "When did the Berlin Wall fall?", "response": "On 9 November 1989."},
    {"id": "hamlet", "user_input": "Who wrote Hamlet?", "response": "William Shakespeare."},
    {"id": "moon", "user_input": "When did people land on the Moon?", "response": "In July 1969."},
]


def test_a_runs_results_are_indexed_with_each_rows_facts(tmp_path):
    path = scripted_results(tmp_path, RECORDS)
    index = source.index(path)
    results = list(read_results(path))
    assert index.kind == source.RESULTS and len(index) == len(results) == 3
    for n, result in enumerate(results):
        assert index.key(n) == (result.record_id, result.metric)
        assert index.row(n) == json.loads(result.model_dump_json())  # read back from its offset
        verdicts = {m.verdict for m in result.models}
        assert bool(index.flags[n] & source.JURY_SPLIT) == (len(verdicts) > 1)
        # B's votes alternate: every row's votes split.
        assert index.flags[n] & source.VOTES_SPLIT and not index.flags[n] & source.FAILED
        assert index.jury[n] == int(result.score > 0.5)
    assert np.isnan(index.sure).all()  # the scripted judges give no probabilities


def test_a_cut_last_line_is_reported_and_the_rows_before_it_kept(tmp_path):
    path = scripted_results(tmp_path, RECORDS)
    whole = path.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(whole[: len(whole) - 40])
    index = source.index(cut)
    assert len(index) == 2 and index.record_ids == ["wall", "hamlet"]
    (problem,) = index.problems
    assert problem.startswith("line 3: not valid JSON") and "cut short" in problem


def test_a_file_that_is_not_results_is_refused_naming_the_line(tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_text('\n{"name": "x", "value": 1}\n')
    with pytest.raises(ConfigError, match=r"other.jsonl, line 2: an object with name, value is not a result"):
        source.index(other)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="no rows in it"):
        source.index(empty)


def test_a_row_of_another_kind_is_read_past_and_said(tmp_path):
    path = scripted_results(tmp_path, RECORDS)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(path.read_text() + '{"id": "x", "gold": 1}\n[1, 2]\n')
    index = source.index(mixed)
    assert len(index) == 3
    assert [p.split(":")[0] for p in index.problems] == ["line 4", "line 5"]


def test_a_bench_folder_is_reviewed_with_its_metric_gold_and_records(tmp_path):
    _, out = scripted_bench(tmp_path)
    review = Review(out / "predictions.jsonl")
    assert review.index.kind == source.PREDICTIONS and review.metrics() == ["correct"]
    assert review.labels.path == out / "labels.jsonl"
    item = review.item(0)
    described = json.loads((out / "metrics.json").read_text())["benchmark"]["metric"]["description"]
    assert item["record"]["response"] == "answer 0 gold 1" and item["criterion"] == described
    # B passes everything and A agrees with gold: the jury splits exactly where gold is 0.
    gold = [review.index.row(n)["gold"] for n in range(len(review.index))]
    split = [bool(f & source.JURY_SPLIT) for f in review.index.flags]
    assert split == [g == 0 for g in gold]


def test_the_records_come_from_the_data_set_the_manifest_names_or_are_said_missing(tmp_path):
    path = scripted_results(tmp_path, RECORDS)
    assert Review(path).item(2)["record"] == {**RECORDS[2]}
    (tmp_path / "data.jsonl").unlink()
    review = Review(path)
    assert review.item(2)["record"] is None
    assert "not found" in review.opened.why_no_data
    given = tmp_path / "given.jsonl"
    given.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert Review(path, data=given).item(0)["record"]["response"] == "On 9 November 1989."


def test_a_labels_file_reviewed_alone_is_corrected_in_place(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"id": "a", "response": "In 1999.", "gold": 1}, {"id": "b", "response": "Never.", "gold": 1}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    review = Review(path)
    assert review.index.kind == source.LABELS and review.labels.path == path
    assert list(review.labeled()) == [1, 1] and review.item(1)["record"] == {"id": "b", "response": "Never."}
    review.label(1, 0, "no year")  # the file is rewritten; the review reads its rows as opened
    assert review.item(1)["record"]["response"] == "Never." and list(review.labeled()) == [1, 0]
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["id"], r["gold"], r.get("note")) for r in kept] == [("a", 1, None), ("b", 0, "no year")]
