"""Decoding under llguidance grammars: one matcher per row, each on its own prompt's grammar
(:func:`~localjury.engines.constrain.quotes.quote_grammar`, behind a thinking block where the
judge thinks: :mod:`~localjury.engines.constrain.thinking_budget`), writing the same bitmasks as
Outlines' guides into the same batched mask.

llguidance (the Rust library behind guidance, also one of vLLM's structured-output backends)
compiles a grammar lazily, in milliseconds, and computes a row's mask in well under a
millisecond on Qwen2.5's 151k-token vocabulary: a grammar per prompt costs nothing worth
caching, where an Outlines index per record's text would cost seconds.
"""

from __future__ import annotations

import ctypes
import logging
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import llguidance
import llguidance.hf
import numpy as np

from localjury.engines.constrain.index_cache import tokenizer_key
from localjury.engines.constrain.lru import Lru
from localjury.engines.constrain.masks import MaskedRows, VerdictTokens
from localjury.engines.constrain.quotes import quote_grammar
from localjury.engines.constrain.thinking_budget import ThinkingBudget
from localjury.types import THINK_CLOSE, THINK_OPEN

log = logging.getLogger(__name__)


class Thinking(NamedTuple):
    """How a batch's rows think: their budget, and the tokens of the close (``\\n</think>`` as
    the model's tokenizer writes it) that a row whose budget is spent writes next."""

    budget: ThinkingBudget
    close_ids: Sequence[int]


#: llguidance tokenizers by (tokenizer content, logit rows, end tokens): 1-1.5 s to build for
#: a 151k vocabulary, shared by the engines of a process.
_TOKENIZERS: Lru[tuple[str, int, tuple[int, ...]], Any] = Lru(4)


def ll_tokenizer(hf_tokenizer: Any, vocab: int, eos_ids: Sequence[int]) -> Any:
    """llguidance's tokenizer of a fast Hugging Face tokenizer, its masks ``vocab`` tokens wide
    (the model's logit rows) and any of ``eos_ids`` ending a sample."""

    def make() -> Any:
        return llguidance.hf.from_tokenizer(hf_tokenizer, n_vocab=vocab, eos_token=list(eos_ids))

    key = tokenizer_key(hf_tokenizer)
    return make() if key is None else _TOKENIZERS.get_or_make((key, vocab, tuple(eos_ids)), make)


def _matcher(tokenizer: Any, grammar: str) -> Any:
    return llguidance.LLMatcher(tokenizer, llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0)


def _grammar(schema: dict[str, Any], texts: Sequence[str], thinking: ThinkingBudget | None) -> str:
    """One prompt's grammar: its quote grammar, behind a thinking block where it thinks."""
    grammar = quote_grammar(schema, texts)
    return thinking.grammar(grammar) if thinking is not None else grammar


def quote_matcher(
    tokenizer: Any, schema: dict[str, Any], texts: Sequence[str], thinking: ThinkingBudget | None = None
) -> tuple[Any, str | None]:
    """A matcher of one prompt's quote grammar (behind a ``thinking`` block where given), and
    None; where llguidance refuses that grammar, a matcher of the schema with its quote arrays
    empty (the prompt judged without quotes), and llguidance's reason. A grammar bounded as
    :func:`~localjury.engines.constrain.quotes.quote_grammar` bounds it is not expected to be
    refused: this keeps a refusal to the prompt of one record.

    Raises:
        RuntimeError: Even the grammar without quotes does not compile (a schema llguidance
            cannot follow, the same for every prompt).
    """
    matcher = _matcher(tokenizer, _grammar(schema, texts, thinking))
    if not matcher.is_error():
        return matcher, None
    refused = matcher.get_error()
    matcher = _matcher(tokenizer, _grammar(schema, (), thinking))
    if matcher.is_error():
        raise RuntimeError(f"the quote grammar does not compile: {matcher.get_error()}")
    return matcher, refused


def checked_grammar(schema: dict[str, Any], texts: Sequence[str], thinking: ThinkingBudget | None = None) -> str:
    """One prompt's quote grammar (behind a ``thinking`` block where given) for vLLM's guidance
    backend; the schema's grammar with its quote arrays empty where llguidance refuses that one
    (as :func:`quote_matcher` does), so that vLLM, which refuses a whole call for one bad
    grammar, judges the prompt without quotes."""
    grammar = _grammar(schema, texts, thinking)
    refused = texts and llguidance.LLMatcher.validate_grammar(llguidance.LLMatcher.grammar_from_lark(grammar))
    if refused:
        log.warning("llguidance refused a prompt's quote grammar (%s); it is judged without quotes", refused)
        return _grammar(schema, (), thinking)
    return grammar


class GrammarRows(MaskedRows):
    """One llguidance matcher per row of a decoding batch (``matchers``: a prompt's, copied for
    each of its samples).

    A decision is read only where a row's text so far ends with the decision's key
    (``"verdict": ``): a quote of a text with numbers in it can leave only ``0`` and ``1``
    allowed, which the masks alone would take for a verdict.

    A matcher that fails while its row is decoded (llguidance past one of its limits, a token
    it refuses) stays in error: its mask then allows the end token alone, so that row ends where
    it is (its sample abstains, as output that does not parse) and the batch's other rows go
    on; ``failed`` holds why, by row of the starting batch.

    With ``thinking``, each row's thinking tokens are counted (from the end of the opening the
    grammar writes); where a row's budget is spent, its mask allows only the next token of the
    close (``thinking.close_ids``) until it is written, after the last byte of a character.
    """

    def __init__(
        self,
        tokenizer: Any,
        matchers: Sequence[Any],
        verdicts: VerdictTokens | None = None,
        thinking: Thinking | None = None,
    ) -> None:
        super().__init__(len(matchers), verdicts)
        self.tokenizer = tokenizer
        self.matchers = list(matchers)
        self.failed: dict[int, str] = {}
        """Why a row's matcher failed while it was decoded, by row of the starting batch."""
        key = verdicts.decision.key if verdicts is not None else "verdict"
        self._key = re.compile(rb'"' + re.escape(key.encode()) + rb'":\s*"?$')
        self._tails = [b""] * len(matchers)
        self._thinking = thinking
        rows = len(matchers) if thinking is not None else 0
        self._left = [thinking.budget.tokens if thinking is not None else 0] * rows
        """Per row still thinking, the tokens its budget has left; -1 once it closed."""
        self._closing: list[list[int]] = [[] for _ in range(rows)]
        """Per row, the close's tokens still to write (its budget is spent)."""
        self._started = [thinking is not None and thinking.budget.opened] * rows
        """Per row, whether its block is open (the prompt opened it, or the row wrote the opening)."""

    def _write(self, ptr: int, width: int) -> None:
        for row, matcher in enumerate(self.matchers):
            matcher.unsafe_compute_mask_ptr(ptr + row * width * 4, width * 4)
            if matcher.is_error():
                self._fail(row, f"the grammar failed: {matcher.get_error()}")
        if self._thinking is not None:
            words = np.ctypeslib.as_array((ctypes.c_uint32 * (len(self.matchers) * width)).from_address(ptr))
            for row, closing in enumerate(self._closing):
                if closing:  # the budget is spent: the close's next token is the only one allowed
                    words[row * width : (row + 1) * width] = 0
                    words[row * width + closing[0] // 32] = 1 << (closing[0] % 32)

    def _advance_row(self, row: int, token: int) -> None:
        matcher = self.matchers[row]
        if not matcher.consume_token(token):  # the matcher is in error now: the row ends at the next step
            self._fail(row, f"a sampled token left the grammar: {matcher.get_error()}")
        self._tails[row] = (self._tails[row] + self.tokenizer.decode_bytes([token]))[-32:]
        if self._thinking is not None and self._left[row] >= 0:
            self._think(row)

    def _think(self, row: int) -> None:
        """Count a thinking row's token against its budget: where it is spent, the close follows."""
        assert self._thinking is not None
        if not self._started[row]:  # the opening the grammar writes is not thinking
            self._started[row] = (THINK_OPEN + "\n").encode() in self._tails[row]
            return
        if self._closing[row]:
            self._closing[row].pop(0)
        else:
            self._left[row] = max(0, self._left[row] - 1)
            # A token may end inside a character (byte tokens): the close waits for its last byte.
            if self._left[row] == 0 and _whole_characters(self._tails[row]):
                self._closing[row] = list(self._thinking.close_ids)
        if THINK_CLOSE.encode() in self._tails[row]:
            self._left[row], self._closing[row] = -1, []

    def _fail(self, row: int, why: str) -> None:
        """Note why a row's matcher failed (once), and say so: its sample abstains."""
        start = self._rows[row]
        if start not in self.failed:
            self.failed[start] = why
            log.warning("%s; that sample ends here and abstains (the other samples go on)", why)

    def _keep(self, keep: list[int]) -> None:
        self.matchers = [self.matchers[r] for r in keep]
        self._tails = [self._tails[r] for r in keep]
        if self._thinking is not None:
            self._left = [self._left[r] for r in keep]
            self._closing = [self._closing[r] for r in keep]
            self._started = [self._started[r] for r in keep]

    def _at_decision(self, row: int) -> bool:
        return self._key.search(self._tails[row]) is not None


def _whole_characters(text: bytes) -> bool:
    """Whether UTF-8 ``text`` does not end inside a character: its last lead byte has all its
    continuation bytes (stray continuation bytes count as whole)."""
    follow = len(text) - len(text.rstrip(bytes(range(0x80, 0xC0))))
    if follow == len(text):
        return True
    lead = text[-follow - 1]
    size = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    return size == 1 or follow >= size - 1


def grammar_rows(
    tokenizer: Any,
    schema: dict[str, Any],
    quotes: Sequence[Sequence[str]],
    n: int,
    verdicts: VerdictTokens | None,
    thinking: Thinking | None = None,
) -> GrammarRows:
    """The rows of a batch of prompts, ``n`` samples each, each prompt's quotes only from its
    own texts (``quotes``, one sequence of texts per prompt), each sample thinking first where
    ``thinking`` is given; a prompt whose grammar llguidance refuses is judged without quotes
    (:func:`quote_matcher`), the others as they are."""
    compiled: dict[tuple[str, ...], Any] = {}
    matchers = []
    for texts in quotes:
        key = tuple(texts)
        if key not in compiled:
            budget = thinking.budget if thinking is not None else None
            compiled[key], refused = quote_matcher(tokenizer, schema, key, budget)
            if refused is not None:
                log.warning(
                    "llguidance refused a prompt's quote grammar (%s); that prompt is judged without quotes", refused
                )
        matchers += [compiled[key].deep_copy() for _ in range(n)]
    return GrammarRows(tokenizer, matchers, verdicts, thinking)
