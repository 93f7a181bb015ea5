"""Batched JSON-schema constraint over Outlines' own engine (outlines-core).

Outlines 1.3.3's ``OutlinesCoreLogitsProcessor`` masks the logits one row at a time through
a ``torch.compile``-d kernel; on CPU that cost more than the forward pass of a small model
(measured: constrained generation at 0.37 judgments/s against 0.89 unconstrained, same
outputs). This keeps Outlines' index and guides (the same regex from
``build_regex_from_schema``, the same vocabulary from ``OutlinesCoreBackend``) but writes
every row's bitmask into one tensor and applies it to the whole batch in one eager op.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import torch
from outlines.backends.outlines_core import OutlinesCoreBackend
from outlines.models.transformers import TransformerTokenizer
from outlines_core import Guide, Index, Vocabulary
from outlines_core.json_schema import build_regex_from_schema

from localjury.engines._index_cache import VOCABULARIES, compiled_index, tokenizer_key
from localjury.engines._verdicts import VERDICT, Decision

#: The only whitespace allowed between JSON tokens: bounded, so the output length is too.
WHITESPACE = r"[ ]?"
_SHIFTS = torch.arange(32, dtype=torch.int32)
#: Row b: the bias (0 allowed, -inf not) of the 8 tokens whose mask bits are the byte b.
_BYTE_BIAS = np.where((np.arange(256)[:, None] >> np.arange(8)) & 1, 0.0, -np.inf).astype(np.float32)


def _unpack(bits: torch.Tensor, vocab: int) -> torch.Tensor:
    """(rows, words) int32 bitmasks -> (rows, vocab) bools, token t at bit t % 32 of word t // 32."""
    return ((bits.unsqueeze(-1) >> _SHIFTS.to(bits.device)) & 1).view(bits.shape[0], -1)[:, :vocab].bool()


def _pack(flags: torch.Tensor, words: int) -> torch.Tensor:
    """(vocab,) bools -> (words,) int32 bitmask, the layout outlines-core writes (zero-padded)."""
    padded = np.zeros(words * 32, dtype=bool)
    padded[: flags.shape[0]] = flags.cpu().numpy()[: words * 32]
    return torch.from_numpy(np.packbits(padded, bitorder="little").view("<i4").astype(np.int32))


def vocabulary_of(outlines_model: Any) -> Vocabulary:
    """The Outlines vocabulary of an Outlines model, as Outlines' own backend builds it; for a
    transformers model, that of its tokenizer (:func:`vocabulary_of_tokenizer`, cached)."""
    tokenizer = getattr(outlines_model, "tokenizer", None)
    if isinstance(tokenizer, TransformerTokenizer):
        return vocabulary_of_tokenizer(tokenizer.tokenizer)
    return OutlinesCoreBackend(outlines_model).vocabulary


def vocabulary_of_tokenizer(hf_tokenizer: Any) -> Vocabulary:
    """The Outlines vocabulary of a Hugging Face tokenizer, built as Outlines builds it for a
    transformers model (byte-level pieces decoded exactly), without a model.

    Built once per process for a tokenizer's content (1.1 s for Qwen2.5's 151k tokens) and
    shared by every engine that loads it again: callers must not modify it.
    """
    key = tokenizer_key(hf_tokenizer)
    if key is None:
        return _build_vocabulary(hf_tokenizer)
    return VOCABULARIES.get_or_make(key, lambda: _build_vocabulary(hf_tokenizer))


def _build_vocabulary(hf_tokenizer: Any) -> Vocabulary:
    tokenizer = TransformerTokenizer(hf_tokenizer)
    # A fast tokenizer's get_vocab() comes in another order in each process, and a Vocabulary's
    # encoding (whose digest names its indexes on disk) follows the insertion order: in token
    # id order, the same tokenizer encodes the same in every process.
    vocab = dict(sorted(tokenizer.get_vocab().items(), key=lambda item: item[1]))
    return OutlinesCoreBackend.create_outlines_core_vocabulary(
        vocab, tokenizer.eos_token_id, tokenizer.eos_token, tokenizer.convert_token_to_string
    )


class VerdictTokens:
    """Which tokens of a vocabulary write a decision (a 0/1 verdict, a pairwise judge's A/B
    preference, a rubric's score): a token whose text, after any leading spaces and an opening
    quote, starts with one of the decision's values (``1``/``0``, ``A``/``B``, ``1``..``N``)
    writes that value; the others that are only spaces and quotes are neutral (the schema
    allows a space, and a string value opens with a quote, before the decision).

    Args:
        hf_tokenizer: The Hugging Face tokenizer the engine decodes with.
        decision: What the output decides (see :mod:`localjury.engines._verdicts`).
    """

    def __init__(self, hf_tokenizer: Any, decision: Decision = VERDICT) -> None:
        tokenizer = TransformerTokenizer(hf_tokenizer)
        vocab = tokenizer.get_vocab()
        size = max(vocab.values()) + 1
        self.decision = decision
        self.values = [torch.zeros(size, dtype=torch.bool) for _ in decision.choices]
        neutral = torch.zeros(size, dtype=torch.bool)
        firsts = (*decision.choices, "")
        for token, token_id in vocab.items():
            # Byte-level BPE writes a space as "Ġ", SentencePiece as "▁": look only at the
            # tokens that can be spaces, quotes and decisions before decoding them exactly.
            if token.lstrip('Ġ▁ "')[:1] not in firsts:
                continue
            text = tokenizer.convert_token_to_string(token)
            choice = decision.choice(text)
            if choice is not None:
                self.values[choice][token_id] = True
            elif not text.lstrip(' "') and token:
                neutral[token_id] = True
        self.writes = torch.stack(self.values).any(0)
        self.other = ~(self.writes | neutral)
        self._sized: dict[int, tuple[list[torch.Tensor], torch.Tensor]] = {}

    @property
    def passes(self) -> torch.Tensor:
        """The tokens that write a yes/no decision's passing value."""
        return self.values[0]

    @property
    def fails(self) -> torch.Tensor:
        """The tokens that write a yes/no decision's failing value."""
        return self.values[1]

    def sized(self, vocab: int) -> tuple[list[torch.Tensor], torch.Tensor]:
        """(each value's tokens, other tokens) over ``vocab`` logit rows: a model's logits can
        be wider than its tokenizer (padding rows, never allowed), or narrower."""
        if vocab not in self._sized:
            pad = max(0, vocab - self.writes.shape[0])
            off = torch.zeros(pad, dtype=torch.bool)
            self._sized[vocab] = (
                [torch.cat([v, off])[:vocab] for v in self.values],
                torch.cat([self.other, ~off])[:vocab],
            )
        return self._sized[vocab]

    def writes_verdict(self, token: int) -> bool:
        """Whether ``token`` writes the decision (a verdict digit, a preference letter, a score)."""
        return token < self.writes.shape[0] and bool(self.writes[token])


class JsonSchemaIndex:
    """The compiled index of one JSON schema over one tokenizer's vocabulary, built once per
    (vocabulary, schema) and kept in the process and on disk
    (:func:`~localjury.engines._index_cache.compiled_index`)."""

    def __init__(self, vocabulary: Vocabulary, schema: dict[str, Any], verdicts: VerdictTokens | None = None) -> None:
        self.regex = build_regex_from_schema(json.dumps(schema), WHITESPACE)
        self.index = compiled_index(self.regex, vocabulary)
        self.verdicts = verdicts

    def guides(self, rows: int) -> GuidedRows:
        """Fresh guides for a batch of ``rows`` sequences, all at the start of the schema."""
        return GuidedRows(self.index, rows, self.verdicts)


class GuidedRows:
    """One Outlines guide per row of a decoding batch; rows can leave the batch.

    With ``verdicts``, it also reads each row's decision figures: a step where the schema
    allows only decision tokens (and spaces or quotes), of two values or more, is a decision
    position; each value's probability there is the softmax of the raw logits over the allowed
    tokens that write it, renormalised over the allowed tokens that write any value. A yes/no
    decision keeps the probability of passing, a rubric's score the distribution over its
    levels (:meth:`~localjury.engines._verdicts.Decision.figures`). The figures are kept when
    the row writes its decision (after a space or quote token, the later position counts).
    """

    def __init__(self, index: Index, rows: int, verdicts: VerdictTokens | None = None) -> None:
        self.guides = [Guide(index) for _ in range(rows)]
        self._mask: torch.Tensor | None = None
        self._verdicts = verdicts
        self._packed: tuple[int, list[torch.Tensor], torch.Tensor] | None = None
        self._rows = list(range(rows))  # each current row's index in the starting batch
        self._pending: dict[int, tuple[float, ...]] = {}
        self.verdict_probs: list[list[float]] = [[] for _ in range(rows)]
        """Per row of the starting batch, the figures of each decision it wrote (the probability
        of 1 at each verdict; a score's distribution over its levels)."""

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """Set every token that would leave the schema to -inf, for all rows at once: in place
        for float32 logits on the CPU (the decode loops' own tensors), else in a copy."""
        rows, vocab = logits.shape
        width = (vocab + 31) // 32
        if self._mask is None or self._mask.shape[0] < rows:
            self._mask = torch.empty((rows, width), dtype=torch.int32)
        bits = self._mask[:rows]
        ptr = bits.data_ptr()
        for row, guide in enumerate(self.guides):
            guide.write_mask_into(ptr + row * width * 4, width, 4)
        if self._verdicts is not None:
            self._read_verdicts(logits, bits)
        if logits.device.type == "cpu" and logits.dtype == torch.float32 and sys.byteorder == "little":
            # Byte by byte through a 256 x 8 table of 0 / -inf, added row by row: the row's
            # temporaries stay in cache, where unpacking rows x vocab bits as int32 (then bool,
            # then masked_fill, whose CPU kernel is not vectorised) took ~80 ms a step at
            # 48 x 151k. x + 0.0 is x and x + -inf is -inf, so the result is the same.
            view = logits.numpy()
            by_byte = bits.numpy().view(np.uint8)  # little-endian: byte k holds tokens 8k..8k+7
            for row in range(rows):
                view[row] += _BYTE_BIAS[by_byte[row]].reshape(-1)[:vocab]
            return logits
        return logits.masked_fill(~_unpack(bits, vocab).to(logits.device), float("-inf"))

    def _read_verdicts(self, logits: torch.Tensor, bits: torch.Tensor) -> None:
        assert self._verdicts is not None
        vocab = logits.shape[1]
        if self._packed is None or self._packed[0] != vocab:
            values, other = self._verdicts.sized(vocab)
            self._packed = (vocab, [_pack(v, bits.shape[1]) for v in values], _pack(other, bits.shape[1]))
        _, values, other = self._packed
        # On the packed words (32 tokens each): a row is at a decision when its schema allows
        # tokens of two values or more and nothing else but spaces and quotes.
        allowed_values = torch.stack([(bits & v).any(-1) for v in values]).sum(0)
        at_verdict = ~(bits & other).any(-1) & (allowed_values >= 2)
        self._pending = {}
        rows = at_verdict.nonzero().flatten().tolist()
        if not rows:
            return
        of_value = [t.to(logits.device) for t in self._verdicts.sized(vocab)[0]]
        for row in rows:
            allowed = _unpack(bits[row : row + 1], vocab)[0].to(logits.device)
            raw = logits[row].float()
            mass = torch.stack([torch.logsumexp(raw[allowed & v], 0) for v in of_value])
            masses = torch.exp(mass - mass.max()).tolist()
            self._pending[row] = self._verdicts.decision.figures(masses)

    def advance(self, tokens: list[int], ended: list[bool]) -> None:
        """Feed each row the token it just sampled (rows that ended are left alone)."""
        for row, (guide, token, end) in enumerate(zip(self.guides, tokens, ended, strict=True)):
            if not end:
                guide.advance(token_id=token, return_tokens=False)
                if row in self._pending and self._verdicts is not None and self._verdicts.writes_verdict(token):
                    self.verdict_probs[self._rows[row]].extend(self._pending[row])
        self._pending = {}

    def select(self, keep: list[int]) -> None:
        """Keep only these rows, in this order."""
        self.guides = [self.guides[r] for r in keep]
        self._rows = [self._rows[r] for r in keep]
