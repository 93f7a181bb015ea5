"""The run's values, as every stage sees them: each jury model as the run uses it
(:class:`JuryModel`), each model's counters (:class:`ModelCounts`), and the run's context
(:class:`RunContext`: its settings, how each metric is judged, the jury, the judgment store and
the counters). The values that cross into the engines, the metrics and the store are the leaf
module's, :mod:`localjury.types`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury._hashing import content_hash
from localjury.engines._catalog import split_update
from localjury.engines.base import Engine
from localjury.errors import CommitError
from localjury.metrics.base import Metric
from localjury.metrics.neutralise import Marked
from localjury.metrics.protocol import Judging, Request
from localjury.models.registry import ModelFiles, ModelSpec
from localjury.results.record_result import ModelJudgment
from localjury.results.summary import ModelSummary
from localjury.run.config import RunConfig
from localjury.store import GenerationStore, JudgmentStore, Stored
from localjury.types import Completion, Usage

if TYPE_CHECKING:
    from rich.progress import Progress

    from localjury.run.cluster.session import RaySession

EngineFactory = Callable[[ModelSpec], Engine]


@dataclass(frozen=True)
class JuryModel(Marked):
    """A jury model as this run uses it: its spec, identity and sampling settings, and what the
    jury read of it once (:func:`~localjury.run.jury.resolve_jury` makes each one; made by
    hand, the keyword fields default to a model that does not think, on an engine that adds
    nothing to its samples' key)."""

    spec: ModelSpec
    identity: str
    temperature: float
    top_p: float
    max_tokens: int
    markers: tuple[str, ...] = ()
    """Its tokenizer's added tokens and chat-template literals
    (:func:`~localjury.models._tokenizer_files.tokenizer_markers`), which record text is kept from."""
    thinking_room: int = field(default=0, kw_only=True)
    """The tokens a sample writes beside its answer (a thinking budget and its close; 0 without:
    :meth:`~localjury.models.registry.ModelSpec.output_tokens`)."""
    engine_key: dict[str, Any] = field(default_factory=dict, kw_only=True)
    """What its engine adds to its samples' key in the judgment store (vLLM's guidance backend
    draws its own way: :func:`~localjury.engines._catalog.sample_key`)."""
    location: str = field(default="", kw_only=True)
    """Where the model is: its folder or GGUF file, or its server's URL (the summary's ``path``)."""
    files: ModelFiles | None = field(default=None, kw_only=True)
    """The files its engine loads, checked when the jury was resolved (None: a model on a
    server, or the engine checks them when it loads)."""

    def output_tokens(self, max_tokens: int) -> int:
        """The most tokens a sample may write: ``max_tokens`` and its thinking room."""
        return max_tokens + (self.thinking_room or 0)

    def store_key(self, req: Request, seed: int) -> str:
        return content_hash(
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
            **({"thinking": self.spec.thinking} if self.spec.thinking is not None else {}),
            **self.engine_key,
        )


@dataclass
class ModelCounts:
    """One model's counters over a run (over one shard, on a replica of a sharded run; over the
    passes of a dry run, which count what the run would generate). The stages add to them only
    through its methods."""

    spec: ModelSpec
    load_seconds: float = 0.0
    generate_seconds: float = 0.0
    prompts: int = 0
    """Prompts generated (a dry run: to generate), each once per engine call."""
    generated: int = 0
    """Samples generated in this run (a dry run: to generate)."""
    cached: int = 0
    """Samples found in the judgment store."""
    used: int = 0
    """Samples the results are built from."""
    output_tokens: int = 0
    prompt_tokens: int = 0
    """Tokens of the prompts generated in this run (each prompt once per engine call)."""
    reused_tokens: int = 0
    """Of those, tokens the engine reused from a KV cache instead of computing."""
    over_context: int = 0
    """Prompts over the model's context: an error in place of their samples (a dry run: distinct prompts)."""
    abstentions: int = 0
    ungrounded: int = 0
    """Samples whose reason cites what the record does not hold."""
    passes: int = 0
    decided: int = 0
    unscored: int = 0
    """(record, metric) pairs where the model gave no verdict or score."""
    saved: int = 0
    """Samples not drawn because the first ones were unanimous (adaptive strictness)."""
    replicas: int = 1
    lost_records: int = 0
    """Records whose shard's replica died on every try (a sharded run)."""
    records: int = 0
    """Records the model is asked about: its statement extractions or its judgments."""
    awaiting: int = 0
    """(record, metric) pairs not planned for it: their statement extraction is not in the store
    (in a dry run, which generates none)."""
    adaptive_more: int = 0
    """Samples that wait on first samples not drawn yet (a dry run, under adaptive strictness)."""

    def loaded(self, seconds: float) -> None:
        """The engine was loaded in ``seconds``."""
        self.load_seconds += seconds

    def found(self, stored: Stored) -> None:
        """A request's generation was found in the store."""
        if not isinstance(stored, str):
            self.cached += len(stored)

    def drew(self, outputs: list[list[Completion]], usage: Usage, seconds: float) -> None:
        """An engine call drew ``outputs`` (each prompt's samples) in ``seconds``."""
        self.generate_seconds += seconds
        self.prompts += len(outputs)
        self.generated += sum(len(samples) for samples in outputs)
        self.output_tokens += sum(c.n_tokens for samples in outputs for c in samples)
        self.prompt_tokens += usage.prompt_tokens
        self.reused_tokens += usage.reused_tokens

    def would_draw(self, samples: int, prompt_tokens: int) -> None:
        """A dry run found a prompt of ``prompt_tokens`` tokens that the run draws ``samples`` samples of."""
        self.prompts += 1
        self.generated += samples
        self.prompt_tokens += prompt_tokens

    def too_long(self) -> None:
        """A prompt is over the model's context."""
        self.over_context += 1

    def asked(self, records: int) -> None:
        """A chunk asks the model about ``records`` records."""
        self.records += records

    def awaiting_extraction(self, pairs: int) -> None:
        """``pairs`` (record, metric) pairs are not planned: their statement extraction is not in the store."""
        self.awaiting += pairs

    def waiting_on_first(self, samples: int) -> None:
        """``samples`` samples wait on first samples not drawn yet (a dry run, adaptive strictness)."""
        self.adaptive_more += samples

    def judged(self, judgment: ModelJudgment, used: int, saved: int) -> None:
        """The model's judgment of a (record, metric), from ``used`` samples (``saved`` not drawn)."""
        self.used += used
        self.saved += saved
        self.abstentions += judgment.abstentions
        self.ungrounded += sum(bool(cited) for cited in judgment.ungrounded or ())
        self.unscored += judgment.score is None
        self.decided += judgment.verdict is not None
        self.passes += judgment.verdict == 1

    def absorb(self, other: ModelCounts, *, timings: bool = True) -> None:
        """Add another pass's counters (a shard's, on a replica) to these."""
        self.prompts += other.prompts
        self.generated += other.generated
        self.cached += other.cached
        self.output_tokens += other.output_tokens
        self.prompt_tokens += other.prompt_tokens
        self.reused_tokens += other.reused_tokens
        if timings:
            self.load_seconds += other.load_seconds
            self.generate_seconds += other.generate_seconds

    def sharded(self, load_seconds: float, generate_seconds: float, replicas: int, lost_records: int) -> None:
        """A pass on the cluster's replicas: its slowest load, the rest of its wall-clock, its
        pool's replicas and the records of its lost shards."""
        self.load_seconds += load_seconds
        self.generate_seconds += generate_seconds
        self.replicas = max(self.replicas, replicas)
        self.lost_records += lost_records

    def summary(self, path: str) -> ModelSummary:
        """The model's line of the run summary; ``path``: where the model is (its
        :attr:`JuryModel.location`)."""
        seconds = self.generate_seconds
        return ModelSummary(
            model=self.spec.name,
            path=path,
            engine=self.spec.engine,
            judgments=self.used,
            cached=self.cached,
            abstentions=self.abstentions,
            ungrounded=self.ungrounded,
            abstained_verdicts=self.unscored,
            pass_rate=self.passes / self.decided if self.decided else None,
            load_seconds=round(self.load_seconds, 3),
            generate_seconds=round(seconds, 3),
            judgments_per_second=self.generated / seconds if seconds else None,
            output_tokens=self.output_tokens,
            output_tokens_per_second=self.output_tokens / seconds if seconds else None,
            prompt_tokens=self.prompt_tokens,
            prompt_tokens_reused=self.reused_tokens,
            samples_saved=self.saved,
            replicas=self.replicas,
            lost_records=self.lost_records,
        )


@dataclass
class RunContext:
    """What every stage of one run sees: the settings, how each metric is judged, the jury, the
    judgment store, and the counters (each model's, :class:`ModelCounts`: the one place a run
    counts)."""

    config: RunConfig
    judgings: list[Judging]
    """How each metric is judged, in the metrics' order (built once per run:
    :func:`~localjury.run.prepare.check_metrics`)."""
    models: list[JuryModel]
    extractor: JuryModel | None
    """The model that extracts statements for composite metrics (None without one)."""
    store: GenerationStore
    factory: EngineFactory | None
    """What builds each model's engine (None: its registry engine, from the files the jury checked)."""
    progress: Progress | None = None
    cluster: RaySession | None = None
    counts: dict[str, ModelCounts] = field(init=False)
    lost: dict[tuple[str, str], str] = field(default_factory=dict)
    """(model, record id) -> why that model has nothing for the record: its shard was lost
    on the cluster (kept out of the store, so that a rerun tries again)."""

    def __post_init__(self) -> None:
        self.counts = {m.spec.name: ModelCounts(m.spec) for m in self.models}

    @property
    def metrics(self) -> list[Metric]:
        """The metrics judged, in order."""
        return [j.metric for j in self.judgings]

    @property
    def seed(self) -> int:
        return self.config.sampling.seed

    def in_pass_order(self) -> list[JuryModel]:
        """The models in the order their passes run: the extractor first, straight after the
        extraction pass (its engine is still loaded)."""
        return sorted(self.models, key=lambda m: m is not self.extractor)

    def missing(self, model: str, record_id: str) -> str:
        """Why ``model`` has no generation for the record."""
        return self.lost.get((model, record_id), f"no generation by {model!r} in the judgment store")

    def portable(self, store: GenerationStore, split: bool = False) -> RunContext:
        """A copy of this context to send to a replica of a sharded run: with ``store`` in place
        of the driver's, without the progress display and the cluster (the driver keeps
        those), and with each model's folder as an absolute path (a replica's
        ``$LOCALJURY_HOME`` may differ). ``split``: the replicas split their model over
        several GPUs, with the settings its engine needs for that
        (:func:`~localjury.engines._catalog.split_update`: vLLM's Ray executor, unless models.yaml
        names another)."""

        def pinned_spec(spec: ModelSpec) -> ModelSpec:
            folder = spec.local_files()
            update: dict[str, Any] = {"path": str(folder.absolute()), "embedded": None} if folder else {}
            if split:
                update |= split_update(spec)
            return spec.model_copy(update=update)

        # A replica checks its own files when its engine loads.
        pinned = {m.spec.name: replace(m, spec=pinned_spec(m.spec), files=None) for m in self.models}
        extractor = pinned[self.extractor.spec.name] if self.extractor is not None else None
        return RunContext(self.config, self.judgings, list(pinned.values()), extractor, store, self.factory)


class StoreOnUse:
    """The run's judgment store, opened at its first lookup: after the outputs are refused and
    the records read, still before any model loads (its checks of the file fail there, naming
    it). Before that it is not there: nothing kept, nothing to close."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._store: JudgmentStore | None = None

    @property
    def store(self) -> JudgmentStore:
        if self._store is None:
            self._store = JudgmentStore(self.path)
        return self._store

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        return self.store.get_many(keys)

    def put_many(self, items: Mapping[str, Stored]) -> None:
        self.store.put_many(items)

    @property
    def opened(self) -> bool:
        return self._store is not None

    @property
    def kept(self) -> int:
        """The samples the store committed (0 before it opens)."""
        return self._store.kept if self._store is not None else 0

    @property
    def closed(self) -> bool:
        return self._store is None or self._store.closed

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def kept_note(ctx: RunContext, store: JudgmentStore | StoreOnUse, *, temporary: bool, exc: BaseException) -> str:
    """What a failed or interrupted run leaves for the next one: the judgments the store
    committed (not those generated: a write that failed kept none of its chunk), and whether
    its files were written."""
    generated = sum(c.generated for c in ctx.counts.values())
    kept = store.kept
    files = "" if isinstance(exc, CommitError) and exc.outcome != "previous" else "; no results file was written"
    where = f"the temporary store {store.path}" if temporary else f"the judgment store {store.path}"
    if ctx.config.store.fresh and not temporary:  # every prompt generated again, the kept ones too
        resume = (
            "the same command generates them again (`fresh`); without `fresh` it keeps them, and records this run "
            "had not reached reuse what the store held before it"
        )
    elif temporary:
        resume = "use it as the judgment store of the same run to resume without generating them again"
    else:
        resume = "the same command resumes from there without generating them again"
    if not generated and not kept:
        return f"no judgment was generated before this{files}"
    if not kept:
        return (
            f"none of the {generated} judgments generated before this could be stored in {where}{files}; "
            "the same command generates them again"
        )
    if kept < generated:
        return (
            f"of the {generated} judgments generated before this, {kept} are kept in {where} and "
            f"{generated - kept} could not be stored{files}; {resume}"
        )
    return f"the {kept} judgments generated before this are kept in {where}{files}; {resume}"
