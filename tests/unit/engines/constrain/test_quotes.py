"""Quoted evidence by construction (engines/constrain/quotes.py, engines/constrain/grammars.py): the grammar a
schema's quote arrays become, driven through llguidance with a byte-level tokenizer (every
byte a token), so that whatever a sampler picks from the masks, each quote is an exact span
of the record. The same grammars on the real models' tokenizers and engines:
tests/integration/metrics/test_evidence.py."""

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localjury.engines.constrain.quotes import chunks, has_quotes, quote_grammar
from localjury.errors import ConfigError
from localjury.metrics._quoted import Quotable, locate_quotes
from localjury.metrics.evidence import EvidenceJudgment
from localjury.metrics.faithfulness import NLI_STATEMENT_QUOTED
from localjury.types import QUOTE_KEY

llguidance = pytest.importorskip("llguidance")


SCHEMA = EvidenceJudgment.model_json_schema()


def matcher(ll, schema, sources):
    m = llguidance.LLMatcher(ll, llguidance.LLMatcher.grammar_from_lark(quote_grammar(schema, sources)), log_level=0)
    assert not m.is_error(), m.get_error()
    return m


def accepts(ll, tokenizer, schema, sources, text) -> bool:
    m = matcher(ll, schema, sources)
    return all(m.consume_token(t) for t in tokenizer.encode(text)) and m.is_accepting()


def answer(*quotes: str, verdict: int = 1) -> str:
    return json.dumps({"evidence": list(quotes), "reason": "r", "verdict": verdict}, ensure_ascii=False)


def test_chunks_are_words_single_characters_and_whole_escapes():
    parts = ["Say", " ", '\\"', "hi", '\\"', "\\n", "\\t", "now", ",", " ", "1989", "!"]
    assert chunks('Say "hi"\n\tnow, 1989!') == parts
    # scripts written without spaces: a character a chunk, so a quote can end inside a clause
    assert chunks("東京は首都 Zürich") == ["東", "京", "は", "首", "都", " ", "Zürich"]
    assert (
        "".join(chunks("any text: ünïcode \\ \x00 <|im_end|>"))
        == json.dumps("any text: ünïcode \\ \x00 <|im_end|>", ensure_ascii=False)[1:-1]
    )


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        (answer("9 November 1989"), True),
        (answer("The Berlin Wall fell on 9 November 1989", "border crossings."), True),
        (answer(verdict=0), True),  # nothing quoted
        (answer("9 November 1990"), False),  # a year the response does not hold
        (answer("ovember 1989"), False),  # starts inside a word
        (answer("9 Novem"), False),  # ends inside a word
        (answer("fell on 9 November 1989, when"), True),
        (answer("1989", "1989", "1989", "1989"), False),  # four quotes: at most three
        (answer(""), False),  # an empty quote
        (answer("Wall fell", "it opened"), False),  # one of two not in the record
    ],
)
def test_the_grammar_takes_spans_of_the_record_and_nothing_else(ll, byte_tokenizer, text, accepted):
    record = "The Berlin Wall fell on 9 November 1989, when East German authorities opened the border crossings."
    assert accepts(ll, byte_tokenizer, SCHEMA, [record], text) is accepted


def test_a_quote_can_come_from_any_source_but_not_span_two(ll, byte_tokenizer):
    sources = ["Paris is in France.", "It rains in Paris."]
    assert accepts(ll, byte_tokenizer, SCHEMA, sources, answer("Paris is in France", "It rains"))
    assert not accepts(ll, byte_tokenizer, SCHEMA, sources, answer("France. It rains"))


def test_without_any_text_to_quote_the_evidence_is_empty(ll, byte_tokenizer):
    assert accepts(ll, byte_tokenizer, SCHEMA, [], answer())
    assert accepts(ll, byte_tokenizer, SCHEMA, ["", ""], answer())
    assert not accepts(ll, byte_tokenizer, SCHEMA, [], answer("anything"))


def test_a_quote_holds_escapes_whole_and_reads_back_as_the_span(ll, byte_tokenizer):
    record = 'He wrote "stop"\nand left\\.'
    assert accepts(ll, byte_tokenizer, SCHEMA, [record], answer('He wrote "stop"\nand left\\.'))
    assert accepts(ll, byte_tokenizer, SCHEMA, [record], answer('"stop"'))
    # half an escape sequence (the n of \n) is no place to start
    m = matcher(ll, SCHEMA, [record])
    assert not all(m.consume_token(t) for t in byte_tokenizer.encode('{"evidence": ["nand'))


def test_quote_arrays_inside_arrays_of_objects_compose_with_the_rest_of_the_schema(ll, byte_tokenizer):
    schema = NLI_STATEMENT_QUOTED.json_schema()
    schema["properties"]["verdicts"].update(minItems=2, maxItems=2)
    good = json.dumps(
        {
            "verdicts": [
                {"statement": "s1", "evidence": ["rains"], "reason": "r", "verdict": 1},
                {"statement": "s2", "evidence": [], "reason": "r", "verdict": 0},
            ]
        }
    )
    assert accepts(ll, byte_tokenizer, schema, ["It rains."], good)
    assert not accepts(ll, byte_tokenizer, schema, ["It rains."], good.replace('"rains"', '"snows"'))
    one = json.dumps({"verdicts": [{"statement": "s1", "evidence": [], "reason": "r", "verdict": 1}]})
    assert not accepts(ll, byte_tokenizer, schema, ["It rains."], one)  # two statements, two verdicts


def test_a_schema_without_quote_arrays_is_its_json_with_the_examples_separators(ll, byte_tokenizer):
    """What vLLM's guidance backend is given for every schema: objects written with ", " and
    ": " as the prompts' examples are, never free whitespace."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
    }
    assert not has_quotes(schema)
    assert accepts(ll, byte_tokenizer, schema, ["text"], '{"a": 12, "b": "x y"}')
    assert not accepts(ll, byte_tokenizer, schema, ["text"], '{"a": 12,\n "b": "x"}')
    assert not accepts(ll, byte_tokenizer, schema, ["text"], '{"a":12, "b": "x"}')
    assert not accepts(ll, byte_tokenizer, schema, ["text"], '{"b": "x", "a": 12}')  # the schema's order


def test_quotes_that_are_not_an_array_of_strings_are_refused():
    with pytest.raises(ConfigError, match="marks an array of strings"):
        schema = {"type": "object", "properties": {"q": {"type": "string", QUOTE_KEY: True}}, "required": ["q"]}
        quote_grammar(schema, ["x"])
    with pytest.raises(ConfigError, match="inside objects and arrays only"):
        quote_grammar({"anyOf": [{"type": "array", "items": {"type": "string"}, QUOTE_KEY: True}]}, ["x"])
    with pytest.raises(ConfigError, match="inside objects and arrays only"):  # an optional property
        quote_grammar({"type": "object", "properties": {"q": SCHEMA["properties"]["evidence"]}}, ["x"])


HOSTILE = (
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "<|im_end|>",
                    "<|im_start|>assistant\n",
                    "</response>",
                    '"]}',
                    '\\"',
                    "\\",
                    "\n",
                    "1989",
                    "2010 and 2011",
                    "é",
                    "日本語",
                    "🙂",
                    "\x00",
                    "\u2028",
                    " the the the ",
                ]
            ),
            st.text(max_size=12),
        ),
        min_size=1,
        max_size=12,
    )
    .map("".join)
    .filter(bool)
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE, seed=st.integers(0, 2**32 - 1))
def test_whatever_a_sampler_picks_every_quote_is_a_span_of_the_record(ll, byte_tokenizer, text, seed):
    """A random walk through the masks (any allowed token, chosen at random, until the end
    token is allowed and drawn): the output always parses, and each quote is a substring of
    the hostile record it was constrained to."""
    rng = random.Random(seed)
    m = matcher(ll, SCHEMA, [text])
    out: list[int] = []
    for _ in range(800):
        bits = np.unpackbits(np.frombuffer(m.compute_bitmask(), dtype=np.uint8), bitorder="little")
        allowed = bits[: ll.vocab_size].nonzero()[0].tolist()
        assert allowed
        token = rng.choice(allowed)
        if token == byte_tokenizer.eos_token_id:
            break
        assert m.consume_token(token)
        out.append(token)
    else:
        pytest.fail("the walk did not end")
    value = EvidenceJudgment.model_validate_json(byte_tokenizer.decode(out))
    assert all(q in text for q in value.evidence)
    assert not isinstance(locate_quotes(value.evidence, [Quotable("response", text)]), str)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE, data=st.data())
def test_every_span_of_whole_chunks_is_a_quote_and_reads_back_as_itself(ll, byte_tokenizer, text, data):
    parts = chunks(text)
    i = data.draw(st.integers(0, len(parts) - 1))
    j = data.draw(st.integers(i + 1, len(parts)))
    body = "".join(parts[i:j])
    quote = json.loads(f'"{body}"')
    if len(body) > 160:
        return
    written = '{"evidence": ["' + body + '"], "reason": "r", "verdict": 1}'
    assert accepts(ll, byte_tokenizer, SCHEMA, [text], written)
    assert quote in text


def test_locate_quotes_gives_offsets_and_names_a_quote_not_there():
    texts = [Quotable("response", "It fell in 1989."), Quotable("retrieved_contexts[0]", "Walls fall.")]
    located = locate_quotes(["1989", "Walls"], texts)
    assert [(q.field, q.start, q.end) for q in located] == [("response", 11, 15), ("retrieved_contexts[0]", 0, 5)]
    assert texts[0].text[11:15] == "1989"
    # a text shown from where it starts in the record (after a response's thinking): offsets in the record's
    (after,) = locate_quotes(["1989"], [Quotable("response", "It fell in 1989.", 20)])
    assert (after.start, after.end) == (31, 35)
    assert locate_quotes(["1990"], texts) == "quotes what is not in the record: '1990'"


def test_a_quote_of_digits_is_never_read_as_the_verdict(byte_tokenizer, ll):
    """Inside the quote "2010" of "2010 and 2011", after "201" the mask allows only 0 and 1,
    as it does at the verdict: the decision figures are read at the verdict's key only."""
    import torch

    from localjury.engines.constrain.grammars import grammar_rows
    from localjury.engines.constrain.masks import VerdictTokens

    rows = grammar_rows(ll, SCHEMA, [["in 2010 and 2011"]], 1, VerdictTokens(byte_tokenizer))
    for token in byte_tokenizer.encode('{"evidence": ["2010"], "reason": "r", "verdict": 1}'):
        logits = torch.zeros(1, ll.vocab_size)
        logits[0, byte_tokenizer.convert_tokens_to_ids("1")] = 1.0
        rows.mask(logits)
        rows.advance([token], [False])
    ((p_pass,),) = rows.verdict_probs
    assert p_pass == pytest.approx(torch.tensor([1.0, 0.0]).softmax(0)[0].item())
