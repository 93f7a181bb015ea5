"""Quote-constrained decoding over llguidance: one matcher per row, each on its own prompt's
grammar (:func:`~localjury.engines.constrain.quotes.quote_grammar`), writing the same bitmasks as
Outlines' guides into the same batched mask.

llguidance (the Rust library behind guidance, also one of vLLM's structured-output backends)
compiles a grammar lazily, in milliseconds, and computes a row's mask in well under a
millisecond on Qwen2.5's 151k-token vocabulary: a grammar per prompt costs nothing worth
caching, where an Outlines index per record's text would cost seconds.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import llguidance
import llguidance.hf

from localjury.engines.constrain.index_cache import Lru, tokenizer_key
from localjury.engines.constrain.masks import MaskedRows, VerdictTokens
from localjury.engines.constrain.quotes import quote_grammar

log = logging.getLogger(__name__)

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


def quote_matcher(tokenizer: Any, schema: dict[str, Any], texts: Sequence[str]) -> tuple[Any, str | None]:
    """A matcher of one prompt's quote grammar, and None; where llguidance refuses that grammar,
    a matcher of the schema with its quote arrays empty (the prompt judged without quotes),
    and llguidance's reason. A grammar bounded as :func:`~localjury.engines.constrain.quotes.quote_grammar`
    bounds it is not expected to be refused: this keeps a refusal to the prompt of one record.

    Raises:
        RuntimeError: Even the grammar without quotes does not compile (a schema llguidance
            cannot follow, the same for every prompt).
    """
    matcher = _matcher(tokenizer, quote_grammar(schema, texts))
    if not matcher.is_error():
        return matcher, None
    refused = matcher.get_error()
    matcher = _matcher(tokenizer, quote_grammar(schema, ()))
    if matcher.is_error():
        raise RuntimeError(f"the quote grammar does not compile: {matcher.get_error()}")
    return matcher, refused


def checked_grammar(schema: dict[str, Any], texts: Sequence[str]) -> str:
    """One prompt's quote grammar for vLLM's guidance backend; the schema's grammar with its
    quote arrays empty where llguidance refuses that one (as :func:`quote_matcher` does), so that
    vLLM, which refuses a whole call for one bad grammar, judges the prompt without quotes."""
    grammar = quote_grammar(schema, texts)
    refused = texts and llguidance.LLMatcher.validate_grammar(llguidance.LLMatcher.grammar_from_lark(grammar))
    if refused:
        log.warning("llguidance refused a prompt's quote grammar (%s); it is judged without quotes", refused)
        return quote_grammar(schema, ())
    return grammar


class QuoteRows(MaskedRows):
    """One llguidance matcher per row of a decoding batch (``matchers``: a prompt's, copied for
    each of its samples).

    A decision is read only where a row's text so far ends with the decision's key
    (``"verdict": ``): a quote of a text with numbers in it can leave only ``0`` and ``1``
    allowed, which the masks alone would take for a verdict.

    A matcher that fails while its row is decoded (llguidance past one of its limits, a token
    it refuses) stays in error: its mask then allows the end token alone, so that row ends where
    it is (its sample abstains, as output that does not parse) and the batch's other rows go
    on; ``failed`` holds why, by row of the starting batch.
    """

    def __init__(self, tokenizer: Any, matchers: Sequence[Any], verdicts: VerdictTokens | None = None) -> None:
        super().__init__(len(matchers), verdicts)
        self.tokenizer = tokenizer
        self.matchers = list(matchers)
        self.failed: dict[int, str] = {}
        """Why a row's matcher failed while it was decoded, by row of the starting batch."""
        key = verdicts.decision.key if verdicts is not None else "verdict"
        self._key = re.compile(rb'"' + re.escape(key.encode()) + rb'":\s*"?$')
        self._tails = [b""] * len(matchers)

    def _write(self, ptr: int, width: int) -> None:
        for row, matcher in enumerate(self.matchers):
            matcher.unsafe_compute_mask_ptr(ptr + row * width * 4, width * 4)
            if matcher.is_error():
                self._fail(row, f"the quote grammar failed: {matcher.get_error()}")

    def _advance_row(self, row: int, token: int) -> None:
        matcher = self.matchers[row]
        if not matcher.consume_token(token):  # the matcher is in error now: the row ends at the next step
            self._fail(row, f"a sampled token left the quote grammar: {matcher.get_error()}")
        self._tails[row] = (self._tails[row] + self.tokenizer.decode_bytes([token]))[-32:]

    def _fail(self, row: int, why: str) -> None:
        """Note why a row's matcher failed (once), and say so: its sample abstains."""
        start = self._rows[row]
        if start not in self.failed:
            self.failed[start] = why
            log.warning("%s; that sample ends here and abstains (the other samples go on)", why)

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
    own texts (``quotes``, one sequence of texts per prompt); a prompt whose grammar llguidance
    refuses is judged without quotes (:func:`quote_matcher`), the others as they are."""
    compiled: dict[tuple[str, ...], Any] = {}
    matchers = []
    for texts in quotes:
        key = tuple(texts)
        if key not in compiled:
            compiled[key], refused = quote_matcher(tokenizer, schema, key)
            if refused is not None:
                log.warning(
                    "llguidance refused a prompt's quote grammar (%s); that prompt is judged without quotes", refused
                )
        matchers += [compiled[key].deep_copy() for _ in range(n)]
    return QuoteRows(tokenizer, matchers, verdicts)
