"""Judging with quoted evidence (``--evidence``), on a scripted engine: what the run asks the
engine (each prompt's quotable texts beside the schema), where quotes land in the results
(located, with offsets), what a quote the record lacks does (the sample abstains), how the
store keys and the refusals follow. The constraint itself: tests/unit/engines/constrain/test_quotes.py; on the
real models and engines: tests/integration/metrics/test_evidence.py."""

import json
import os

import pytest

import localjury.run.generate
from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError, MetricError
from localjury.metrics.checklist import Checklist, checklist_metrics
from localjury.metrics.faithfulness import Faithfulness
from localjury.metrics.protocol import Request
from localjury.models.registry import ModelSpec
from localjury.records.record import Record
from localjury.run.context import JuryModel
from localjury.types import QUOTE_KEY
from tests.fakes import factory, fake_registry, run_cli, spec

DATED = "The response must include a specific date or year."
RECORDS = [
    {"id": "wall", "user_input": "When did the Wall fall?", "response": "It fell on 9 November 1989, at night."},
    {"id": "art", "user_input": "Who painted it?", "response": "Vincent van Gogh painted The Starry Night."},
]


def quoted(*quotes: str, verdict: int = 1, reason: str = "r") -> str:
    return json.dumps({"evidence": list(quotes), "reason": reason, "verdict": verdict})


def run(respond, metrics, calls, **kw):
    return evaluate(
        RECORDS, metrics, [spec("A")], engine_factory=factory(respond, [], calls), use_cache=False, seed=0, **kw
    )


def test_the_engine_gets_each_prompts_response_to_quote_and_the_results_locate_every_quote():
    calls: list = []
    answers = {"9 November 1989": quoted("9 November 1989"), "Starry": quoted(verdict=0)}
    result = run(
        lambda m, p, j: next(a for key, a in answers.items() if key in p.split("<response>")[-1]),
        [AspectCritic("dated", DATED, evidence=True, strictness=2)],
        calls,
    )
    (call,) = calls
    assert call["schema"]["properties"]["evidence"][QUOTE_KEY] is True
    assert sorted(call["quotes"]) == sorted([(r["response"],) for r in RECORDS])
    wall, art = sorted(result.results, key=lambda r: r.record_id != "wall")
    (model,) = wall.models
    assert [[(q.text, q.field, q.start, q.end) for q in ev] for ev in model.evidence] == [
        [("9 November 1989", "response", 11, 26)]
    ] * 2
    assert RECORDS[0]["response"][11:26] == "9 November 1989"
    assert wall.score == 1.0 and art.score == 0.0 and art.models[0].evidence == [[], []]


def test_a_quote_the_record_does_not_hold_is_an_abstention_counted_never_a_vote():
    """An engine that does not constrain quotes can write one; the sample abstains and says why."""
    result = run(
        lambda m, p, j: quoted("1889") if j == 0 else quoted("Vincent van Gogh", verdict=0),
        [AspectCritic("dated", DATED, evidence=True, strictness=2)],
        [],
    )
    art = next(r for r in result.results if r.record_id == "art")
    (model,) = art.models
    assert model.votes == [None, 0] and model.abstentions == 1 and model.verdict == 0
    assert model.invalid[0].problem == "quotes what is not in the record: '1889'"
    assert model.evidence[0] is None and [q.text for q in model.evidence[1]] == ["Vincent van Gogh"]


def test_without_evidence_the_engine_gets_no_quotes_and_the_results_no_evidence():
    calls: list = []
    result = run(lambda m, p, j: json.dumps({"reason": "r", "verdict": 1}), [AspectCritic("dated", DATED)], calls)
    assert "quotes" not in calls[0]
    assert all(r.models[0].evidence is None for r in result.results)


def test_faithfulness_with_evidence_quotes_the_contexts_statement_by_statement():
    calls: list = []
    record = {
        "id": "moon",
        "user_input": "When?",
        "response": "Apollo 11 landed in 1969.",
        "retrieved_contexts": ["Other text.", "Apollo 11 landed on the Moon on July 20, 1969."],
    }

    def respond(m, p, j):
        if "statements" in p and "<statements>" not in p:
            return json.dumps({"statements": ["Apollo 11 landed in 1969.", "It was crewed."]})
        verdicts = [
            {"statement": "a", "evidence": ["July 20, 1969"], "reason": "r", "verdict": 1},
            {"statement": "b", "evidence": [], "reason": "r", "verdict": 0},
        ]
        return json.dumps({"verdicts": verdicts})

    result = evaluate([record], [Faithfulness(evidence=True)], [spec("A")], engine_factory=factory(respond, [], calls),
                      use_cache=False)  # fmt: skip
    verify = calls[-1]
    assert verify["quotes"] == [tuple(record["retrieved_contexts"])]
    (res,) = result.results
    first, second = res.statements
    (quote,) = first.models[0].evidence[0]
    assert (quote.field, quote.start, quote.end) == ("retrieved_contexts[1]", 32, 45)
    assert record["retrieved_contexts"][1][32:45] == "July 20, 1969"
    assert second.models[0].evidence == [[]] and res.score == 0.5


def test_quotes_are_part_of_the_store_key_and_absent_ones_leave_old_keys_alone():
    from localjury._hashing import content_hash

    model = JuryModel(spec=ModelSpec(name="a", path="/x"), identity="i", temperature=1.0, top_p=1.0, max_tokens=64)
    messages = [{"role": "user", "content": "x"}]
    quotes = (None, (), ("a",), ("b",))
    requests = [Request(("r", "m"), messages, {"type": "object"}, 1, 64, 1.0, quotes=q) for q in quotes]
    keys = [model.store_key(q, 0) for q in requests]
    assert len(set(keys)) == 4  # nothing to quote is a constraint too: [] only
    # A request without quotes has the key it had before quotes existed.
    assert keys[0] == content_hash(model="i", engine=model.spec.engine, prompt_format=model.spec.prompt_format,
                                     messages=messages, schema={"type": "object"}, n=1, first_sample=0,
                                     temperature=1.0, top_p=1.0, max_tokens=64, seed=0)  # fmt: skip


def test_evidence_is_not_asked_with_verdict_first_nor_folded_into_a_checklist():
    with pytest.raises(MetricError, match="evidence is quoted before the verdict, not with verdict_first"):
        AspectCritic("d", DATED, evidence=True, verdict_first=True)
    quoting = AspectCritic("d", DATED, evidence=True)
    with pytest.raises(MetricError, match=r"criteria \['d'\] quote evidence first"):
        Checklist([quoting, AspectCritic.predefined("conciseness")])
    folded = checklist_metrics([quoting, AspectCritic.predefined("conciseness"), AspectCritic("e", "E.")], group=True)
    assert quoting in folded  # judged on its own, the other two as a checklist


def test_a_server_model_is_refused_before_anything_loads_or_connects():
    served = ModelSpec(name="s", base_url="http://127.0.0.1:1/v1")
    refusal = "model 's', metric 'd': quoted evidence is not available on the server engine"
    with pytest.raises(ConfigError, match=refusal):
        evaluate(RECORDS, [AspectCritic("d", DATED, evidence=True)], [served], use_cache=False)


def test_the_record_texts_a_critic_may_quote():
    record = Record.model_validate(RECORDS[0])
    assert AspectCritic("d", DATED, evidence=True).quotable(record) == [("response", RECORDS[0]["response"], 0)]
    assert AspectCritic("d", DATED).quotable(record) == []


def test_run_evidence_on_the_command_line(tmp_path, monkeypatch, capsys):
    registry = fake_registry(tmp_path)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    calls: list = []
    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(lambda m, p, j: quoted(verdict=0), [], calls))
    code, _, err = run_cli(monkeypatch, capsys, "run", data, "--criterion", f"dated={DATED}", "--evidence",
                           "--models", "fake", "--registry", registry, "--quiet", "--out", tmp_path / "r.jsonl",
                           "--cache", tmp_path / "c.sqlite")  # fmt: skip
    assert code == 0, err
    assert sorted(calls[0]["quotes"]) == sorted((r["response"],) for r in RECORDS)
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert all(row["models"][0]["evidence"] == [[]] for row in rows)


def test_show_marks_every_quote_in_its_text(tmp_path, monkeypatch, capsys):
    registry = fake_registry(tmp_path)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    monkeypatch.setattr(
        localjury.run.generate,
        "load_engine",
        factory(lambda m, p, j: quoted("9 November 1989") if "1989" in p.split("<response>")[-1] else quoted(verdict=0),
                []),
    )  # fmt: skip
    results = tmp_path / "r.jsonl"
    code, _, err = run_cli(monkeypatch, capsys, "run", data, "--criterion", f"dated={DATED}", "--evidence",
                           "--models", "fake", "--registry", registry, "--quiet", "--out", results,
                           "--cache", tmp_path / "c.sqlite")  # fmt: skip
    assert code == 0, err
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(monkeypatch, capsys, "show", results, "--record", "wall")
    assert code == 0, err
    assert "wall · dated · score 1.000" in out and "art" not in out
    assert "quotes: “9 November 1989”" in out
    assert "response:\nIt fell on 9 November 1989, at night." in out  # the dataset the manifest names
    code, out, _ = run_cli(monkeypatch, capsys, "show", results, "--failed")
    assert "art · dated · score 0.000" in out and "quotes: (none)" in out and "wall" not in out
    code, _, err = run_cli(monkeypatch, capsys, "show", results, "--record", "nope")
    assert code == 2 and "no record 'nope'" in err


@pytest.mark.parametrize("planted", ["/proc/self/pagemap", "fifo", "other-size"])
def test_show_reads_no_dataset_a_manifest_names_but_the_one_the_run_read(tmp_path, monkeypatch, capsys, planted):
    """A results folder may come from someone else: its manifest's dataset path is read only
    when it is a regular file of the size the run recorded."""
    registry = fake_registry(tmp_path)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(lambda m, p, j: quoted(verdict=0), []))
    results = tmp_path / "r.jsonl"
    code, _, err = run_cli(monkeypatch, capsys, "run", data, "--criterion", f"dated={DATED}", "--evidence",
                           "--models", "fake", "--registry", registry, "--quiet", "--out", results,
                           "--cache", tmp_path / "c.sqlite")  # fmt: skip
    assert code == 0, err
    manifest = tmp_path / "r.manifest.json"
    recorded = json.loads(manifest.read_text())
    if planted == "fifo":
        os.mkfifo(tmp_path / "fifo")
        recorded["dataset"]["path"] = str(tmp_path / "fifo")
    elif planted == "other-size":
        (tmp_path / "other.jsonl").write_text(data.read_text() + "\n")
        recorded["dataset"]["path"] = str(tmp_path / "other.jsonl")
    else:
        recorded["dataset"].update(path=planted, size=0)
    manifest.write_text(json.dumps(recorded))
    read = []
    monkeypatch.setattr("localjury.records.readers.iter_records", lambda path, *a, **k: read.append(path) or iter(()))
    code, out, err = run_cli(monkeypatch, capsys, "show", results, "--record", "wall")
    assert code == 0, err
    assert "wall · dated" in out and read == []


def test_marked_html_escapes_the_text_and_marks_each_occurrence_of_a_quote():
    from localjury.results.record_result import Quote
    from localjury.results.show import marked_html, spans

    text = "<b>1989</b> and 1989, then 19"
    quotes = [Quote(text="1989", field="response", start=3, end=7), Quote(text="89</b> and", field="response",
              start=5, end=15)]  # fmt: skip
    assert spans(text, quotes) == [(3, 15), (16, 20)]
    assert marked_html(text, quotes) == "&lt;b&gt;<mark>1989&lt;/b&gt; and</mark> <mark>1989</mark>, then 19"
    long = "x " * 400 + "needle" + " y" * 400
    shown = marked_html(long, [Quote(text="needle", field="response", start=800, end=806)])
    assert shown.startswith("…") and shown.endswith("…") and "<mark>needle</mark>" in shown and len(shown) < 200


def test_bench_with_evidence_shows_the_quotes_in_their_text_wrong_records_first(tmp_path):
    pytest.importorskip("sklearn")
    from localjury.bench.run import run_bench

    rows = [
        {"id": "a", "response": "It fell in <b>1989</b>.", "gold": 1},
        {"id": "b", "response": "It fell long ago.", "gold": 1},
        {"id": "c", "response": "Paris, in 1889 & later.", "gold": 0},
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def respond(m, p, j):
        response = p.rsplit("<response>\n", 1)[1]
        year = next((y for y in ("1989", "1889") if y in response), None)
        return quoted(year, verdict=1) if year else quoted(verdict=0)

    out = tmp_path / "out"
    run_bench(data, "jsonl", [spec("A")], out, metric=f"dated={DATED}", strictness=2, evidence=True,
              engine_factory=factory(respond, []), use_cache=False)  # fmt: skip
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["benchmark"]["metric"]["evidence"] is True
    shown = metrics["evidence"]
    assert [e["record_id"] for e in shown] == ["b", "c", "a"]  # the two it got wrong, then the right one
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert predictions[0]["models"]["A"]["evidence"][0] == [
        {"text": "1989", "field": "response", "start": 14, "end": 18}
    ]
    page = (out / "report.html").read_text()
    assert "<h2>Quoted evidence in context</h2>" in page
    assert "It fell in &lt;b&gt;<mark>1989</mark>&lt;/b&gt;." in page
    assert "Paris, in <mark>1889</mark> &amp; later." in page
    md = (out / "report.md").read_text()
    assert "  - response: It fell in &lt;b&gt;**1989**&lt;/b&gt;." in md
    assert "  - response: Paris, in **1889** &amp; later." in md  # the spaces around a quote kept


def test_a_record_with_nothing_to_quote_is_still_held_to_an_empty_list():
    """An empty response leaves nothing to quote: the engine still gets the constraint (an
    empty set of texts, so the evidence can only be []), not an unconstrained schema."""
    calls: list = []
    records = [{"id": "empty", "user_input": "Say something.", "response": ""}, RECORDS[0]]
    evaluate(records, [AspectCritic("dated", DATED, evidence=True)], [spec("A")], use_cache=False,
             engine_factory=factory(lambda m, p, j: quoted(verdict=0), [], calls))  # fmt: skip
    assert sorted(calls[0]["quotes"]) == [(), (RECORDS[0]["response"],)]


def test_factual_accuracy_quotes_name_the_reference():
    from localjury.metrics.faithfulness import FactualAccuracy

    record = Record.model_validate({"id": "r", "response": "It is 1879.", "reference": "Born 14 March 1879."})
    metric = FactualAccuracy(evidence=True)
    assert metric.quotable(record) == [("reference", "Born 14 March 1879.", 0)]
    faithful = Faithfulness(evidence=True)
    contexts = Record.model_validate({"id": "r", "response": "x", "retrieved_contexts": ["a", "", "c"]})
    assert faithful.quotable(contexts) == [("retrieved_contexts[0]", "a", 0), ("retrieved_contexts[2]", "c", 0)]


def test_vllm_quotes_only_on_its_guidance_backend_and_a_server_never():
    from localjury.engines import quotes_refusal
    from localjury.models.registry import VllmSettings

    outlines = ModelSpec(name="v", path="/x")
    guidance = ModelSpec(name="v", path="/x", vllm=VllmSettings(structured_outputs_backend="guidance"))
    assert "set vllm: {structured_outputs_backend: guidance}" in quotes_refusal("vllm", outlines)
    assert quotes_refusal("vllm", guidance) is None
    assert quotes_refusal("transformers", outlines) is None and quotes_refusal("llamacpp", outlines) is None
    assert "not available on the server engine" in quotes_refusal("server", outlines)


def test_bench_refuses_evidence_where_it_cannot_quote():
    pytest.importorskip("sklearn")
    from localjury.bench.run import resolve_metric

    with pytest.raises(ConfigError, match="a pairwise judge compares two responses and quotes neither"):
        resolve_metric(None, "llmbar", 1, pairwise=True, evidence=True)


def test_show_finds_a_conversations_quotes_in_its_turns():
    from localjury.results.record_result import Quote
    from localjury.results.show import text_for, texts_of

    record = Record.model_validate(
        {
            "id": "c",
            "messages": [
                {"role": "user", "content": "Book it for 9 May."},
                {"role": "assistant", "content": "Booked for 9 May."},
            ],
        }
    )
    texts = texts_of(record)
    assert texts["response"] == "Booked for 9 May." and texts["messages[0]"] == "Book it for 9 May."
    quote = Quote(text="Book it", field="conversation[0]", start=0, end=7)
    assert text_for("conversation[0]", [quote], texts) == ("messages[0]", "Book it for 9 May.")
    assert text_for("conversation[3]", [Quote(text="nowhere", field="conversation[3]", start=0, end=7)], texts) is None


def faithful(m, p, j):
    """Extracts one statement, and verifies it quoting the start of the first context."""
    if "<statements>" not in p:
        return json.dumps({"statements": ["The Wall fell in 1989."]})
    return json.dumps({"verdicts": [{"statement": "s", "evidence": ["The Wall fell"], "reason": "r", "verdict": 1}]})


def test_under_truncation_quotes_come_only_from_what_the_judge_is_shown():
    """1 MB of contexts (under the record bound) cut to a judge's context: the verification's
    quotable texts are the kept part of each context (no truncation mark), not the megabyte;
    its quotes are located in the record as usual. A record that fits is untouched."""
    calls: list = []
    big = "The Wall fell in 1989. " + "More text of no use here. " * 40_000  # ~1 MB
    records = [
        {"id": "big", "user_input": "When?", "response": "In 1989.", "retrieved_contexts": [big, "Short one."]},
        {"id": "small", "user_input": "When?", "response": "In 1989.", "retrieved_contexts": ["The Wall fell."]},
    ]
    judge = spec("A", context_length=8192)
    result = evaluate(records, [Faithfulness(evidence=True)], [judge], on_overflow="truncate", use_cache=False,
                      engine_factory=factory(faithful, [], calls))  # fmt: skip
    (verify,) = [c for c in calls if "quotes" in c]
    by_record = {"big" if any(len(t) > 100 for t in q) or "Short one." in q else "small": q for q in verify["quotes"]}
    kept, short = by_record["big"]
    prompt = next(p for p in verify["prompts"] if "Short one." in p)
    assert big.startswith(kept) and 1000 < len(kept) < 8192 * 3 and short == "Short one."
    assert "characters cut by localjury" in prompt and "characters cut by localjury" not in kept
    assert by_record["small"] == ("The Wall fell.",)
    for r in result.results:
        (quote,) = r.statements[0].models[0].evidence[0]
        assert (quote.field, quote.start, quote.text) == ("retrieved_contexts[0]", 0, "The Wall fell")


def test_under_truncation_a_conversations_cut_turns_and_its_cut_mark_are_not_quotable():
    from tests.unit.records.test_conversation import long_conversation

    calls: list = []
    row = long_conversation(60)
    critic = AspectCritic("dated", DATED, evidence=True, scope="conversation")
    result = evaluate([row], [critic], [spec("A", context_length=1400, max_tokens=100)], on_overflow="truncate",
                      use_cache=False, engine_factory=factory(lambda m, p, j: quoted("2024"), [], calls))  # fmt: skip
    (res,) = result.results
    assert res.turns_cut and res.score == 1.0
    ((texts,),) = [c["quotes"] for c in calls]
    assert "The final answer, 2024." in texts and "Hello?" in texts
    assert not any(t.startswith("turn 0: ") for t in texts)  # cut: the judge never saw it
    assert not any("turns cut" in t for t in texts)  # localjury's mark, not the record's text
