"""What the engines with a decode loop of their own share (transformers, llama.cpp): prompts
formatted and counted by a Hugging Face tokenizer, outputs constrained by Outlines' guides,
tokens sampled with per-sample generators (a sample never depends on what shares its batch)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import torch

from localjury.engines.base import BatchEngine, Sampling
from localjury.engines.constrain.index_cache import tokenizer_key
from localjury.engines.constrain.lru import Lru
from localjury.engines.constrain.masks import MaskedRows, VerdictTokens
from localjury.engines.constrain.quotes import has_quotes
from localjury.engines.constrain.schemas import JsonSchemaIndex
from localjury.engines.constrain.thinking_budget import ThinkingBudget
from localjury.engines.constrain.verdicts import Decision, decision_of
from localjury.errors import ConfigError
from localjury.types import THINK_CLOSE, Completion, Pooling, frame_span

#: A prompt's tokens ``[start, end)``.
Span = tuple[int, int]

#: Decision tokens by (tokenizer key, decision), shared by the engines of a process (their
#: only state that changes is ``sized``'s memo, the same for every engine).
_DECISION_TOKENS: Lru[tuple[str, Decision], VerdictTokens] = Lru(8)


def shared_prefix(encoded: Sequence[Sequence[int]], own: int) -> int:
    """The length of the token prefix every prompt of ``encoded`` starts with, leaving each
    prompt at least ``own`` tokens of its own (the ones whose computation yields its logits)."""
    shortest, first = min(len(e) for e in encoded), encoded[0]
    length = 0
    while length < shortest - own and all(e[length] == first[length] for e in encoded):
        length += 1
    return length


def state_spans(
    tokenizer: Any, prompts: Sequence[str], encoded: Sequence[Sequence[int]], poolings: Sequence[Pooling]
) -> list[list[Span]]:
    """Each prompt's tokens whose hidden states a head reads, ``[start, end)`` in ``encoded``, one
    span a pooling: the last token (``last``), or every token that overlaps the record's response
    (``response``: :func:`~localjury.types.frame_span`), located by the tokenizer's offsets.

    Raises:
        ConfigError: ``response`` on a prompt with no response, or with a tokenizer that gives no offsets.
    """
    spans = []
    for p, (prompt, ids) in enumerate(zip(prompts, encoded, strict=True)):
        own = []
        for pooling in poolings:
            own.append((len(ids) - 1, len(ids)) if pooling == "last" else _response_span(tokenizer, prompt, p))
        spans.append(own)
    return spans


def _response_span(tokenizer: Any, prompt: str, p: int) -> Span:
    try:
        start, end = frame_span(prompt, "response")
        offsets = tokenizer(prompt, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    except (ValueError, NotImplementedError) as exc:
        raise ConfigError(f"prompt {p}: its response's hidden states cannot be pooled: {exc}") from None
    inside = [k for k, (a, b) in enumerate(offsets) if a < end and b > start]
    if not inside:
        raise ConfigError(f"prompt {p}: its response has no token to pool (an empty response)")
    return inside[0], inside[-1] + 1


def covering(spans: Sequence[Span]) -> Span:
    """The tokens from the first of ``spans``' starts to the last of their ends: what one prefill
    reads to pool a prompt every way at once."""
    return min(a for a, _ in spans), max(b for _, b in spans)


class LocalDecoding(BatchEngine):
    """One compiled schema index per schema, beside :class:`BatchEngine`'s prompt formatting
    and token counting.

    A subclass sets ``tokenizer``, ``prompts``, ``_vocabulary`` (Outlines' vocabulary of that
    tokenizer) and an empty ``_indexes`` when it loads.
    """

    _vocabulary: Any
    _indexes: dict[str, JsonSchemaIndex]
    _decisions: dict[Decision, VerdictTokens] | None = None

    def hidden_states(self, prompts: Sequence[str], layers: Sequence[int], pooling: Pooling = "last") -> np.ndarray:
        """:meth:`pooled_states` of one pooling; see :meth:`~localjury.engines.base.BatchEngine.hidden_states`."""
        return self.pooled_states(prompts, layers, (pooling,))[pooling]

    def pooled_states(
        self, prompts: Sequence[str], layers: Sequence[int], poolings: Sequence[Pooling]
    ) -> dict[Pooling, np.ndarray]:
        """Every pooling's states from one prefill a prompt: its tokens from the first pooling's
        start to the prompt's end (:func:`state_spans`, :func:`covering`) are read once and each
        pooling takes the mean of its own (:meth:`_read_spans`); see
        :meth:`~localjury.engines.base.BatchEngine.pooled_states`."""
        self._check_layers(layers)
        ways = list(dict.fromkeys(poolings))
        encoded: list[list[int]] = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        states = self._read_spans(encoded, layers, state_spans(self.tokenizer, prompts, encoded, ways))
        return {pooling: states[w] for w, pooling in enumerate(ways)}

    def _read_spans(
        self, encoded: list[list[int]], layers: Sequence[int], spans: Sequence[Sequence[Span]]
    ) -> np.ndarray:
        """(spans a prompt, prompts, layers, hidden size): each prompt's blocks' outputs averaged
        over each of its ``spans``, one prefill a prompt."""
        raise NotImplementedError

    def _index(self, schema: dict[str, Any]) -> JsonSchemaIndex:
        """The schema's index over this model's vocabulary, once per schema for this engine
        (compiling it, vocabulary x regex, is the costly part, which
        :mod:`~localjury.engines.constrain.index_cache` also keeps across engines and processes), with
        the tokens that write its decision."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._indexes:
            decision = decision_of(schema)
            tokens = self._decision_tokens(decision) if decision is not None else None
            self._indexes[key] = JsonSchemaIndex(self._vocabulary, schema, tokens)
        return self._indexes[key]

    def _decision_tokens(self, decision: Decision) -> VerdictTokens:
        """The vocabulary's tokens that write ``decision``, classified once per decision and
        tokenizer content in the process (0.5-0.7 s per decision for Gemma's 262k tokens)."""
        if self._decisions is None:
            self._decisions = {}
        if decision not in self._decisions:
            key = tokenizer_key(self.tokenizer)
            make = partial(VerdictTokens, self.tokenizer, decision)
            self._decisions[decision] = make() if key is None else _DECISION_TOKENS.get_or_make((key, decision), make)
        return self._decisions[decision]

    def _rows(
        self,
        schema: dict[str, Any] | None,
        prompts: int,
        n: int,
        quotes: Sequence[Sequence[str]] | None,
        vocab: int,
        eos_ids: Sequence[int],
        thinking: ThinkingBudget | None = None,
    ) -> MaskedRows | None:
        """The constraint of a batch of ``prompts`` prompts, ``n`` samples each (rows in prompt
        order): the schema's Outlines guides; or, where the schema has quotes and the call
        gives each prompt's quotable texts (``quotes``, one sequence per prompt of the batch),
        or where the samples think first (``thinking``), llguidance matchers of each prompt's
        own grammar (:mod:`~localjury.engines.constrain.grammars`); None without a schema.
        ``vocab`` is the width of the model's logits, ``eos_ids`` its end tokens."""
        if schema is None:
            return None
        quoted = quotes is not None and has_quotes(schema)
        if not quoted and thinking is None:
            return self._index(schema).guides(prompts * n)
        from localjury.engines.constrain.grammars import Thinking, grammar_rows, ll_tokenizer

        decision = decision_of(schema)
        verdicts = self._decision_tokens(decision) if decision is not None else None
        texts = quotes if quotes is not None and quoted else [()] * prompts
        closing = None
        if thinking is not None:
            close = self.tokenizer("\n" + THINK_CLOSE, add_special_tokens=False)["input_ids"]
            closing = Thinking(thinking, close)
        return grammar_rows(ll_tokenizer(self.tokenizer, vocab, eos_ids), schema, texts, n, verdicts, closing)

    def _completions(self, rows: list[tuple[list[int], bool]], guides: MaskedRows | None) -> list[Completion]:
        """The samples of one decoded batch, from each row's tokens and whether it ended, with
        the verdict probabilities its guides read (None when unconstrained)."""
        return [
            Completion(
                # Never "cleaned up" (" ." to "."): a quote is a span of the record as written.
                text=str(self.tokenizer.decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False)),
                n_tokens=len(tokens),
                finished=finished,
                verdict_probs=tuple(guides.verdict_probs[row]) if guides is not None else None,
            )
            for row, (tokens, finished) in enumerate(rows)
        ]


def batch_seed(seed: int, *parts: object) -> int:
    """Derive a 63-bit seed from the run seed and what is sampled (stable across runs)."""
    blob = json.dumps([seed, *[str(p) for p in parts]]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") >> 1


def sample_generators(seed: int, prompts: Sequence[str], n: int, first_sample: int) -> list[torch.Generator]:
    """One generator per (prompt, sample), seeded from (run seed, prompt, sample index), in
    prompt-major order: sample j of prompt i is row i * n + j."""
    return [
        torch.Generator(device="cpu").manual_seed(batch_seed(seed, p, first_sample + j))
        for p in prompts
        for j in range(n)
    ]


def sample(logits: torch.Tensor, sampling: Sampling, rngs: Sequence[torch.Generator]) -> torch.Tensor:
    """One token per row: greedy at temperature 0, else temperature + top-p sampling, each
    row's noise drawn from that row's own generator. ``logits`` are left as they are."""
    return Sampler()(logits.clone(), sampling, rngs)


class Sampler:
    """:func:`sample` for a decode loop: the same tokens from the same generators, but the
    logits it is given are overwritten, and its vocabulary-wide noise buffer is kept from one
    step to the next. A step of 48 rows over a 151k vocabulary then allocates nothing of that
    size (the out-of-place version made five 29 MB temporaries a step, a pass over memory
    each: twice the time, measured)."""

    def __init__(self) -> None:
        self._noise: torch.Tensor | None = None

    def __call__(self, logits: torch.Tensor, sampling: Sampling, rngs: Sequence[torch.Generator]) -> torch.Tensor:
        """Draw one token per row of ``logits`` (float32; overwritten) with ``rngs[row]``."""
        if sampling.temperature <= 0:
            return logits.argmax(-1)
        logits = logits.div_(sampling.temperature)
        if sampling.top_p < 1.0:
            sorted_logits, order = logits.sort(dim=-1, descending=True)
            probs = sorted_logits.softmax(-1)
            drop = probs.cumsum(-1) - probs > sampling.top_p  # keep the smallest set reaching top_p
            logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
        rows, vocab = logits.shape
        if self._noise is None or self._noise.shape[0] < rows or self._noise.shape[1] != vocab:
            self._noise = torch.empty((rows, vocab), dtype=torch.float32)
        noise = self._noise[:rows]
        # Each row draws vocab uniforms from its own generator, as torch.rand(vocab) would.
        for row, rng in enumerate(rngs):
            torch.rand(vocab, generator=rng, out=noise[row])
        # Gumbel-max: argmax(logits + Gumbel noise) is a sample from softmax(logits), with
        # Gumbel noise -log(-log(u)). In place: noise becomes log(-log(u)) - logits, which is
        # exactly -(logits - log(-log(u))) (float subtraction is sign-symmetric), so its argmin
        # is the argmax of the out-of-place form, ties included.
        noise.clamp_min_(1e-20).log_().neg_().log_()
        return noise.sub_(logits.to(noise.device)).argmin(-1).to(logits.device)
