"""The values the stages of a run pass around: jury models and per-model counters (the
requests they are asked are the metrics' judgings', :class:`~localjury.metrics.judging.Request`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from localjury.engines._catalog import sample_key
from localjury.engines.base import Engine
from localjury.metrics.judging import Request
from localjury.models.registry import ModelSpec
from localjury.records.neutralise import DEFAULT, Neutraliser
from localjury.store import generation_key

EngineFactory = Callable[[ModelSpec], Engine]


@dataclass
class ModelStats:
    """One model's counters over a run (or over one shard, on a replica)."""

    spec: ModelSpec
    load_seconds: float = 0.0
    generate_seconds: float = 0.0
    generated: int = 0
    """Samples generated in this run."""
    cached: int = 0
    """Samples found in the judgment store."""
    used: int = 0
    """Samples the results are built from."""
    output_tokens: int = 0
    prompt_tokens: int = 0
    """Tokens of the prompts generated in this run (each prompt once per engine call)."""
    reused_tokens: int = 0
    """Of those, tokens the engine reused from a KV cache instead of computing."""
    abstentions: int = 0
    passes: int = 0
    decided: int = 0
    unscored: int = 0
    """(record, metric) pairs where the model gave no verdict or score."""
    saved: int = 0
    """Samples not drawn because the first ones were unanimous (adaptive strictness)."""
    replicas: int = 1
    lost_records: int = 0
    """Records whose shard's replica died on every try (a sharded run)."""

    def absorb(self, other: ModelStats, *, timings: bool = True) -> None:
        """Add another pass's counters (a shard's, on a replica) to these."""
        self.generated += other.generated
        self.cached += other.cached
        self.output_tokens += other.output_tokens
        self.prompt_tokens += other.prompt_tokens
        self.reused_tokens += other.reused_tokens
        if timings:
            self.load_seconds += other.load_seconds
            self.generate_seconds += other.generate_seconds


@dataclass(frozen=True)
class JuryModel:
    """A jury model as this run uses it: its spec, identity and sampling settings."""

    spec: ModelSpec
    identity: str
    temperature: float
    top_p: float
    max_tokens: int
    neutralise: Neutraliser = DEFAULT
    """What record text goes through before it reaches this model's prompts: localjury's tags,
    and this model's tokenizer's special tokens and chat markers."""

    def store_key(self, req: Request, seed: int) -> str:
        return generation_key(
            model=self.identity,
            engine=self.spec.engine,
            prompt_format=self.spec.prompt_format,
            messages=req.messages,
            schema=req.schema,
            n=req.n,
            first_sample=req.first_sample,
            temperature=req.temperature,
            top_p=self.top_p if req.temperature > 0 else None,
            max_tokens=req.max_tokens,
            seed=seed,
            **({"revision": req.revision} if req.revision is not None else {}),
            **({"quotes": list(req.quotes)} if req.quotes is not None else {}),
            **sample_key(self.spec),  # what the engine draws its own way (vLLM's guidance backend)
        )
