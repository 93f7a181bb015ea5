"""A reference for verdict probabilities: a plain greedy decode, one direct forward pass per
token, constrained by Outlines' own guide (its list of allowed tokens), written apart from the
engines' batched decode loops so that it checks them."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from outlines_core import Guide, Index
from outlines_core.json_schema import build_regex_from_schema

from localjury.engines.constrain.schemas import WHITESPACE, vocabulary_of_tokenizer
from localjury.engines.constrain.verdicts import PREFERENCE, VERDICT, Decision
from localjury.metrics import AspectCritic, PairwiseCritic
from localjury.records.record import Record

#: The decisions whose probabilities the engines read: (metric, record, decision) — an Aspect
#: Critic's 0/1 verdict and a Pairwise Critic's A/B preference (order AB).
DECISION_CASES = {
    "verdict": (
        AspectCritic("dated", "The response must include a specific date or year."),
        Record(id="a", user_input="When did the Berlin Wall fall?", response="On 9 November 1989."),
        VERDICT,
    ),
    "preference": (
        PairwiseCritic("correct", "The response answers the question correctly."),
        Record(id="p", user_input="What is 2 + 3?", response_a="6", response_b="It is 5."),
        PREFERENCE,
    ),
}


def greedy_with_p_pass(
    next_logits: Callable[[list[int]], Sequence[float]],
    tokenizer,
    prompt_ids: list[int],
    schema: dict,
    max_tokens: int,
    follow: str | None = None,
    decision: Decision = VERDICT,
) -> tuple[str, list[float]]:
    """Greedy constrained decode of one prompt: the text, and at each decision position (only
    tokens that write the decision, spaces or quotes allowed, two values or more among them) the
    softmax mass of the allowed passing tokens over that of the allowed passing and failing ones,
    or for a rubric's score the mass of each level's allowed tokens over that of all levels',
    kept when the decision is written (``decision``: 0/1 verdicts, a pairwise A/B preference,
    a score).

    With ``follow`` (an engine's output), each step takes the best allowed token that keeps
    the text a prefix of ``follow``: the engine's own path, so that a near tie that another
    kernel's rounding breaks the other way does not lead the reference elsewhere."""
    guide = Guide(Index(build_regex_from_schema(json.dumps(schema), WHITESPACE), vocabulary_of_tokenizer(tokenizer)))
    eos = tokenizer.eos_token_id
    piece = token_texts(tokenizer)
    ids = list(prompt_ids)
    out: list[int] = []
    probs: list[float] = []
    for _ in range(max_tokens):
        logits = np.asarray(next_logits(ids), dtype=np.float64)
        allowed = guide.get_tokens()
        pending = None
        # A decision position: every allowed token writes the decision or nothing but spaces or
        # a quote (checked first: in free text the first other token ends the check).
        neutral_or_decision = all(
            decision.choice(piece[t]) is not None or not piece[t].lstrip(' "') for t in allowed if t != eos
        )
        writers = {}
        if neutral_or_decision and eos not in allowed:
            writers = {t: c for t in allowed if (c := decision.choice(piece[t])) is not None}
        if len(set(writers.values())) >= 2:
            top = max(logits[t] for t in writers)
            masses = [0.0] * len(decision.choices)
            for t, c in writers.items():
                masses[c] += math.exp(logits[t] - top)
            binary = len(decision.choices) == 2
            pending = (masses[0] / (masses[0] + masses[1]),) if binary else tuple(m / sum(masses) for m in masses)
        # The best allowed token by logit (the first of equals, in the guide's order); with
        # ``follow``, the best one whose text, decoded after the output so far, continues it.
        tokens = np.asarray(allowed)
        keys = np.where(tokens < len(logits), -logits[np.minimum(tokens, len(logits) - 1)], np.inf)
        ranked = tokens[np.argsort(keys, kind="stable")].tolist()
        if follow is None:
            token = ranked[0]
        else:
            done = tokenizer.decode(out, skip_special_tokens=True)
            rest = follow[len(done) :]
            token = next((t for t in ranked if t != eos and continues(tokenizer, out, t, done, rest)), eos)
        if token == eos:
            break
        if pending is not None and token in writers:
            probs.extend(pending)
        guide.advance(token_id=token, return_tokens=False)
        out.append(token)
        ids.append(token)
    return tokenizer.decode(out, skip_special_tokens=True), probs


def token_texts(tokenizer) -> list[str]:
    """Each token's text decoded alone, the whole vocabulary once per tokenizer (decoding it
    again at every step of a greedy decode took minutes)."""
    cached = getattr(tokenizer, "_reference_token_texts", None)
    if cached is None:
        cached = [tokenizer.decode([t]) for t in range(len(tokenizer))]
        tokenizer._reference_token_texts = cached
    return cached


def continues(tokenizer, out: list[int], token: int, done: str, rest: str) -> bool:
    """Whether ``token``, decoded after ``out`` (whose text is ``done``), adds text that begins
    ``rest`` (decoded in context: a token's text alone can differ, e.g. a leading space)."""
    more = tokenizer.decode([*out, token])[len(done) :]
    return bool(more) and rest.startswith(more)


def assert_same_samples(a, b, *, tolerance: float = 1e-4) -> None:
    """Two lists of Completions are the same samples: the same text, token count and end,
    and verdict probabilities equal to ``tolerance``. A probability is a float read from logits
    that another batch shape, or another load of the same weights, rounds differently (vLLM
    on CPU moved one by 6e-7 between two loads), while the sampled tokens stay the same."""
    assert [(c.text, c.n_tokens, c.finished) for c in a] == [(c.text, c.n_tokens, c.finished) for c in b]
    for x, y in zip(a, b, strict=True):
        assert (x.verdict_probs is None) == (y.verdict_probs is None)
        if x.verdict_probs is not None:
            assert x.verdict_probs == pytest.approx(y.verdict_probs, abs=tolerance)


def shared_prefix_tokens(tokenizer, prompts: Sequence[str], keep: int) -> int:
    """How many leading tokens every prompt has in common, leaving each at least ``keep`` tokens
    of its own: what an engine that prefills a call's shared prefix once computes once."""
    ids = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    shared = 0
    while shared < min(len(i) for i in ids) - keep and len({i[shared] for i in ids}) == 1:
        shared += 1
    return shared
