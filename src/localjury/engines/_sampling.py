"""Token sampling shared by the engines that run their own decode loop (transformers,
llama.cpp): per-sample generators, so a sample never depends on what shares its batch."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import torch

from localjury.engines.base import Sampling


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
