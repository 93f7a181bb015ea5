"""Every bench format parses (tiny files written here, and the real ones when present)."""

import json
import os
from pathlib import Path

import pytest

from localjury.bench.formats import FORMATS, load
from localjury.bench.sampling import sample
from localjury.errors import ConfigError
from tests import ROOT

DATA = ROOT.parent / "shared" / "data"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_llmbar_pairs(tmp_path):
    path = write(tmp_path, "l.json", json.dumps([{"input": "Say hi", "output_1": "Bye", "output_2": "Hi", "label": 2}]))
    a, b = load(path, "llmbar")
    assert (a.record["response"], a.gold, b.record["response"], b.gold) == ("Bye", 0, "Hi", 1)
    assert a.pair == b.pair and a.record["user_input"] == "Say hi" and a.record["id"] != b.record["id"]
    bad = write(tmp_path, "b.json", json.dumps([{"input": "x", "output_1": "a", "output_2": "b", "label": "3"}]))
    with pytest.raises(ConfigError, match=r"b\.json, item 0: label must be 1 or 2"):
        load(bad, "llmbar")


def test_llmbar_as_pairwise_records(tmp_path):
    rows = [
        {"input": "Say hi", "output_1": "Bye", "output_2": "Hi", "label": 2},
        {"input": "Count to 2", "output_1": "1, 2", "output_2": "3", "label": "1"},
    ]
    path = write(tmp_path, "l.json", json.dumps(rows))
    first, second = load(path, "llmbar", pairwise=True)
    assert first.record == {"id": "llmbar-0", "user_input": "Say hi", "response_a": "Bye", "response_b": "Hi"}
    assert (first.gold, second.gold) == (0, 1)  # gold 1: response_a (output_1) is the one that follows
    assert first.pair is None and second.record["response_a"] == "1, 2"


def test_pairwise_jsonl_needs_both_responses_and_other_sets_have_no_pairs(tmp_path):
    good = {"id": "p0", "user_input": "q", "response_a": "x", "response_b": "y", "gold": 1}
    path = write(tmp_path, "p.jsonl", jsonl([good, {"id": "p1", "response": "z", "gold": 0}]))
    with pytest.raises(ConfigError, match=r"record 'p1' has no response_a and response_b .* mode 'pointwise'"):
        load(path, "jsonl", pairwise=True)
    (item,) = load(write(tmp_path, "q.jsonl", jsonl([good])), "jsonl", pairwise=True)
    assert item.record["response_b"] == "y" and item.gold == 1
    halu = write(tmp_path, "h.jsonl", jsonl([{"user_query": "q", "chatgpt_response": "a", "hallucination": "no"}]))
    with pytest.raises(ConfigError, match="format 'halueval-general' holds no pairs"):
        load(halu, "halueval-general", pairwise=True)


def test_halueval_general(tmp_path):
    rows = [
        {"ID": "7", "user_query": "q", "chatgpt_response": "r", "hallucination": "no"},
        {"ID": "8", "user_query": "q2", "chatgpt_response": "r2", "hallucination": "yes"},
    ]
    a, b = load(write(tmp_path, "h.jsonl", jsonl(rows)), "halueval-general")
    assert (a.record["id"], a.gold, b.gold) == ("halueval-line1", 1, 0)
    with pytest.raises(ConfigError, match=r"line 1: missing field 'chatgpt_response'"):
        load(
            write(tmp_path, "x.jsonl", jsonl([{"ID": "1", "user_query": "q", "hallucination": "no"}])),
            "halueval-general",
        )


def test_halueval_qa_two_records_per_row_with_the_knowledge_as_context(tmp_path):
    row = {"knowledge": "K", "question": "Q?", "right_answer": "A", "hallucinated_answer": "B is it."}
    right, wrong = load(write(tmp_path, "qa.jsonl", jsonl([row])), "halueval-qa")
    assert (right.gold, wrong.gold) == (1, 0) and right.pair == wrong.pair
    assert right.record["retrieved_contexts"] == ["K"] and wrong.record["response"] == "B is it."


def test_truthfulqa_jsonl_and_csv(tmp_path):
    rows = [{"prompt": "Q: Is the sky green?\nA: No, it is blue.\nTrue:", "completion": " yes"}]
    (item,) = load(write(tmp_path, "t.jsonl", jsonl(rows)), "truthfulqa")
    assert item.record["user_input"] == "Is the sky green?" and item.record["response"] == "No, it is blue."
    assert item.gold == 1 and item.group == "Is the sky green?"
    csv_text = "Type,Category,Question,Best Answer,Correct Answers,Incorrect Answers,Source\n"
    csv_text += 'A,B,Why?,Because,"Because; No reason",It is magic,src\n'
    items = load(write(tmp_path, "t.csv", csv_text), "truthfulqa")
    assert [(i.record["response"], i.gold) for i in items] == [("Because", 1), ("No reason", 1), ("It is magic", 0)]
    with pytest.raises(ConfigError, match="prompt is not"):
        load(write(tmp_path, "u.jsonl", jsonl([{"prompt": "nonsense", "completion": " yes"}])), "truthfulqa")


def test_generic_jsonl(tmp_path):
    items = load(write(tmp_path, "g.jsonl", jsonl([{"response": "r", "gold": 1, "pair": "p"}])), "jsonl")
    assert items[0].gold == 1 and items[0].pair == "p" and "gold" not in items[0].record
    with pytest.raises(ConfigError, match="field 'gold' must be 0 or 1"):
        load(write(tmp_path, "h.jsonl", jsonl([{"response": "r", "gold": "maybe"}])), "jsonl")


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="unknown bench format 'mmlu'; expected one of: llmbar"):
        load(tmp_path / "x", "mmlu")
    with pytest.raises(ConfigError, match=r"labeled data set not found: .*missing\.jsonl"):
        load(tmp_path / "missing.jsonl", "jsonl")


@pytest.mark.parametrize("fmt", ["jsonl", "llmbar", "truthfulqa"])
def test_a_labeled_set_that_is_no_regular_readable_file_is_refused_naming_it(tmp_path, fmt):
    """A FIFO is never waited on, a file that cannot be read (/proc/self/mem) is a ConfigError."""
    fifo = tmp_path / "labels.csv"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"labels\.csv is not a regular file \(a FIFO\)"):
        load(fifo, fmt)
    if Path("/proc/self/mem").exists():
        with pytest.raises(ConfigError, match=r"/proc/self/mem"):
            load("/proc/self/mem", fmt)


def test_a_labeled_set_over_its_bound_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr("localjury.bench.formats.MAX_LABELS_BYTES", 100)
    rows = write(tmp_path, "h.jsonl", jsonl([{"response": "r" * 50, "gold": 1}] * 3))
    with pytest.raises(ConfigError, match=r"h\.jsonl is [\d,]+ bytes, over the 100-byte bound"):
        load(rows, "jsonl")


def test_sample_keeps_pairs_whole_and_is_seeded(tmp_path):
    rows = [{"input": f"i{i}", "output_1": "a", "output_2": "b", "label": 1} for i in range(20)]
    items = load(write(tmp_path, "l.json", json.dumps(rows)), "llmbar")
    picked = sample(items, 7, seed=5)
    assert len(picked) == 6  # whole pairs only
    pairs = {}
    for it in picked:
        pairs.setdefault(it.pair, []).append(it.gold)
    assert all(sorted(g) == [0, 1] for g in pairs.values())
    assert [i.record["id"] for i in sample(items, 7, seed=5)] == [i.record["id"] for i in picked]
    assert [i.record["id"] for i in sample(items, 7, seed=6)] != [i.record["id"] for i in picked]
    assert sample(items, None, 0) == items


def test_truthfulqa_sample_spreads_over_questions(tmp_path):
    rows = [
        {"prompt": f"Q: q{q}?\nA: a{a}\nTrue:", "completion": " yes" if a % 2 else " no"}
        for q in range(5)
        for a in range(6)
    ]
    items = load(write(tmp_path, "t.jsonl", jsonl(rows)), "truthfulqa")
    picked = sample(items, 8, seed=0)
    per_question = {}
    for it in picked:
        per_question.setdefault(it.group, []).append(it.gold)
    assert len(picked) == 8 and all(sorted(g) == [0, 1] for g in per_question.values()) and len(per_question) == 4


@pytest.mark.parametrize(
    ("fmt", "name", "count"),
    [
        ("llmbar", "llmbar/llmbar_natural.json", 200),
        ("halueval-general", "halueval/halueval_general.jsonl", 4507),
        ("halueval-qa", "halueval/halueval_qa_dev500.jsonl", 1000),
        ("truthfulqa", "truthfulqa/finetune_truth.jsonl", 22434),
        ("truthfulqa", "truthfulqa/TruthfulQA.csv", None),
    ],
)
def test_the_public_sets_parse(fmt, name, count):
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} not here (shared/data sits beside the repository)")
    items = load(path, fmt)
    assert count is None or len(items) == count
    # (67 TruthfulQA answers are empty and labeled truthful: kept as they are.)
    assert {i.gold for i in items} == {0, 1} and all(isinstance(i.record["response"], str) for i in items)
    assert fmt in FORMATS
    if FORMATS[fmt].load_pairs is not None:
        pairs = load(path, fmt, pairwise=True)
        assert len(pairs) * 2 == len(items) and {p.gold for p in pairs} == {0, 1}
