"""Constrained decoding of a batch, whatever writes the masks: one token bitmask per row,
applied to the whole batch's logits at once, and the decision figures (``p_pass``, a score's
distribution) read where a row writes its decision.

:class:`MaskedRows` is what the decode loops of the transformers and llama.cpp engines call
each step (``mask``, ``advance``, ``select``); its subclasses write each row's bitmask:
Outlines' guides over a compiled JSON-schema index (:class:`~localjury.engines.constrain.schemas.GuidedRows`),
or llguidance matchers over a per-prompt grammar (:class:`~localjury.engines.constrain.grammars.GrammarRows`).
A bitmask row holds token ``t`` at bit ``t % 32`` of int32 word ``t // 32``, the layout both
libraries write.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch
from outlines.models.transformers import TransformerTokenizer

from localjury.engines.constrain.verdicts import VERDICT, Decision

_SHIFTS = torch.arange(32, dtype=torch.int32)
#: Row b: the bias (0 allowed, -inf not) of the 8 tokens whose mask bits are the byte b.
_BYTE_BIAS = np.where((np.arange(256)[:, None] >> np.arange(8)) & 1, 0.0, -np.inf).astype(np.float32)


def unpack(bits: torch.Tensor, vocab: int) -> torch.Tensor:
    """(rows, words) int32 bitmasks -> (rows, vocab) bools, token t at bit t % 32 of word t // 32."""
    return ((bits.unsqueeze(-1) >> _SHIFTS.to(bits.device)) & 1).view(bits.shape[0], -1)[:, :vocab].bool()


def pack(flags: torch.Tensor, words: int) -> torch.Tensor:
    """(vocab,) bools -> (words,) int32 bitmask, the layout the masks are written in (zero-padded)."""
    padded = np.zeros(words * 32, dtype=bool)
    padded[: flags.shape[0]] = flags.cpu().numpy()[: words * 32]
    return torch.from_numpy(np.packbits(padded, bitorder="little").view("<i4").astype(np.int32))


class VerdictTokens:
    """Which tokens of a vocabulary write a decision (a 0/1 verdict, a pairwise judge's A/B
    preference, a rubric's score): a token whose text, after any leading spaces and an opening
    quote, starts with one of the decision's values (``1``/``0``, ``A``/``B``, ``1``..``N``)
    writes that value; the others that are only spaces and quotes are neutral (the schema
    allows a space, and a string value opens with a quote, before the decision).

    Args:
        hf_tokenizer: The Hugging Face tokenizer the engine decodes with.
        decision: What the output decides (see :mod:`localjury.engines.constrain.verdicts`).
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


class MaskedRows:
    """The constraint of each row of a decoding batch; rows can leave the batch.

    With ``verdicts``, it also reads each row's decision figures: a step where a row may
    write only decision tokens (and spaces or quotes), of two values or more, is a decision
    position (where :meth:`_at_decision` agrees); each value's probability there is the
    softmax of the raw logits over the allowed tokens that write it, renormalised over the
    allowed tokens that write any value. A yes/no decision keeps the probability of passing,
    a rubric's score the distribution over its levels
    (:meth:`~localjury.engines.constrain.verdicts.Decision.figures`). The figures are kept when the row
    writes its decision (after a space or quote token, the later position counts).

    A subclass writes the rows' bitmasks (:meth:`_write`), feeds a row its token
    (:meth:`_advance_row`) and keeps rows (:meth:`_keep`).
    """

    def __init__(self, rows: int, verdicts: VerdictTokens | None = None) -> None:
        self._mask: torch.Tensor | None = None
        self._verdicts = verdicts
        self._packed: tuple[int, list[torch.Tensor], torch.Tensor] | None = None
        self._rows = list(range(rows))  # each current row's index in the starting batch
        self._pending: dict[int, tuple[float, ...]] = {}
        self.verdict_probs: list[list[float]] = [[] for _ in range(rows)]
        """Per row of the starting batch, the figures of each decision it wrote (the probability
        of 1 at each verdict; a score's distribution over its levels)."""

    def _write(self, ptr: int, width: int) -> None:
        """Write each current row's bitmask of ``width`` int32 words at ``ptr``, row after row."""
        raise NotImplementedError

    def _advance_row(self, row: int, token: int) -> None:
        """Feed current row ``row`` the token it sampled."""
        raise NotImplementedError

    def _keep(self, keep: list[int]) -> None:
        """Keep only these current rows, in this order."""
        raise NotImplementedError

    def _at_decision(self, row: int) -> bool:
        """Whether current row ``row`` may be where its decision is written (beside what its
        mask says); every row by default."""
        return True

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """Set every token a row may not write to -inf, for all rows at once: in place for
        float32 logits on the CPU (the decode loops' own tensors), else in a copy."""
        rows, vocab = logits.shape
        width = (vocab + 31) // 32
        if self._mask is None or self._mask.shape[0] < rows:
            self._mask = torch.empty((rows, width), dtype=torch.int32)
        bits = self._mask[:rows]
        self._write(bits.data_ptr(), width)
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
        return logits.masked_fill(~unpack(bits, vocab).to(logits.device), float("-inf"))

    def _read_verdicts(self, logits: torch.Tensor, bits: torch.Tensor) -> None:
        assert self._verdicts is not None
        vocab = logits.shape[1]
        if self._packed is None or self._packed[0] != vocab:
            values, other = self._verdicts.sized(vocab)
            self._packed = (vocab, [pack(v, bits.shape[1]) for v in values], pack(other, bits.shape[1]))
        _, values, other = self._packed
        # On the packed words (32 tokens each): a row is at a decision when it may write tokens
        # of two values or more and nothing else but spaces and quotes.
        allowed_values = torch.stack([(bits & v).any(-1) for v in values]).sum(0)
        at_verdict = ~(bits & other).any(-1) & (allowed_values >= 2)
        self._pending = {}
        rows = [row for row in at_verdict.nonzero().flatten().tolist() if self._at_decision(row)]
        if not rows:
            return
        of_value = [t.to(logits.device) for t in self._verdicts.sized(vocab)[0]]
        for row in rows:
            allowed = unpack(bits[row : row + 1], vocab)[0].to(logits.device)
            raw = logits[row].float()
            mass = torch.stack([torch.logsumexp(raw[allowed & v], 0) for v in of_value])
            masses = torch.exp(mass - mass.max()).tolist()
            self._pending[row] = self._verdicts.decision.figures(masses)

    def advance(self, tokens: list[int], ended: list[bool]) -> None:
        """Feed each row the token it just sampled (rows that ended are left alone)."""
        for row, (token, end) in enumerate(zip(tokens, ended, strict=True)):
            if not end:
                self._advance_row(row, token)
                if row in self._pending and self._verdicts is not None and self._verdicts.writes_verdict(token):
                    self.verdict_probs[self._rows[row]].extend(self._pending[row])
        self._pending = {}

    def select(self, keep: list[int]) -> None:
        """Keep only these rows, in this order."""
        self._keep(keep)
        self._rows = [self._rows[r] for r in keep]
