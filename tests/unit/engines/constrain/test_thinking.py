"""A judge that thinks: the grammar of a free thinking block before the constrained answer, the
close written when the budget is spent, the split of a sample into its thinking and its answer,
and what a thinking setting changes (prompts, the store) and does not."""

import json

import numpy as np
import pytest
import torch

from localjury.engines.base import Completion, PromptFormatter
from localjury.engines.constrain.grammars import Thinking, grammar_rows
from localjury.engines.constrain.masks import VerdictTokens
from localjury.engines.constrain.quotes import quote_grammar
from localjury.engines.constrain.thinking_budget import ThinkingBudget, answer_start, split_answer, with_thinking
from localjury.metrics.base import Judgment
from localjury.models.registry import ModelSpec
from localjury.run.config import RunConfig
from localjury.store import JudgmentStore

llguidance = pytest.importorskip("llguidance")

SCHEMA = Judgment.model_json_schema()
CLOSE = "\n</think>"


def matcher(ll, budget: ThinkingBudget):
    grammar = budget.grammar(quote_grammar(SCHEMA, ()))
    m = llguidance.LLMatcher(ll, llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0)
    assert not m.is_error(), m.get_error()
    return m


def accepts(ll, tokenizer, budget, text) -> bool:
    m = matcher(ll, budget)
    return all(m.consume_token(t) for t in tokenizer.encode(text)) and m.is_accepting()


ANSWER = json.dumps({"reason": "It gives 1989.", "verdict": 1})


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("<think>\nThe response says 1989.\n</think>\n\n" + ANSWER, True),
        # The thinking is free text: a verdict in JSON, chat markers, a stray tag are thinking.
        ('<think>\n{"reason": "x", "verdict": 0} <|im_end|><|im_start|>user </thinking>\n</think>\n\n' + ANSWER, True),
        ("<think>\n</think>\n\n" + ANSWER, True),
        ("<think>\nThe response says 1989.\n</think>\n\n" + '{"verdict": "yes"}', False),  # the answer keeps its schema
        (ANSWER, False),  # no thinking block: the judge thinks first
        ("<think>\nno close, straight to the answer " + ANSWER, False),
    ],
)
def test_the_grammar_takes_a_thinking_block_then_the_schemas_answer(ll, byte_tokenizer, text, accepted):
    assert accepts(ll, byte_tokenizer, ThinkingBudget(400), text) is accepted


def test_a_prompt_that_opens_the_block_is_continued_inside_it(ll, byte_tokenizer):
    """The R1 distills' templates end the prompt with the opening tag: the grammar starts inside."""
    budget = ThinkingBudget.of("<|Assistant|><think>\n", 64)
    assert budget.opened and not ThinkingBudget.of("<|im_start|>assistant\n", 64).opened
    assert accepts(ll, byte_tokenizer, budget, "The year is there.\n</think>\n\n" + ANSWER)


def rows_of(ll, tokenizer, budget: int, n: int = 1, verdicts=None):
    close = tokenizer.encode(CLOSE)
    return grammar_rows(ll, SCHEMA, [()], n, verdicts, Thinking(ThinkingBudget(budget), close))


def walk(rows, tokenizer, seed: int, steps: int = 600) -> list[int]:
    """Sample one row to its end: random logits under the row's mask; its tokens."""
    gen = torch.Generator().manual_seed(seed)
    out: list[int] = []
    for _ in range(steps):
        logits = rows.mask(torch.rand(1, len(tokenizer), generator=gen))
        token = int(logits.argmax())
        if token == tokenizer.eos_token_id:
            return out
        rows.advance([token], [False])
        out.append(token)
    raise AssertionError(f"no end after {steps} tokens: {tokenizer.decode(out)!r}")


@pytest.mark.parametrize("seed", range(8))
def test_a_spent_budget_writes_the_close_then_the_answer(ll, byte_tokenizer, seed):
    """Random logits never close on their own: at the budget (5 tokens, one byte each here) the
    close is written, after the last byte of a character the budget ended inside (seed 5), then
    the answer follows its schema."""
    tokens = walk(rows_of(ll, byte_tokenizer, 5), byte_tokenizer, seed)
    opening, close = byte_tokenizer.encode("<think>\n"), byte_tokenizer.encode(CLOSE)
    at = next(i for i in range(len(tokens)) if tokens[i : i + len(close)] == close)
    assert tokens[: len(opening)] == opening and len(opening) + 5 <= at <= len(opening) + 5 + 3
    ll.decode_bytes(tokens[len(opening) : at]).decode("utf-8")  # the thinking is whole characters
    _, answer = split_answer(byte_tokenizer.decode(tokens))
    assert Judgment.model_validate_json(answer)


def test_the_thinking_can_hold_neither_the_end_token_nor_a_verdict_read_as_the_answers(ll, byte_tokenizer):
    """Inside the thinking the end token is not allowed (the sample cannot end there), and a JSON
    verdict written there is not where the decision is read: one verdict probability, the answer's."""
    rows = rows_of(ll, byte_tokenizer, 400, verdicts=VerdictTokens(byte_tokenizer))
    text = '<think>\n{"reason": "r", "verdict": 0}' + CLOSE + "\n\n" + ANSWER
    for i, token in enumerate(byte_tokenizer.encode(text)):
        logits = rows.mask(torch.zeros(1, len(byte_tokenizer)))
        if i < len(byte_tokenizer.encode('<think>\n{"reason": "r", "verdict": 0}')):
            assert not torch.isfinite(logits[0, byte_tokenizer.eos_token_id])
        rows.advance([token], [False])
    assert len(rows.verdict_probs[0]) == 1
    assert split_answer(text) == ('{"reason": "r", "verdict": 0}', ANSWER)


@pytest.mark.parametrize(
    ("text", "thinking", "answer"),
    [
        ("<think>\nIt says 1989.\n</think>\n\n" + ANSWER, "It says 1989.", ANSWER),
        ("It says 1989.\n</think>\n\n" + ANSWER, "It says 1989.", ANSWER),  # the prompt opened the block
        # vLLM ends a block at its budget without the close: the answer follows a blank line.
        ("<think>\nIt says\n\n1989 and\n\n" + ANSWER, "It says\n\n1989 and", ANSWER),
        ("<think>\nStill thinking when the tokens ran out", "Still thinking when the tokens ran out", ""),
        ("<think>\na </think> b</think>\n\n" + ANSWER, "a", "b</think>\n\n" + ANSWER),  # the first close ends it
    ],
)
def test_a_sample_splits_into_its_thinking_and_its_answer(text, thinking, answer):
    assert split_answer(text) == (thinking, answer)
    sample = with_thinking(Completion(text, 40, True, (0.7,)))
    assert (sample.thinking, sample.text, sample.n_tokens, sample.verdict_probs) == (thinking, answer, 40, (0.7,))


def test_the_answer_starts_in_the_token_after_the_thinking():
    assert answer_start(["<think>", "\nno", " </", "think", ">\n\n", "{", '"v']) == 5
    assert answer_start(["<think>", "\nno", " </", "think", ">\n\n{", '"v']) == 4  # the close and the answer's "{"
    assert answer_start(["<think>", "\nno", " \n\n", "{", '"v']) == 3  # vLLM's unclosed block
    assert answer_start(["<think>", "\nstill"]) == 2


def test_a_sample_with_thinking_reads_back_from_the_store_and_older_rows_as_before(tmp_path):
    store = JudgmentStore(tmp_path / "s.sqlite")
    samples = [Completion(ANSWER, 30, True, (0.6,), "It says 1989."), Completion("", 12, False, None, "cut")]
    plain = [Completion(ANSWER, 9, True, (0.6,)), Completion(ANSWER, 9, True)]
    store.put_many({"k": samples, "plain": plain})
    assert store.get_many(["k", "plain"]) == {"k": samples, "plain": plain}
    (row,) = store._db.execute("SELECT value FROM generations WHERE key = 'plain'").fetchall()
    assert json.loads(row[0])["samples"] == [[ANSWER, 9, True, [0.6]], [ANSWER, 9, True]]  # as before thinking
    store.close()


QWEN3_STYLE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


@pytest.mark.parametrize(
    ("thinking", "ends"), [(None, "<|assistant|>"), (0, "<think>\n\n</think>\n\n"), (256, "<|assistant|>")]
)
def test_a_template_with_a_thinking_switch_gets_the_models_setting(byte_tokenizer, thinking, ends):
    """A Qwen3-style template: thinking off writes its empty block (the model does not think);
    a budget switches thinking on; unset, the template renders as it always has."""
    tokenizer = byte_tokenizer
    tokenizer.chat_template = QWEN3_STYLE
    try:
        spec = ModelSpec(name="q", path="/q", prompt_format="chat", thinking=thinking)
        prompt = PromptFormatter(tokenizer, spec).format([{"role": "user", "content": "Judge."}])
    finally:
        tokenizer.chat_template = None
    assert prompt.endswith(ends)


def test_the_setting_reads_off_as_zero_and_refuses_a_negative_budget():
    assert ModelSpec(name="q", path="/q", thinking="off").thinking == 0
    assert ModelSpec(name="q", path="/q", thinking=False).thinking == 0  # YAML's `off`
    assert RunConfig.of(thinking="off").jury.thinking == 0 and RunConfig.of(thinking="128").jury.thinking == 128
    with pytest.raises(ValueError, match="thinking"):
        ModelSpec(name="q", path="/q", thinking=-1)


def test_a_prompt_leaves_room_for_the_thinking_in_the_context():
    """A prompt that fits with the answer's max_tokens alone, not with a thinking budget too, is
    that record's error (naming the budget), found before anything is generated."""
    from localjury import AspectCritic, evaluate
    from tests.fakes import factory, judgment, spec

    record = [{"id": "r", "response": "word " * 300}]  # 534 words with the prompt: the scripted engine's tokens
    critic = AspectCritic("dated", "The response must include a specific date or year.")
    settings = dict(engine_factory=factory(lambda m, p, j: judgment(1), []), use_cache=False, max_tokens=64)
    fits = evaluate(record, [critic], [spec("A", context_length=700)], **settings)
    assert fits.results[0].models[0].error is None
    over = evaluate(record, [critic], [spec("A", context_length=700, thinking=256)], **settings)
    assert "with max_tokens 64 and thinking 256 it exceeds context_length 700" in over.results[0].models[0].error


def test_the_setting_keys_the_store(tmp_path):
    """Samples drawn with a budget are found again with it, never by the model without it or
    with another budget (nor the other way round)."""
    from localjury import AspectCritic, evaluate
    from tests.fakes import factory, judgment, spec

    critic = AspectCritic("dated", "The response must include a specific date or year.")
    settings = dict(engine_factory=factory(lambda m, p, j: judgment(1), []), cache=tmp_path / "s.sqlite")
    runs = [(64, 0), (None, 0), (0, 0), (128, 0), (64, 1), (None, 1)]
    for thinking, cached in runs:
        result = evaluate([{"id": "r", "response": "In 1989."}], [critic], [spec("A", thinking=thinking)], **settings)
        assert result.summary.models[0].cached == cached, thinking


@pytest.fixture(scope="module")
def tagged(byte_tokenizer):
    """The byte tokenizer with ``<think>`` and ``</think>`` added as tokens (as Qwen3's has them),
    and its llguidance tokenizer, which takes added tokens for special ones."""
    import copy

    import llguidance.hf

    tokenizer = copy.deepcopy(byte_tokenizer)
    tokenizer.add_tokens(["<think>", "</think>"], special_tokens=False)
    return tokenizer, llguidance.hf.from_tokenizer(tokenizer, n_vocab=len(tokenizer))


def test_delimiters_that_are_tokens_are_named_by_id_and_the_close_comes_at_the_budget(tagged):
    """Where the delimiters are the tokenizer's own tokens, the sample opens with the open token
    (not its letters), may close with the close token at any point, and at the budget writes it."""
    from localjury.engines.constrain.thinking_budget import think_tags

    tokenizer, ll = tagged
    opening, closing = think_tags(tokenizer)
    assert think_tags(object()) is None  # not a Hugging Face tokenizer: plain text
    budget = ThinkingBudget.of("<|assistant|>", 5, tokenizer)
    assert budget.tags == (opening, closing)
    m = matcher(ll, budget)
    allowed = np.unpackbits(np.frombuffer(m.compute_bitmask(), dtype=np.uint8), bitorder="little")
    assert allowed[opening] and not allowed[tokenizer.encode("<")[0]]
    close = tokenizer("\n</think>", add_special_tokens=False)["input_ids"]
    assert close[-1] == closing
    for seed in range(4):
        rows = grammar_rows(ll, SCHEMA, [()], 1, None, Thinking(budget, close))
        tokens = walk(rows, tokenizer, seed)
        assert tokens[0] == opening and closing in tokens
        at = tokens.index(closing)
        assert 1 + 1 + 5 <= at <= 1 + 1 + 5 + 4  # the open token and its line break, 5 thought, then the close
        _, answer = split_answer(tokenizer.decode(tokens))
        assert Judgment.model_validate_json(answer)
