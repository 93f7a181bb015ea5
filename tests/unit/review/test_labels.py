"""The labels a reviewer gives: kept at once, the last per (record, metric) winning, the history
kept; nothing lost to a killed server or to two servers on one file; read by bench's loader."""

import json
import multiprocessing

import pytest

from localjury.bench.formats import load
from localjury.errors import ConfigError
from localjury.review.labels import LabelBook, history_path


def row(record_id, metric="dated"):
    return {"id": record_id, "response": f"text of {record_id}", "metric": metric, "criterion": "Has a year."}


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_last_label_wins_the_history_keeps_them_all_and_reopening_resumes(tmp_path):
    path = tmp_path / "labels.jsonl"
    book = LabelBook(path)
    assert not path.exists()  # nothing written before the first label
    book.put(row("a"), 1, "first")
    book.put(row("b"), 0)
    book.put(row("a"), 0, "changed my mind")
    kept = lines(path)
    assert [(r["id"], r["gold"], r["note"]) for r in kept] == [("b", 0, None), ("a", 0, "changed my mind")]
    assert all(r["metric"] == "dated" and r["criterion"] == "Has a year." and r["labeled_at"] for r in kept)
    assert [(r["id"], r["gold"]) for r in lines(history_path(path))] == [("a", 1), ("b", 0), ("a", 0)]
    book.put(row("b"), None)  # taken away
    assert [r["id"] for r in lines(path)] == ["a"]
    again = LabelBook(path)
    assert again.labels == book.labels and again.get(("a", "dated"))["gold"] == 0


def test_a_label_cut_short_by_a_kill_loses_only_itself(tmp_path):
    path = tmp_path / "labels.jsonl"
    book = LabelBook(path)
    book.put(row("a"), 1)
    with open(history_path(path), "a") as fh:
        fh.write('{"id": "b", "metric": "dated", "go')  # a server killed mid-write
    reopened = LabelBook(path)
    assert list(reopened.labels) == [("a", "dated")]
    assert any("cut short" in p for p in reopened.problems)
    reopened.put(row("c"), 0)
    assert [r["id"] for r in lines(path)] == ["a", "c"]
    assert LabelBook(path).labels.keys() == {("a", "dated"), ("c", "dated")}


def _label_many(path, prefix, count):
    book = LabelBook(path)
    for i in range(count):
        book.put(row(f"{prefix}{i}"), i % 2)


def test_two_servers_on_one_labels_file_lose_nothing(tmp_path):
    path = tmp_path / "labels.jsonl"
    LabelBook(path).put(row("seed"), 1)
    ctx = multiprocessing.get_context("fork")
    writers = [ctx.Process(target=_label_many, args=(path, p, 25)) for p in ("x", "y")]
    for w in writers:
        w.start()
    for w in writers:
        w.join(60)
        assert w.exitcode == 0
    ids = {r["id"] for r in lines(path)}
    assert ids == {"seed"} | {f"{p}{i}" for p in "xy" for i in range(25)}
    assert len(lines(history_path(path))) == 51


def test_a_labels_file_given_alone_starts_the_history(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"id": "a", "response": "r", "gold": 1}) + "\n")
    book = LabelBook(path)
    assert book.get(("a", ""))["gold"] == 1 and len(lines(history_path(path))) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "gold": 2}\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl, line 1: not a label"):
        LabelBook(bad)


def test_bench_reads_the_labels_of_one_metric(tmp_path):
    path = tmp_path / "labels.jsonl"
    book = LabelBook(path)
    book.put(row("a"), 1, "a note")
    book.put(row("b"), 0)
    book.put(row("a", metric="concise"), 0)
    items = load(path, "jsonl", metric="dated")
    assert [(it.id, it.gold, it.metric) for it in items] == [("a", 1, "dated"), ("b", 0, "dated")]
    assert items[0].record == {"id": "a", "response": "text of a"} and items[0].error is None
    with pytest.raises(ConfigError, match=r"labels 2 metrics \(concise, dated\): name one with --metric"):
        load(path, "jsonl")
    with pytest.raises(ConfigError, match="none of them is 'other'"):
        load(path, "jsonl", metric="other")
    with pytest.raises(ConfigError, match="gold must be 0 or 1"):
        book.put(row("c"), 2)
