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
    row's noise drawn from that row's own generator."""
    if sampling.temperature <= 0:
        return logits.argmax(-1)
    logits = logits / sampling.temperature
    if sampling.top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        drop = probs.cumsum(-1) - probs > sampling.top_p  # keep the smallest set reaching top_p
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    # Gumbel-max: argmax(logits + Gumbel noise) is a sample from softmax(logits).
    noise = torch.stack([torch.rand(logits.shape[-1], generator=g, device="cpu") for g in rngs]).to(logits.device)
    return (logits - torch.log(-torch.log(noise.clamp_min(1e-20)))).argmax(-1)
