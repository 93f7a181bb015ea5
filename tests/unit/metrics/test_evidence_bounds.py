"""Quoted evidence (``evidence=True``) on records built to make quote matching slow: one word of
10 MB (no space to cut at) in a response, behind a response's thinking, in a conversation's
turns and in retrieved contexts, with strictness 3 on a scripted engine (a judge of a context
long enough to be shown all of it). Each quote is still found at its offsets in the record's own
text, a quote the record lacks is still an abstention that says so, and it all takes about as
long as reading the text a few times (never a search per character of it). The grammar side:
tests/unit/engines/constrain/test_quotes_bounds.py."""

import json
import time

import pytest

from localjury import AspectCritic, Faithfulness, evaluate
from localjury.engines.constrain.quotes import QUOTE_SOURCE_CHARS, quotable_chunks, quote_grammar
from localjury.metrics._quoted import Quotable, locate_quotes
from localjury.metrics.evidence import QUOTE_MAX_CHARS, EvidenceJudgment
from localjury.metrics.rubric_file import rubric_file_metrics
from tests.fakes import factory, spec

WORD = "ab" * 5_000_000  # 10 MB, one word
QUOTE = "ab" * 80  # QUOTE_MAX_CHARS characters of it
JUDGE = [spec("A", context_length=131072)]  # 32 MiB a field: the word is shown whole
#: Seconds a run of one or two such records may take on a slow, shared CPU; a search per
#: character of 10 MB, or a grammar over it, takes minutes.
SECONDS = 30


def critic(**kw):
    return AspectCritic("dated", "The response must include a specific date or year.", evidence=True, **kw)


def answer(*quotes, verdict=1):
    return json.dumps({"evidence": list(quotes), "reason": "r", "verdict": verdict})


def judged(records, metrics, respond):
    start = time.perf_counter()
    result = evaluate(records, metrics, JUDGE, engine_factory=factory(respond, []), use_cache=False, seed=0)
    assert time.perf_counter() - start < SECONDS
    return result


def quotes_of(result, record_id):
    (res,) = [r for r in result.results if r.record_id == record_id]
    (model,) = res.models
    return [[(q.text, q.field, q.start, q.end) for q in sample] for sample in model.evidence]


@pytest.mark.parametrize(
    ("response", "start"),
    [
        ("It fell in 1989. " + WORD, len("It fell in 1989. ")),
        ("<think>" + "cd" * 1_000_000 + "</think> It fell in 1989. " + WORD, 2_000_015 + len(" It fell in 1989. ")),
    ],
    ids=["response", "after thinking"],
)
def test_quotes_of_a_ten_megabyte_word_are_found_at_their_offsets(response, start):
    """k=3 samples, each with three quotes: the word's first 160 characters, a piece inside it,
    and the year; after a response's thinking, the offsets count from the record's own text."""
    records = [{"id": "r", "user_input": "When did the Wall fall?", "response": response}]
    result = judged(records, [critic(strictness=3)], lambda m, p, j: answer(QUOTE, "ba" * 80, "1989"))
    year = response.index("1989")
    expected = [(QUOTE, "response", start, start + 160), ("ba" * 80, "response", start + 1, start + 161),
                ("1989", "response", year, year + 4)]  # fmt: skip
    assert quotes_of(result, "r") == [expected] * 3
    assert response[start : start + 160] == QUOTE


def test_a_quote_a_ten_megabyte_word_almost_holds_is_an_abstention_found_quickly():
    """A quote that matches the word up to its last character, at every place of it: the
    worst case of a naive search, here as fast as the others."""
    records = [{"id": "r", "user_input": "q", "response": "a" * 10_000_000}]
    near = "a" * (QUOTE_MAX_CHARS - 1) + "b"
    result = judged(records, [critic(strictness=3)], lambda m, p, j: answer(near) if j else answer("a" * 160))
    (res,) = result.results
    (model,) = res.models
    assert model.votes == [1, None, None] and model.abstentions == 2
    assert model.invalid[0].problem == f"quotes what is not in the record: {near[:80]!r}"


def test_a_conversation_whose_turns_hold_ten_megabyte_words_is_quoted_by_turn():
    records = [
        {
            "id": "c",
            "messages": [
                {"role": "user", "content": "Hi, " + WORD},
                {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": "When did the Wall fall?"},
                {"role": "assistant", "content": "It fell in 1989. " + WORD},
            ],
        }
    ]
    result = judged(records, [critic(strictness=3, scope="conversation")], lambda m, p, j: answer(QUOTE, "1989"))
    assert quotes_of(result, "c") == [[(QUOTE, "conversation[0]", 4, 164), ("1989", "conversation[3]", 11, 15)]] * 3


def test_a_quote_of_a_conversations_answer_after_long_thinking_counts_from_the_turns_own_text():
    """The last turn's thinking (10 MB) is not shown to the judge; the quote's offsets are in
    the turn's own text, where ``localjury show`` finds the conversation's response."""
    thinking = "<think>" + WORD + "</think> "
    records = [
        {
            "id": "c",
            "messages": [
                {"role": "user", "content": "When did the Wall fall?"},
                {"role": "assistant", "content": thinking + "It fell in 1989."},
            ],
        }
    ]
    result = judged(records, [critic(strictness=3)], lambda m, p, j: answer("1989"))
    start = len(thinking) + len("It fell in ")
    assert quotes_of(result, "c") == [[("1989", "response", start, start + 4)]] * 3
    assert records[0]["messages"][1]["content"][start : start + 4] == "1989"


def test_faithfulness_quotes_a_ten_megabyte_context_statement_by_statement():
    """Ten statements (the most an extraction holds), each with three quotes of the contexts."""
    contexts = ["The Berlin Wall fell on 9 November 1989.", "pre " + WORD + " post"]
    records = [{"id": "f", "user_input": "When?", "response": "It fell in 1989.", "retrieved_contexts": contexts}]
    statements = [f"Statement {i}." for i in range(10)]

    def respond(m, p, j):
        if "<statements>" not in p:
            return json.dumps({"statements": statements})
        verdict = {"evidence": [QUOTE, "1989", "ba" * 80], "reason": "r", "verdict": 1}
        return json.dumps({"verdicts": [{"statement": s, **verdict} for s in statements]})

    result = judged(records, [Faithfulness(evidence=True, strictness=3)], respond)
    (res,) = result.results
    assert res.score == 1.0 and len(res.statements) == 10
    quotes = res.statements[-1].models[0].evidence[0]
    assert [(q.field, q.start, q.end) for q in quotes] == [
        ("retrieved_contexts[1]", 4, 164), ("retrieved_contexts[0]", 35, 39), ("retrieved_contexts[1]", 5, 165)
    ]  # fmt: skip


def test_a_rubric_file_criterion_with_evidence_and_a_checklist_beside_it(tmp_path):
    """A quoting criterion of a rubric file is judged alone; the others of the run as a
    checklist; the long word costs neither."""
    path = tmp_path / "rubrics.yaml"
    path.write_text(
        "criteria:\n  - name: dated\n    version: 1\n    definition: The response must include a year.\n"
        "    evidence: true\n"
    )
    metrics = rubric_file_metrics(path)
    records = [{"id": "r", "user_input": "q", "response": "It fell in 1989. " + WORD}]
    result = judged(records, [*metrics, AspectCritic.predefined("conciseness")], lambda m, p, j: answer("1989"))
    dated = next(r for r in result.results if r.metric == "dated")
    assert [[(q.text, q.start) for q in s] for s in dated.models[0].evidence] == [[("1989", 11)]]


def test_the_quote_grammar_of_ten_megabyte_words_is_bounded_and_quick():
    start = time.perf_counter()
    grammar = quote_grammar(EvidenceJudgment.model_json_schema(), [WORD, WORD, "It fell in 1989."])
    (pieces,) = quotable_chunks([WORD, WORD], QUOTE_MAX_CHARS)
    assert time.perf_counter() - start < 5
    assert len(grammar) < 2 * QUOTE_SOURCE_CHARS and sum(map(len, pieces)) == QUOTE_SOURCE_CHARS
    assert set(pieces) == {QUOTE}  # the word cut into pieces of the quote bound, as far as the budget goes


def test_locating_quotes_reads_each_text_a_few_times_whatever_its_words():
    texts = [Quotable("retrieved_contexts[0]", "a" * 10_000_000), Quotable("retrieved_contexts[1]", WORD)]
    start = time.perf_counter()
    for quote in ("a" * 159 + "b", "b" + "a" * 159, ("a" * 79 + "b") * 2, "ba" * 80):
        located = locate_quotes([quote], texts)
        assert isinstance(located, str) if quote != "ba" * 80 else located[0].field == "retrieved_contexts[1]"
    assert time.perf_counter() - start < 5
