"""Quote-constrained decoding over llguidance: one matcher per row, each on its own prompt's
grammar (:func:`~localjury.engines._quotes.quote_grammar`), writing the same bitmasks as
Outlines' guides into the same batched mask.

llguidance (the Rust library behind guidance, also one of vLLM's structured-output backends)
compiles a grammar lazily, in milliseconds, and computes a row's mask in well under a
millisecond on Qwen2.5's 151k-token vocabulary (``benchmarks/quote_constraint.py``): a grammar
per prompt costs nothing worth caching, where an Outlines index per record's text would cost
seconds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import llguidance
import llguidance.hf

from localjury.engines._index_cache import Lru, tokenizer_key
from localjury.engines._masks import MaskedRows, VerdictTokens
from localjury.engines._quotes import quote_grammar

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


class QuoteRows(MaskedRows):
    """One llguidance matcher per row of a decoding batch: ``grammars`` holds each row's
    grammar (a prompt's, repeated for its samples).

    A decision is read only where a row's text so far ends with the decision's key
    (``"verdict": ``): a quote of a text with numbers in it can leave only ``0`` and ``1``
    allowed, which the masks alone would take for a verdict.
    """

    def __init__(self, tokenizer: Any, grammars: Sequence[str], verdicts: VerdictTokens | None = None) -> None:
        super().__init__(len(grammars), verdicts)
        self.tokenizer = tokenizer
        compiled: dict[str, Any] = {}
        self.matchers = []
        for grammar in grammars:
            if grammar not in compiled:
                matcher = llguidance.LLMatcher(tokenizer, llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0)
                if matcher.is_error():
                    raise RuntimeError(f"the quote grammar does not compile: {matcher.get_error()}")
                compiled[grammar] = matcher
            self.matchers.append(compiled[grammar].deep_copy())
        key = verdicts.decision.key if verdicts is not None else "verdict"
        self._key = re.compile(rb'"' + re.escape(key.encode()) + rb'":\s*"?$')
        self._tails = [b""] * len(grammars)

    def _write(self, ptr: int, width: int) -> None:
        for row, matcher in enumerate(self.matchers):
            matcher.unsafe_compute_mask_ptr(ptr + row * width * 4, width * 4)
            # A matcher in error (a grammar that outgrew llguidance's limits) writes a mask of
            # the end token alone: the row would stop mid-JSON and pass for a bad sample.
            if matcher.is_error():
                raise RuntimeError(f"the quote grammar failed: {matcher.get_error()}")

    def _advance_row(self, row: int, token: int) -> None:
        matcher = self.matchers[row]
        if not matcher.consume_token(token):
            raise RuntimeError(f"a sampled token left the quote grammar: {matcher.get_error()}")
        self._tails[row] = (self._tails[row] + self.tokenizer.decode_bytes([token]))[-32:]

    def _keep(self, keep: list[int]) -> None:
        self.matchers = [self.matchers[r] for r in keep]
        self._tails = [self._tails[r] for r in keep]

    def _at_decision(self, row: int) -> bool:
        return self._key.search(self._tails[row]) is not None


def quote_rows(
    tokenizer: Any,
    schema: dict[str, Any],
    quotes: Sequence[Sequence[str]],
    n: int,
    verdicts: VerdictTokens | None,
) -> QuoteRows:
    """The rows of a batch of prompts, ``n`` samples each, each prompt's quotes only from its
    own texts (``quotes``, one sequence of texts per prompt)."""
    grammars = [quote_grammar(schema, texts) for texts in quotes]
    return QuoteRows(tokenizer, [g for g in grammars for _ in range(n)], verdicts)
