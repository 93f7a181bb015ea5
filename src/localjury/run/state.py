"""What the stages of a run share: the run itself, its jury models, requests and counters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from localjury.engines.base import Engine
from localjury.metrics.base import Message, Metric
from localjury.neutralise import DEFAULT, Neutraliser
from localjury.registry import ModelSpec
from localjury.run.config import RunConfig
from localjury.store import GenerationStore, generation_key

if TYPE_CHECKING:
    from rich.progress import Progress

    from localjury._ray import RaySession
    from localjury.run.judging import Judging

EngineFactory = Callable[[ModelSpec], Engine]
Key = tuple[str, str]
"""(record id, metric name)."""


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
        if timings:
            self.load_seconds += other.load_seconds
            self.generate_seconds += other.generate_seconds


@dataclass(frozen=True)
class Request:
    """One prompt to run with one model: n samples under a schema."""

    key: Key
    messages: list[Message]
    schema: dict[str, Any]
    n: int
    max_tokens: int
    temperature: float
    first_sample: int = 0


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
        )


@dataclass
class Run:
    """One evaluate() call: the settings, the jury, the store, and what the passes counted."""

    config: RunConfig
    metrics: list[Metric]
    models: list[JuryModel]
    extractor: JuryModel | None
    """The model that extracts statements for composite metrics (None without one)."""
    store: GenerationStore
    factory: EngineFactory
    progress: Progress | None = None
    cluster: RaySession | None = None
    judgings: list[Judging] = field(init=False)
    """How each metric is judged, in the metrics' order."""
    stats: dict[str, ModelStats] = field(init=False)
    lost: dict[tuple[str, str], str] = field(default_factory=dict)
    """(model, record id) -> why that model has nothing for the record: its shard was lost
    on the cluster (kept out of the store, so that a rerun tries again)."""

    def __post_init__(self) -> None:
        from localjury.run.judging import judging_for

        self.judgings = [judging_for(m, self.config.sampling) for m in self.metrics]
        self.stats = {m.spec.name: ModelStats(m.spec) for m in self.models}

    @property
    def seed(self) -> int:
        return self.config.sampling.seed

    def missing(self, model: str, record_id: str) -> str:
        """Why ``model`` has no generation for the record."""
        return self.lost.get((model, record_id), f"no generation by {model!r} in the judgment store")

    def portable(self, store: GenerationStore, split: bool = False) -> Run:
        """A copy of this run to send to a replica of a sharded run: with ``store`` in place
        of the driver's, without the progress display and the cluster (the driver keeps
        those), and with each model's folder as an absolute path (a replica's
        ``$LOCALJURY_HOME`` may differ). ``split``: the replicas split their model over
        several GPUs, with vLLM's Ray executor unless models.yaml names another."""

        def pinned_spec(spec: ModelSpec) -> ModelSpec:
            update: dict[str, Any] = {"path": str(spec.local_dir().absolute()), "embedded": None}
            if split and spec.vllm.distributed_executor_backend is None:
                update["vllm"] = spec.vllm.model_copy(update={"distributed_executor_backend": "ray"})
            return spec.model_copy(update=update)

        pinned = {m.spec.name: replace(m, spec=pinned_spec(m.spec)) for m in self.models}
        extractor = pinned[self.extractor.spec.name] if self.extractor is not None else None
        return Run(self.config, self.metrics, list(pinned.values()), extractor, store, self.factory)
