"""One record never fails a run with quoted evidence, on the real tiny model (SmolLM2) through
the real llama.cpp engine: a response that is one word longer than a quote may be (its
grammar once let a quote open that no span could fill, and llguidance's error ended the whole
run), and a megabyte of contexts cut to the judge's context under ``on_overflow="truncate"``
(its grammar, built from the whole megabyte, was too big to compile). Each record is judged,
every quote an exact span of its record. What the judge quotes and decides is not asserted.

The grammar itself, whatever the text: tests/unit/engines/constrain/test_quotes_bounds.py."""

import pytest

from localjury import AspectCritic, evaluate
from localjury.metrics.faithfulness import Faithfulness

pytestmark = pytest.mark.slow

RECORDS = [
    {"id": "plain", "user_input": "When did it fall?", "response": "The Wall fell on 9 November 1989."},
    {"id": "base64", "user_input": "Encode ABC.", "response": "QUJD" * 100},
]


def spans(evidence, text):
    for sample in evidence or []:
        for quote in sample or []:
            assert text[quote.start : quote.end] == quote.text


def test_a_word_longer_than_a_quote_beside_a_normal_record_is_judged_with_it(smollm):
    """The same grammar constrains the transformers engine and vLLM's guidance backend."""
    critic = AspectCritic("dated", "The response must include a specific date or year.", evidence=True, strictness=2)
    result = evaluate(RECORDS, [critic], [smollm], engine="llamacpp", use_cache=False, seed=0, max_tokens=160)
    assert sorted(r.record_id for r in result.results) == ["base64", "plain"]
    texts = {r["id"]: r["response"] for r in RECORDS}
    for r in result.results:
        (m,) = r.models
        assert r.error is None and m.error is None and len(m.votes) == 2
        assert all(i.problem == "cut off by the token budget (max_tokens)" for i in m.invalid)
        spans(m.evidence, texts[r.record_id])


def test_faithfulness_on_a_megabyte_of_contexts_cut_to_the_context_quotes_what_it_shows(smollm):
    big = "The Wall fell on 9 November 1989. " + "Unrelated filler text about other things. " * 24_000
    records = [
        {"id": "big", "user_input": "When did the Wall fall?", "response": "It fell in 1989.",
         "retrieved_contexts": [big]},
        {"id": "small", "user_input": "When did the Wall fall?", "response": "It fell in 1989.",
         "retrieved_contexts": ["The Wall fell on 9 November 1989."]},
    ]  # fmt: skip
    small = smollm.model_copy(update={"context_length": 4096})  # a short cut: a short prefill
    result = evaluate(records, [Faithfulness(evidence=True)], [small], engine="llamacpp", on_overflow="truncate",
                      use_cache=False, seed=0)  # fmt: skip
    assert sorted(r.record_id for r in result.results) == ["big", "small"]
    contexts = {r["id"]: r["retrieved_contexts"][0] for r in records}
    for r in result.results:
        assert r.error is None, r.error
        for statement in r.statements or []:
            (m,) = statement.models
            assert m.evidence is not None
            spans(m.evidence, contexts[r.record_id])
