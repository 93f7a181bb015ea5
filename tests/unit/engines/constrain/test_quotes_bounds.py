"""Quote grammars whatever the record holds (engines/constrain/quotes.py, engines/constrain/grammars.py): a word
longer than the quote bound is still quotable by its pieces, a quote opens only where a span
can fill it, the quotable text is bounded so that llguidance always compiles the grammar, and
a grammar llguidance refuses (or a matcher that fails mid-decode) costs its own prompt or row
only. Driven through llguidance with a byte-level tokenizer (every byte a token), as
test_quotes.py does; on the real model: tests/integration/metrics/test_evidence_hostile.py."""

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localjury.engines.constrain.quotes import quote_grammar
from localjury.metrics._quoted import Quotable, locate_quotes
from localjury.metrics.evidence import QUOTE_MAX_CHARS, EvidenceJudgment

llguidance = pytest.importorskip("llguidance")
from localjury.engines.constrain.grammars import grammar_rows  # noqa: E402

SCHEMA = EvidenceJudgment.model_json_schema()
BASE64 = "QUJD" * 100  # the record: one word of 400 characters, over the 160 of a quote
WORD = "".join(random.Random(0).choices("abcdefghijklmnopqrstuvwxyz", k=400))  # a word of no period


def matcher(ll, sources, schema=SCHEMA):
    m = llguidance.LLMatcher(ll, llguidance.LLMatcher.grammar_from_lark(quote_grammar(schema, sources)), log_level=0)
    assert not m.is_error(), m.get_error()[:300]
    return m


def accepts(ll, tokenizer, sources, text, schema=SCHEMA) -> bool:
    m = matcher(ll, sources, schema)
    return all(m.consume_token(t) for t in tokenizer.encode(text)) and m.is_accepting()


def answer(*quotes: str) -> str:
    return json.dumps({"evidence": list(quotes), "reason": "r", "verdict": 1}, ensure_ascii=False)


def walk(m, ll, tokenizer, seed: int, prefix: str = "") -> str:
    """A random walk through the masks (any allowed token) from ``prefix`` until the end token
    is drawn; fails where the matcher errs (a mask of the end token alone, mid-JSON)."""
    rng = random.Random(seed)
    out = tokenizer.encode(prefix)
    for t in out:
        assert m.consume_token(t), m.get_error()
    for _ in range(1500):
        bits = np.unpackbits(np.frombuffer(m.compute_bitmask(), dtype=np.uint8), bitorder="little")
        assert not m.is_error(), m.get_error()[:200]
        token = rng.choice(bits[: ll.vocab_size].nonzero()[0].tolist())
        if token == tokenizer.eos_token_id:
            return tokenizer.decode(out)
        assert m.consume_token(token)
        out.append(token)
    pytest.fail("the walk did not end")


@pytest.mark.parametrize("sources", [[BASE64], [BASE64, "It fell in 1989."], [WORD + " b"]])
def test_a_word_longer_than_the_quote_bound_never_stalls_a_quote_that_opens(ll, byte_tokenizer, sources):
    """The issue's case: a quote opened on a text of one 400-character word had no span to
    fill it (llguidance: NoExtensionBias), and the run failed. Every walk that opens a quote
    now ends in an answer whose quotes are spans of the texts."""
    for seed in range(12):
        text = walk(matcher(ll, sources), ll, byte_tokenizer, seed, prefix='{"evidence": ["')
        value = EvidenceJudgment.model_validate_json(text)
        located = locate_quotes(value.evidence, [Quotable("r", s) for s in sources])
        assert value.evidence and not isinstance(located, str)


def test_a_long_word_is_quoted_by_its_prefix_or_one_piece_never_past_the_bound(ll, byte_tokenizer):
    bound = QUOTE_MAX_CHARS
    assert accepts(ll, byte_tokenizer, [WORD], answer(WORD[:bound]))  # its prefix
    assert accepts(ll, byte_tokenizer, [WORD], answer(WORD[bound : 2 * bound]))  # a piece
    assert accepts(ll, byte_tokenizer, [WORD], answer(WORD[2 * bound :]))  # its last, shorter piece
    assert not accepts(ll, byte_tokenizer, [WORD], answer(WORD[: bound + 1]))  # over the bound
    assert not accepts(ll, byte_tokenizer, [WORD], answer(WORD[4 : bound + 4]))  # across two pieces
    # Characters, not bytes, as JSON writes them: a word of 2-byte letters is cut at 160 letters.
    assert accepts(ll, byte_tokenizer, ["é" * 400], answer("é" * 160))
    from localjury.engines.constrain.quotes import quotable_chunks

    assert list(quotable_chunks([WORD], bound)) == [[WORD[:160], WORD[160:320], WORD[320:]]]
    (pieces,) = quotable_chunks(["é" * 400], bound)
    assert [len(p) for p in pieces] == [160, 160, 80]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(alphabet=st.sampled_from(["x", "é", "_", "7", "東", "\n", '"', " "]), min_size=1, max_size=400),
    bound=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_whatever_the_text_and_the_bound_a_walk_ends_in_spans(ll, byte_tokenizer, text, bound, seed):
    """Any text, any quote length (even below an escape sequence's, 2 for \\n and \\"): a walk
    never stalls, and each quote is a span no longer than the bound (as JSON writes it)."""
    schema = json.loads(json.dumps(SCHEMA))
    schema["properties"]["evidence"]["items"]["maxLength"] = bound
    out = walk(matcher(ll, [text], schema), ll, byte_tokenizer, seed)
    value = EvidenceJudgment.model_validate_json(out)
    for quote in value.evidence:
        assert quote in text and len(json.dumps(quote, ensure_ascii=False)) - 2 <= bound


def test_a_text_whose_every_chunk_is_longer_than_the_bound_offers_no_quote(ll, byte_tokenizer):
    schema = json.loads(json.dumps(SCHEMA))
    schema["properties"]["evidence"]["items"]["maxLength"] = 1  # \n is 2 characters in JSON
    for seed in range(20):  # a quote could open, and nothing could fill it
        assert EvidenceJudgment.model_validate_json(walk(matcher(ll, ["\n\n"], schema), ll, byte_tokenizer, seed))
    m = matcher(ll, ["\n\n"], schema)
    assert not all(m.consume_token(t) for t in byte_tokenizer.encode('{"evidence": ["'))  # no quote opens
    schema["properties"]["evidence"]["items"]["maxLength"] = 0
    assert '"[]"' in quote_grammar(schema, ["anything"]) and "substring_chunks" not in quote_grammar(schema, ["x"])
    from localjury.engines.constrain.quotes import quotable_chunks

    assert list(quotable_chunks(["\n\n", "ab"], 1)) == [["a", "b"]]


def test_the_quotable_text_is_bounded_and_a_megabyte_compiles(ll, byte_tokenizer):
    """1 MB of context (as many one-character chunks as characters, the worst case) made a
    grammar llguidance refused ("grammar too big"); now the first QUOTE_SOURCE_CHARS characters
    of the texts, in order, are quotable and what lies past them is not."""
    big = ". " * 500_000
    assert accepts(ll, byte_tokenizer, [big, "after"], answer(". . ."))
    assert not accepts(ll, byte_tokenizer, [big, "after"], answer("after"))  # past the bound
    from localjury.engines.constrain.quotes import QUOTE_SOURCE_CHARS, quotable_chunks

    offered = list(quotable_chunks([big, "after"], QUOTE_MAX_CHARS))
    assert sum(len(c) for parts in offered for c in parts) == QUOTE_SOURCE_CHARS and len(offered) == 1
    assert len(quote_grammar(SCHEMA, [big])) < 6 * QUOTE_SOURCE_CHARS
    # The budget spans the texts in order: a short first text leaves the rest to the next.
    first, second = quotable_chunks(["one two", "three " * 100, "four"], QUOTE_MAX_CHARS, budget=20)
    assert first == ["one", " ", "two"] and second == ["three", " ", "three", " "]  # cut after a whole chunk


def test_a_grammar_llguidance_refuses_costs_only_its_prompt_its_quotes(ll, byte_tokenizer, monkeypatch):
    """Past llguidance's own limit (here: with the bound lifted), that prompt's grammar is the
    schema's with empty quote arrays; the batch's other prompts keep theirs."""
    monkeypatch.setattr("localjury.engines.constrain.quotes.QUOTE_SOURCE_CHARS", 10**7, raising=False)
    huge = ". " * 100_000  # a grammar of a megabyte: past llguidance's initial lexer limit
    rows = grammar_rows(ll, SCHEMA, [[huge], ["It fell in 1989."]], 2, None)
    assert len(rows.matchers) == 4
    refused, kept = rows.matchers[0], rows.matchers[2]
    assert not refused.is_error() and not kept.is_error()
    opening = byte_tokenizer.encode('{"evidence": ["')
    assert not all(refused.consume_token(t) for t in opening)  # no quote opens: judged without quotes
    assert all(kept.consume_token(t) for t in byte_tokenizer.encode('{"evidence": ["It fell"], "reason": "'))
    from localjury.engines.constrain.grammars import checked_grammar, quote_matcher

    _, why = quote_matcher(ll, SCHEMA, [huge])
    assert "too big" in (why or "")
    # vLLM, which refuses a whole call for one bad grammar, is given the same fallback.
    assert checked_grammar(SCHEMA, [huge]) == quote_grammar(SCHEMA, [])
    assert checked_grammar(SCHEMA, ["It fell."]) == quote_grammar(SCHEMA, ["It fell."])


def test_a_matcher_that_fails_mid_decode_ends_its_row_and_the_others_go_on(ll, byte_tokenizer):
    import torch

    rows = grammar_rows(ll, SCHEMA, [["It fell in 1989."], ["It fell in 1989."]], 1, None)
    first = byte_tokenizer.encode("{")[0]
    rows.mask(torch.zeros(2, ll.vocab_size))
    rows.advance([byte_tokenizer.encode("x")[0], first], [False, False])  # row 0 writes what its grammar refuses
    logits = rows.mask(torch.zeros(2, ll.vocab_size))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [byte_tokenizer.eos_token_id]  # row 0 ends
    assert torch.isfinite(logits[1]).sum() >= 1 and not torch.isfinite(logits[1])[byte_tokenizer.eos_token_id]
    assert list(rows.failed) == [0] and "left the grammar" in rows.failed[0]
