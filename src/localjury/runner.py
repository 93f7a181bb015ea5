"""Plan the batches, run each model over the dataset, vote, and collect results.

A run streams the dataset in chunks of ``chunk_size`` records and goes model by model (the
extractor of the composite metrics first): for each chunk, every prompt the model has not
already answered goes into ONE engine call per distinct (strictness, schema, token budget)
with n = strictness, and what it generated is committed to the judgment store before the
next chunk (see :mod:`localjury.store`). A model whose prompts are all in the store is not
even loaded. Models run one after another in this process, so a jury needs the memory of
one model. A last pass reads the store chunk by chunk, parses, votes and streams the
results out: memory stays bounded by the chunk, not the dataset.

Because a generation is keyed by its content and sampled from seeds derived from (run
seed, prompt, sample index), a run killed at any point and run again — or run with one
criterion changed — generates only what is missing and gives the same results.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from localjury import __version__
from localjury._outputs import StagedFile, Staging, check_outputs
from localjury.engines import load_engine, resolve_engine
from localjury.engines.base import Completion, Engine, Sampling
from localjury.errors import ConfigError, EngineError, RecordError
from localjury.manifest import Manifest, build_manifest, dataset_record, manifest_path_for, model_record, output_record
from localjury.metrics.base import MAX_STRICTNESS, JudgeMetric, Message, Metric
from localjury.metrics.composite import EXTRACTION_TOKENS, TOKENS_PER_STATEMENT, CompositeMetric
from localjury.neutralise import DEFAULT, Neutraliser, tokenizer_markers
from localjury.records import Record, coerce_records, dedupe, iter_records
from localjury.registry import DEFAULT_MODEL, ModelSpec, load_registry, localjury_home, registry_path
from localjury.report import (
    InvalidSample,
    MetricSummary,
    ModelJudgment,
    ModelSummary,
    RecordResult,
    StatementJudgment,
    StatementResult,
    Summary,
    read_results,
    summary_path_for,
)
from localjury.store import GenerationStore, JudgmentStore, Stored, generation_key
from localjury.voting import (
    TieBreak,
    check_tie_break,
    final_score,
    model_score,
    model_verdict,
    passes,
    share_supported,
)

if TYPE_CHECKING:
    import pandas as pd
    from rich.progress import Progress

    from localjury._ray import RayCluster, RaySession

EngineFactory = Callable[[ModelSpec], Engine]
Key = tuple[str, str]
"""(record id, metric name)."""

#: Records per chunk: one engine call per chunk per model, one commit to the store.
DEFAULT_CHUNK_SIZE = 1024
#: Characters per token assumed when fitting a prompt to a model's context by truncating its
#: retrieved contexts; below the 3.5-4.5 of English text, so the estimate errs long.
CHARS_PER_TOKEN = 3.0
#: Put in place of what truncation removed from a context, so the judge (and you) can see it.
TRUNCATION_MARK = " [... {n} characters cut by localjury to fit the model's context ...]"
OverflowPolicy = Literal["error", "truncate"]


def default_cache_path() -> Path:
    """``$LOCALJURY_CACHE``, else ``$LOCALJURY_HOME/cache/judgments.sqlite``: shared by every
    run on this machine."""
    if env := os.environ.get("LOCALJURY_CACHE"):
        return Path(env).expanduser()
    return localjury_home() / "cache" / "judgments.sqlite"


@dataclass
class RunResult:
    """What :func:`evaluate` returns: one result per (record, metric), and the summary.

    When the run streamed its results to a file (``out=``), ``results`` is empty and
    :meth:`iter_results` reads them back from ``results_path``.
    """

    results: list[RecordResult]
    summary: Summary
    manifest: Manifest | None = None
    results_path: Path | None = None

    def iter_results(self) -> Iterator[RecordResult]:
        """Every result, from memory or from the results file."""
        if self.results or self.results_path is None:
            yield from self.results
        else:
            yield from read_results(self.results_path)

    def write(self, out: str | Path, summary: str | Path | None = None) -> tuple[Path, Path]:
        """Write results.jsonl, its summary JSON (default: ``<out stem>.summary.json``) and
        manifest, committed together as :func:`evaluate` does with ``out``.

        Raises:
            ConfigError: An output path is a folder, cannot be written, is the dataset, or
                two of them are the same file.
        """
        outputs = _output_paths(out, summary)
        dataset = self.manifest.dataset if self.manifest is not None else None
        check_outputs(outputs, {"dataset": Path(dataset["path"]) if dataset else None})
        with Staging() as staging:
            results = staging.file(outputs["results file"])
            for r in self.iter_results():
                results.write(r.model_dump_json() + "\n")
            if self.manifest is not None:
                self.manifest = _commit(staging, results, self.summary, self.manifest, outputs)
            else:
                staging.file(outputs["summary"], self.summary.model_dump_json(indent=2) + "\n")
                staging.commit()
        return outputs["results file"], outputs["summary"]

    def to_pandas(self) -> pd.DataFrame:
        """One row per (record, metric, model) with votes, verdict and scores."""
        import pandas as pd

        rows: list[dict[str, Any]] = []
        for r in self.iter_results():
            base = {"record_id": r.record_id, "metric": r.metric, "score": r.score, "error": r.error}
            if not r.models:
                rows.append(base)
            for m in r.models:
                rows.append(
                    {
                        **base,
                        "model": m.model,
                        "votes": m.votes,
                        "abstentions": m.abstentions,
                        "verdict": m.verdict,
                        "model_score": m.score,
                        "model_error": m.error,
                    }
                )
        return pd.DataFrame(rows)


@dataclass
class _ModelStats:
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

    def absorb(self, other: _ModelStats, *, timings: bool = True) -> None:
        """Add another pass's counters (a shard's, on a replica) to these."""
        self.generated += other.generated
        self.cached += other.cached
        self.output_tokens += other.output_tokens
        if timings:
            self.load_seconds += other.load_seconds
            self.generate_seconds += other.generate_seconds


@dataclass(frozen=True)
class _Request:
    """One prompt to run with one model: n samples under a schema."""

    key: Key
    messages: list[Message]
    schema: dict[str, Any]
    n: int
    max_tokens: int
    temperature: float
    first_sample: int = 0


@dataclass(frozen=True)
class _Model:
    """A jury model as this run uses it: its spec, identity and sampling settings."""

    spec: ModelSpec
    identity: str
    temperature: float
    top_p: float
    max_tokens: int
    neutralise: Neutraliser = DEFAULT
    """What record text goes through before it reaches this model's prompts: localjury's tags,
    and this model's tokenizer's special tokens and chat markers."""

    def store_key(self, req: _Request, seed: int) -> str:
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


def _resolve_models(models: Sequence[str | ModelSpec] | None, registry: str | Path | None) -> list[ModelSpec]:
    names = list(models) if models else [DEFAULT_MODEL]
    reg = None
    specs: list[ModelSpec] = []
    for m in names:
        if isinstance(m, ModelSpec):
            specs.append(m)
            continue
        reg = reg or load_registry(registry)
        specs.append(reg.get(m))
    seen = [s.name for s in specs]
    if len(set(seen)) != len(seen):
        raise ConfigError(f"a model is named twice in the jury: {', '.join(seen)}")
    return specs


def _check_settings(
    metrics: Sequence[Metric],
    strictness: int | None,
    tie_break: TieBreak | None,
    temperature: float | None,
    max_tokens: int | None,
    chunk_size: int,
    on_overflow: str,
) -> None:
    if not metrics:
        raise ConfigError("no metric to judge: give at least one (--aspect, --criterion, --criteria or --metric)")
    for m in metrics:
        if not isinstance(m, JudgeMetric | CompositeMetric):
            raise ConfigError(f"metric {m.name!r} is a {type(m).__name__}; expected a JudgeMetric or CompositeMetric")
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        raise ConfigError(f"metric names must be unique, got: {', '.join(names)}")
    if strictness is not None and not 1 <= strictness <= MAX_STRICTNESS:
        raise ConfigError(f"strictness must be from 1 to {MAX_STRICTNESS}, got {strictness}")
    if tie_break is not None:
        try:
            check_tie_break(tie_break)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if max_tokens is not None and max_tokens < 1:
        raise ConfigError(f"max_tokens must be >= 1, got {max_tokens}")
    if temperature is not None and temperature < 0:
        raise ConfigError(f"temperature must be >= 0, got {temperature}")
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be >= 1, got {chunk_size}")
    if on_overflow not in ("error", "truncate"):
        raise ConfigError(f"unknown overflow policy {on_overflow!r}; expected one of: error, truncate")


class _Dataset:
    """The records, read again for each pass (a file is streamed, never held in memory)."""

    def __init__(self, records: str | Path | Iterable[Record | Mapping[str, Any]]) -> None:
        self.path: Path | None = None
        self._items: list[Record | Mapping[str, Any]] = []
        if isinstance(records, str | Path):
            self.path = Path(records)
        else:
            self._items = list(records)

    def entries(self) -> Iterator[Record | RecordError]:
        raw = iter_records(self.path) if self.path is not None else coerce_records(self._items)
        return dedupe(raw)

    def chunks(self, size: int) -> Iterator[list[Record | RecordError]]:
        it = self.entries()
        while chunk := list(itertools.islice(it, size)):
            yield chunk


class _Run:
    """One evaluate() call: the settings, the store, and the passes over the data."""

    def __init__(
        self,
        metrics: Sequence[Metric],
        models: list[_Model],
        extractor: _Model | None,
        store: GenerationStore,
        *,
        ks: dict[str, int],
        ties: dict[str, TieBreak],
        seed: int,
        adaptive: bool,
        fresh: bool,
        on_overflow: OverflowPolicy,
        factory: EngineFactory,
        progress: Progress | None,
        cluster: RaySession | None = None,
    ) -> None:
        self.metrics = list(metrics)
        self.fresh = fresh
        self.on_overflow = on_overflow
        self.models = models
        self.extractor = extractor
        self.store = store
        self.ks = ks
        self.ties = ties
        self.seed = seed
        self.adaptive = adaptive
        self.factory = factory
        self.progress = progress
        self.cluster = cluster
        self.stats = {m.spec.name: _ModelStats(m.spec) for m in models}
        #: (model, record id) -> why that model has nothing for the record: its shard was lost
        #: on the cluster (kept out of the store, so that a rerun tries again).
        self.lost: dict[tuple[str, str], str] = {}

    def portable(self, split: bool = False) -> _Run:
        """A copy of this run's settings to send to a replica of a sharded run: without the
        store, the progress display and the cluster (the driver keeps those), and with each
        model's folder as an absolute path (a replica's ``$LOCALJURY_HOME`` may differ).
        ``split``: the replicas split their model over several GPUs, with vLLM's Ray executor
        unless models.yaml names another."""

        def pinned_spec(spec: ModelSpec) -> ModelSpec:
            update: dict[str, Any] = {"path": str(spec.local_dir().absolute()), "embedded": None}
            if split and spec.vllm.distributed_executor_backend is None:
                update["vllm"] = spec.vllm.model_copy(update={"distributed_executor_backend": "ray"})
            return spec.model_copy(update=update)

        pinned = {m.spec.name: replace(m, spec=pinned_spec(m.spec)) for m in self.models}
        return _Run(
            self.metrics,
            list(pinned.values()),
            pinned[self.extractor.spec.name] if self.extractor is not None else None,
            _MemoryStore(),
            ks=self.ks,
            ties=self.ties,
            seed=self.seed,
            adaptive=self.adaptive,
            fresh=self.fresh,
            on_overflow=self.on_overflow,
            factory=self.factory,
            progress=None,
        )

    # -- requests: the same construction for the model passes and the assembly ---------------
    def messages(self, record: Record, metric: Metric, model: _Model) -> list[Message] | RecordError:
        """The prompt of a single-step metric (or of a composite's extraction) for ``model``,
        or the record's error for it."""
        try:
            if isinstance(metric, JudgeMetric):
                return metric.messages(record, model.neutralise)
            assert isinstance(metric, CompositeMetric)
            metric.verify_input(record, [])  # a missing context is the record's error, before any load
            return metric.extract_messages(record, model.neutralise)
        except RecordError as exc:
            return exc

    def extraction_request(self, record: Record, metric: CompositeMetric, messages: list[Message]) -> _Request:
        assert self.extractor is not None
        return _Request(
            (record.id, metric.name),
            messages,
            metric.extract_schema(),
            n=1,
            max_tokens=max(self.extractor.max_tokens, EXTRACTION_TOKENS),
            temperature=0.0,
        )

    def judge_requests(
        self, model: _Model, record: Record, metric: Metric, statements: list[str] | None
    ) -> list[_Request]:
        """The first request of a pair, and under adaptive strictness the one for the rest."""
        k = self.ks[metric.name]
        if isinstance(metric, JudgeMetric):
            budget = model.max_tokens
            render = partial(metric.messages, neutralise=model.neutralise)
            messages = self.fit(model, record, budget, render(record), render)
            req = _Request((record.id, metric.name), messages, metric.json_schema(), k, budget, model.temperature)
        else:
            assert isinstance(metric, CompositeMetric) and statements
            budget = max(model.max_tokens, 64 + TOKENS_PER_STATEMENT * len(statements))
            render = partial(metric.verify_messages, statements=statements, neutralise=model.neutralise)
            verify = self.fit(model, record, budget, render(record), render)
            req = _Request(
                (record.id, metric.name),
                verify,
                metric.verify_schema(record, statements),
                k,
                budget,
                model.temperature,
            )
        m = k // 2 + 1
        if not self.adaptive or m >= k:
            return [req]
        return [replace(req, n=m), replace(req, n=k - m, first_sample=m)]

    def fit(
        self,
        model: _Model,
        record: Record,
        budget: int,
        messages: list[Message],
        render: Callable[[Record], list[Message]],
    ) -> list[Message]:
        """Under ``on_overflow="truncate"``, cut the record's retrieved contexts (longest
        first, each cut marked in the text) until the prompt's estimated length leaves
        ``budget`` output tokens in the model's context. The estimate is by characters
        (CHARS_PER_TOKEN), so it needs no tokenizer and every pass builds the same prompt;
        a prompt still too long after it is the model's error for that record."""
        if self.on_overflow != "truncate" or not record.retrieved_contexts:
            return messages
        allowed = int((model.spec.context_length - budget) * CHARS_PER_TOKEN)
        excess = sum(len(m["content"]) for m in messages) - allowed
        if excess <= 0:
            return messages
        contexts = list(record.retrieved_contexts)
        while excess > 0:
            i = max(range(len(contexts)), key=lambda j: len(contexts[j]))
            room = len(contexts[i]) - len(TRUNCATION_MARK.format(n=10**9))
            if room <= 0:
                break  # nothing left to cut: the model reports the overflow
            cut = min(excess + len(TRUNCATION_MARK.format(n=10**9)), len(contexts[i]))
            keep = contexts[i][: len(contexts[i]) - cut]
            contexts[i] = keep + TRUNCATION_MARK.format(n=len(record.retrieved_contexts[i]) - len(keep))
            excess = sum(len(m["content"]) for m in render(record.model_copy(update={"retrieved_contexts": contexts})))
            excess -= allowed
        return render(record.model_copy(update={"retrieved_contexts": contexts}))

    def unanimous(self, record: Record, metric: Metric, statements: list[str] | None, samples: Stored) -> bool:
        """Whether the first samples already decide the majority (adaptive strictness)."""
        if isinstance(samples, str):
            return True  # could not run: nothing more to draw
        if isinstance(metric, JudgeMetric):
            votes = [metric.parse(c.text, finished=c.finished).vote for c in samples]
            return None not in votes and len(set(votes)) == 1
        assert isinstance(metric, CompositeMetric) and statements
        parsed = [metric.parse_verification(c.text, record, statements, finished=c.finished) for c in samples]
        if any(p.problem for p in parsed):
            return False
        return all(len({p.votes[i] for p in parsed}) == 1 for i in range(len(statements)))

    def statements(
        self, record: Record, metric: CompositeMetric, messages: list[Message], found: Mapping[str, Stored]
    ) -> list[str] | str:
        """The record's statements from the extractor's stored generation, or the error."""
        assert self.extractor is not None
        key = self.extractor.store_key(self.extraction_request(record, metric, messages), self.seed)
        stored = found.get(key)
        name = self.extractor.spec.name
        if stored is None:
            lost = self.lost.get((name, record.id))
            return f"no statement extraction by {name!r}" + (f": {lost}" if lost else " in the judgment store")
        if isinstance(stored, str):
            return f"statement extraction by {name!r} failed: {stored}"
        (sample,) = stored
        statements, problem = metric.parse_statements(sample.text, finished=sample.finished)
        if statements is None:
            return f"statement extraction by {name!r} abstained: {problem}; raw: {sample.text!r}"
        return statements

    def missing(self, model: str, record: Record) -> str:
        """Why ``model`` has no generation for ``record``."""
        return self.lost.get((model, record.id), f"no generation by {model!r} in the judgment store")

    # -- model passes ------------------------------------------------------------------------
    def model_pass(self, model: _Model, dataset: _Dataset, chunk_size: int, total: int | None) -> None:
        """Run one model over every chunk, generating only what the store lacks (on this
        process's engine, or sharded over the cluster's replicas)."""
        task = None
        if self.progress is not None:
            task = self.progress.add_task(f"{model.spec.name}", total=total)
        if self.cluster is not None:
            try:
                self.sharded_pass(self.cluster, model, dataset, chunk_size, total or 0, task)
            finally:
                if self.progress is not None and task is not None:
                    self.progress.update(task, description=f"{model.spec.name}: done")
            return
        worker = _Worker(self, model)
        try:
            for chunk in dataset.chunks(chunk_size):
                worker.run(chunk)
                if self.progress is not None and task is not None:
                    self.progress.advance(task, len(chunk))
        finally:
            worker.close()
            if self.progress is not None and task is not None:
                self.progress.update(task, description=f"{model.spec.name}: done")

    def sharded_pass(
        self, session: RaySession, model: _Model, dataset: _Dataset, chunk_size: int, total: int, task: Any
    ) -> None:
        """Run one model over the data on a pool of replicas (see :mod:`localjury._ray`).

        Each shard is first looked up in the store here (a dry pass: :class:`_Probe`); only
        shards with something to generate go out, with the stored generations they need. The
        generations that come back are committed shard by shard, as a local run commits its
        chunks, so resume and cache work the same way."""
        placement = session.placement(model.spec)
        size = session.shard_size(total, chunk_size, placement.replicas)
        stats = self.stats[model.spec.name]

        def advance(count: int) -> None:
            if self.progress is not None and task is not None:
                self.progress.advance(task, count)

        sent: list[list[str]] = []  # the record ids of each shard sent out, in order

        def shards() -> Iterator[tuple[tuple[list[Record], dict[str, Stored]], int]]:
            for chunk in dataset.chunks(size):
                probe = _Probe(self, model)
                probe.run(chunk)
                if not probe.missing:
                    stats.absorb(probe.st)
                    advance(len(chunk))
                    continue
                records = [e for e in chunk if isinstance(e, Record)]
                sent.append([r.id for r in records])
                yield (records, probe.found), len(chunk)

        started = time.perf_counter()
        slowest_load = 0.0
        make = partial(_ShardWorker, self.portable(split=placement.split), model.spec.name)
        from localjury._ray import LostShard

        lost = 0
        for output, count in session.map_shards(shards(), make, model.spec, placement):
            if isinstance(output, LostShard):
                ids = sent[output.index]
                self.lost.update({(model.spec.name, i): output.reason for i in ids})
                lost += len(ids)
                advance(count)
                continue
            new, replica_stats = output
            self.store.put_many(new)
            slowest_load = max(slowest_load, replica_stats.load_seconds)
            stats.absorb(replica_stats, timings=False)
            advance(count)
        # The replicas load and generate side by side: the pass's wall-clock (less the slowest
        # load) is what judgments/s of a sharded run is measured against.
        stats.load_seconds += slowest_load
        stats.generate_seconds += max(0.0, time.perf_counter() - started - slowest_load)
        stats.replicas = max(stats.replicas, session.pool_size)
        stats.lost_records += lost

    # -- assembly ----------------------------------------------------------------------------
    def assemble(self, chunk: list[Record | RecordError]) -> list[RecordResult]:
        """Parse and vote a chunk's stored generations into results."""
        # The extractor's prompts (a record's error does not depend on the model).
        first = self.extractor or self.models[0]
        plans: list[tuple[Record, Metric, list[Message] | RecordError]] = [
            (e, m, self.messages(e, m, first)) for e in chunk if isinstance(e, Record) for m in self.metrics
        ]
        # Look up the extractions, then every model's requests, in a few queries.
        extraction_keys = [
            self.extractor.store_key(self.extraction_request(r, m, msgs), self.seed)
            for r, m, msgs in plans
            if isinstance(m, CompositeMetric) and not isinstance(msgs, RecordError) and self.extractor
        ]
        found = self.store.get_many(extraction_keys)
        statements: dict[Key, list[str] | str] = {}
        for r, m, msgs in plans:
            if isinstance(m, CompositeMetric) and not isinstance(msgs, RecordError):
                statements[(r.id, m.name)] = self.statements(r, m, msgs, found)
        wanted: dict[tuple[str, Key], list[str]] = {}
        for r, m, msgs in plans:
            st = statements.get((r.id, m.name))
            if isinstance(msgs, RecordError) or isinstance(st, str) or st == []:
                continue
            for model in self.models:
                reqs = self.judge_requests(model, r, m, st if isinstance(st, list) else None)
                wanted[(model.spec.name, (r.id, m.name))] = [model.store_key(q, self.seed) for q in reqs]
        found = self.store.get_many(k for keys in wanted.values() for k in keys)

        results: list[RecordResult] = []
        by_id = iter(plans)
        for entry in chunk:
            if isinstance(entry, RecordError):
                results.extend(
                    RecordResult(record_id=entry.record_id, metric=m.name, score=None, error=str(entry), models=[])
                    for m in self.metrics
                )
                continue
            for _ in self.metrics:
                record, metric, msgs = next(by_id)
                results.append(
                    self._result(record, metric, msgs, statements.get((record.id, metric.name)), wanted, found)
                )
        return results

    def _result(
        self,
        record: Record,
        metric: Metric,
        msgs: list[Message] | RecordError,
        statements: list[str] | str | None,
        wanted: dict[tuple[str, Key], list[str]],
        found: dict[str, Stored],
    ) -> RecordResult:
        key = (record.id, metric.name)
        composite = isinstance(metric, CompositeMetric)
        extracted_by = self.extractor.spec.name if composite and self.extractor else None
        if isinstance(msgs, RecordError) or isinstance(statements, str):
            error = str(msgs) if isinstance(msgs, RecordError) else str(statements)
            return RecordResult(
                record_id=record.id, metric=metric.name, score=None, error=error, models=[], extracted_by=extracted_by
            )
        if composite and not statements:
            return RecordResult(
                record_id=record.id,
                metric=metric.name,
                score=None,
                error=None,
                models=[],
                statements=[],
                extracted_by=extracted_by,
            )
        per_model: list[ModelJudgment] = []
        per_statement: list[list[StatementJudgment]] = [[] for _ in statements or []]
        for model in self.models:
            stored = [found.get(k) for k in wanted[(model.spec.name, key)]]
            judgment = self._judge(model, record, metric, statements, stored, per_statement)
            per_model.append(judgment)
        result_statements = None
        if composite:
            assert statements is not None
            result_statements = [
                StatementResult(
                    statement=text,
                    score=final_score([model_score(j.verdict) for j in judged]),
                    models=judged,
                )
                for text, judged in zip(statements, per_statement, strict=True)
            ]
        return RecordResult(
            record_id=record.id,
            metric=metric.name,
            score=final_score([j.score for j in per_model]),
            error=None,
            models=per_model,
            statements=result_statements,
            extracted_by=extracted_by,
        )

    def _judge(
        self,
        model: _Model,
        record: Record,
        metric: Metric,
        statements: list[str] | None,
        stored: list[Stored | None],
        per_statement: list[list[StatementJudgment]],
    ) -> ModelJudgment:
        st = self.stats[model.spec.name]
        k = self.ks[metric.name]
        name = model.spec.name
        first = stored[0]
        error = first if isinstance(first, str) else (self.missing(name, record) if first is None else None)
        if error is not None:
            st.abstentions += k
            st.unscored += 1
            single = isinstance(metric, JudgeMetric)
            return ModelJudgment(
                model=name,
                votes=[None] * k if single else [],
                reasons=[None] * k if single else [],
                abstentions=k,
                verdict=None,
                score=None,
                error=error,
            )
        samples: list[Completion] = list(first)  # type: ignore[arg-type]
        if len(stored) > 1:
            rest = stored[1]
            if isinstance(rest, list):
                samples += rest
            else:
                st.saved += k - len(samples)
        st.used += len(samples)
        if isinstance(metric, JudgeMetric):
            parsed = [metric.parse(c.text, finished=c.finished) for c in samples]
            votes = [p.vote for p in parsed]
            verdict = model_verdict(votes, self.ties[metric.name])
            invalid = [
                InvalidSample(sample=j, problem=p.problem or "invalid", raw=p.raw)
                for j, p in enumerate(parsed)
                if p.vote is None
            ]
            st.abstentions += len(invalid)
            st.unscored += verdict is None
            st.decided += verdict is not None
            st.passes += verdict == 1
            return ModelJudgment(
                model=name,
                votes=votes,
                reasons=[p.reason for p in parsed],
                drawn=len(samples),
                abstentions=len(invalid),
                verdict=verdict,
                score=model_score(verdict),
                invalid=invalid,
            )
        assert isinstance(metric, CompositeMetric) and statements
        checks = [metric.parse_verification(c.text, record, statements, finished=c.finished) for c in samples]
        verdicts: list[int | None] = []
        for i, judged in enumerate(per_statement):
            votes = [p.votes[i] for p in checks]
            verdict = model_verdict(votes, self.ties[metric.name])
            verdicts.append(verdict)
            judged.append(
                StatementJudgment(model=name, votes=votes, reasons=[p.reasons[i] for p in checks], verdict=verdict)
            )
        invalid = [
            InvalidSample(sample=j, problem=p.problem or "invalid", raw=p.raw)
            for j, p in enumerate(checks)
            if p.problem is not None
        ]
        score = share_supported(verdicts)
        st.abstentions += len(invalid)
        st.unscored += score is None
        return ModelJudgment(
            model=name,
            votes=[],
            reasons=[],
            drawn=len(samples),
            abstentions=len(invalid),
            verdict=None,
            score=score,
            invalid=invalid,
        )


class _Worker:
    """One model's pass: loads the engine only when a chunk has something to generate."""

    def __init__(
        self, run: _Run, model: _Model, store: GenerationStore | None = None, stats: _ModelStats | None = None
    ) -> None:
        self.run_ = run
        self.model = model
        self.engine: Engine | None = None
        self.store = store if store is not None else run.store
        self.st = stats if stats is not None else run.stats[model.spec.name]

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def run(self, chunk: list[Record | RecordError]) -> None:
        run, model = self.run_, self.model
        # Composite metrics start from the extractor's prompt, whichever model this pass runs.
        plans = [
            (e, m, run.messages(e, m, run.extractor if isinstance(m, CompositeMetric) and run.extractor else model))
            for e in chunk
            if isinstance(e, Record)
            for m in run.metrics
        ]
        plans = [(r, m, msgs) for r, m, msgs in plans if not isinstance(msgs, RecordError)]
        extractions = {
            (r.id, m.name): run.extraction_request(r, m, msgs)  # type: ignore[arg-type]
            for r, m, msgs in plans
            if isinstance(m, CompositeMetric)
        }
        if extractions and run.extractor is not None:
            if run.extractor is model:
                found = self.fetch(list(extractions.values()))
                by_key = {model.store_key(q, run.seed): found[q.key] for q in extractions.values()}
            else:
                by_key = self.store.get_many(run.extractor.store_key(q, run.seed) for q in extractions.values())
        else:
            by_key = {}
        first: list[_Request] = []
        rest: dict[Key, _Request] = {}
        context: dict[Key, tuple[Record, Metric, list[str] | None]] = {}
        for r, m, msgs in plans:
            statements: list[str] | str | None = None
            if isinstance(m, CompositeMetric):
                statements = run.statements(r, m, msgs, by_key)  # type: ignore[arg-type]
                if isinstance(statements, str) or not statements:
                    continue
            reqs = run.judge_requests(model, r, m, statements)  # type: ignore[arg-type]
            first.append(reqs[0])
            if len(reqs) > 1:
                rest[reqs[0].key] = reqs[1]
            context[reqs[0].key] = (r, m, statements if isinstance(statements, list) else None)
        outputs = self.fetch(first)
        if rest:
            more = []
            for key, req in rest.items():
                record, metric, statements = context[key]
                if not run.unanimous(record, metric, statements, outputs[key]):
                    more.append(req)
            self.fetch(more)

    def fetch(self, requests: list[_Request]) -> dict[Key, Stored]:
        """Each request's samples: from the store, or generated now and stored."""
        run, model = self.run_, self.model
        keys = [model.store_key(q, run.seed) for q in requests]
        found = {} if run.fresh else self.store.get_many(keys)
        out: dict[Key, Stored] = {}
        missing: list[tuple[_Request, str]] = []
        for q, key in zip(requests, keys, strict=True):
            if key in found:
                out[q.key] = found[key]
                stored = found[key]
                if not isinstance(stored, str):
                    self.st.cached += len(stored)
            else:
                missing.append((q, key))
        if missing:
            new = self.generate([q for q, _ in missing])
            self.store.put_many({key: new[q.key] for q, key in missing})
            out.update(new)
        return out

    def generate(self, requests: list[_Request]) -> dict[Key, Stored]:
        """Run requests in as few engine calls as possible: one per distinct (n, first
        sample, schema, token budget, temperature). Prompts over the model's context come
        back as an error string. Identical prompts of a call are generated once."""
        spec = self.model.spec
        if self.engine is None:
            t = time.perf_counter()
            self.engine = self.run_.factory(spec)
            self.st.load_seconds += time.perf_counter() - t
        engine = self.engine
        prompts = [engine.format_prompt(r.messages) for r in requests]
        lengths = engine.count_tokens(prompts)
        results: dict[Key, Stored] = {}
        groups: dict[tuple[int, int, str, int, float], list[tuple[_Request, str]]] = {}
        for req, prompt, length in zip(requests, prompts, lengths, strict=True):
            if length + req.max_tokens > spec.context_length:
                results[req.key] = (
                    f"prompt is {length} tokens; with max_tokens {req.max_tokens} it exceeds "
                    f"context_length {spec.context_length} of model {spec.name!r}"
                )
                continue
            group = (req.n, req.first_sample, repr(sorted(req.schema.items())), req.max_tokens, req.temperature)
            groups.setdefault(group, []).append((req, prompt))
        for (n, first_sample, _, budget, temp), members in groups.items():
            unique = list(dict.fromkeys(p for _, p in members))
            sampling = Sampling(
                temperature=temp,
                top_p=self.model.top_p,
                max_tokens=budget,
                seed=self.run_.seed,
                first_sample=first_sample,
            )
            t = time.perf_counter()
            outputs = engine.generate(unique, n=n, sampling=sampling, schema=members[0][0].schema)
            self.st.generate_seconds += time.perf_counter() - t
            by_prompt = dict(zip(unique, outputs, strict=True))
            for req, prompt in members:
                results[req.key] = by_prompt[prompt]
            for samples in outputs:
                self.st.generated += len(samples)
                self.st.output_tokens += sum(c.n_tokens for c in samples)
        return results


class _MemoryStore:
    """Generations in memory: a replica's judgment store for one shard, holding what the
    driver found for it and collecting what the replica generates."""

    def __init__(self, known: Mapping[str, Stored] | None = None) -> None:
        self.known: dict[str, Stored] = dict(known or {})
        self.new: dict[str, Stored] = {}

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        return {k: self.known[k] for k in keys if k in self.known}

    def put_many(self, items: Mapping[str, Stored]) -> None:
        self.known.update(items)
        self.new.update(items)


class _Lookups:
    """The judgment store seen by a dry pass: reads go through and are remembered; nothing
    is written."""

    def __init__(self, store: GenerationStore) -> None:
        self.store = store
        self.found: dict[str, Stored] = {}

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        found = self.store.get_many(keys)
        self.found.update(found)
        return found

    def put_many(self, items: Mapping[str, Stored]) -> None:
        pass


_NOT_GENERATED = "not generated in the dry pass"


class _Probe(_Worker):
    """A dry pass of one model over one shard, on the driver of a sharded run: the same
    requests as a real pass, looked up in the store and never generated. ``missing`` counts
    the requests the store lacks (a request that depends on one of them, such as the
    verification of statements not extracted yet, is not reached: the replica finds it);
    ``found`` is what the replica will need from the store."""

    def __init__(self, run: _Run, model: _Model) -> None:
        self.lookups = _Lookups(run.store)
        super().__init__(run, model, store=self.lookups, stats=_ModelStats(model.spec))
        self.missing = 0

    @property
    def found(self) -> dict[str, Stored]:
        return self.lookups.found

    def generate(self, requests: list[_Request]) -> dict[Key, Stored]:
        self.missing += len(requests)
        return {q.key: _NOT_GENERATED for q in requests}


class _ShardWorker:
    """What a replica of a sharded run holds: the run's settings and one model's loaded
    engine; it runs the local pass on each shard it is given.

    Raises:
        EngineError: The replica's copy of the model is not the driver's (other files), or
            the engine fails to load.
    """

    def __init__(self, run: _Run, name: str) -> None:
        model = next(m for m in run.models if m.spec.name == name)
        self.run_ = run
        self.model = model
        if not model.identity.startswith("unhashed:"):
            from localjury.manifest import model_identity

            here = model_identity(model.spec)
            if here != model.identity:
                raise EngineError(
                    f"this replica's model files at {model.spec.local_dir()} hash to {here[:12]}, the driver's to "
                    f"{model.identity[:12]}: every node must hold the same weights",
                    engine=model.spec.engine,
                    model=model.spec.name,
                )
        self.stats = _ModelStats(model.spec)
        self.worker = _Worker(run, model, store=_MemoryStore(), stats=self.stats)
        started = time.perf_counter()
        self.worker.engine = run.factory(model.spec)
        self.load_seconds = time.perf_counter() - started

    def __call__(self, shard: tuple[list[Record], dict[str, Stored]]) -> tuple[dict[str, Stored], _ModelStats]:
        records, known = shard
        store = _MemoryStore(known)
        self.worker.store = store
        self.worker.st = self.stats = _ModelStats(self.model.spec, load_seconds=self.load_seconds)
        self.load_seconds = 0.0  # counted once, with this replica's first shard
        self.worker.run(list(records))
        return store.new, self.stats


def evaluate(
    records: str | Path | Iterable[Record | Mapping[str, Any]],
    metrics: Sequence[Metric],
    models: Sequence[str | ModelSpec] | None = None,
    *,
    seed: int = 0,
    strictness: int | None = None,
    tie_break: TieBreak | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    extractor: str | None = None,
    adaptive: bool = False,
    engine: str | None = None,
    registry: str | Path | None = None,
    strict_input: bool = False,
    cache: str | Path | None = None,
    use_cache: bool = True,
    fresh: bool = False,
    on_overflow: OverflowPolicy = "error",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    out: str | Path | None = None,
    summary: str | Path | None = None,
    inputs: Mapping[str, str | Path] | None = None,
    command: list[str] | None = None,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    cluster: RayCluster | None = None,
) -> RunResult:
    """Judge every record on every metric with every model, and vote.

    Args:
        records: A dataset path (JSONL, JSON, CSV, Parquet) or records as dicts/``Record``.
        metrics: What to judge, e.g. ``[AspectCritic("dated", "The response includes a year."),
            Faithfulness()]``.
        models: Judge model names from models.yaml (or specs); default ``smollm2-135m-instruct``.
        seed: Run seed; the same inputs and seed give identical results.
        strictness: Override every metric's strictness (samples per model).
        tie_break: Override every metric's tie-break policy.
        temperature: Override the models' sampling temperature.
        max_tokens: Override the models' output token budget.
        extractor: The jury model that extracts statements for composite metrics (default:
            the first model); every model then judges those same statements.
        adaptive: Adaptive strictness: draw k // 2 + 1 samples first and the rest only where
            those are not unanimous (on every statement, for composites); the verdicts follow
            the same majority rule as full sampling. Saves samples for k >= 3.
        engine: Run every model on this engine (``vllm`` or ``transformers``) instead of the
            one its models.yaml entry names (``auto`` by default: vLLM where a CUDA device and
            vLLM are present, else transformers).
        registry: The models.yaml to read (default: see :mod:`localjury.registry`).
        strict_input: Raise the first bad record's error instead of reporting it per record.
        cache: The judgment store (default ``$LOCALJURY_CACHE``, else
            ``$LOCALJURY_HOME/cache/judgments.sqlite``):
            what is in it is not generated again, which is also how a killed run resumes.
        use_cache: False: use a fresh, temporary store for this run only.
        fresh: Generate everything again (replacing what the store holds for these prompts).
        on_overflow: A prompt longer than a model's context: ``"error"`` (that model's
            judgment of the record is an error) or ``"truncate"`` (cut the retrieved contexts,
            marking each cut, until it fits; still too long -> error).
        chunk_size: Records per chunk (one engine call and one store commit per chunk).
        out: Stream the results to this JSONL file with its summary and manifest beside it,
            and keep none in memory. The three files are written to temporary files and
            renamed into place together at the end (the manifest, which holds the others'
            SHA-256, last), so they are whole and belong together. Checked before any model
            loads: an output path that is a folder, cannot be written, or resolves to an
            input (the dataset, the judgment store, models.yaml, a model's files, ``inputs``)
            or to another output is refused.
        summary: The summary JSON (default: ``<out stem>.summary.json``); only with ``out``.
        inputs: Other files the run depends on (e.g. a criteria file), by what they are:
            no output may overwrite them.
        command: The command line, for the manifest.
        progress: A rich ``Progress`` to show each model's pass in.
        engine_factory: Build an engine from a spec (default: the registry's engine).
        cluster: Shard each model's pass over a pool of engine replicas on Ray (needs the
            ``ray`` extra); the results, store and files are those of a local run. See
            :class:`localjury.RayCluster`.

    Returns:
        The results, one per (record, metric) in input order, and the run summary.

    Raises:
        ConfigError: No metric, duplicate names, unknown model, invalid settings.
        ModelNotAvailableError: A model's weights are not on this machine (before any loads).
        RecordError: With ``strict_input``, the first bad record.
        KeyboardInterrupt, or any error after generation started: re-raised with a note
            (``exc.__notes__``) saying how many judgments the store kept and where.
        MissingDependencyError: ``cluster`` without Ray installed, or an engine's packages.
        EngineError: A model failed to load or generate (on a replica, too).
    """
    settings = dict(locals())  # every argument but the cluster goes on to _evaluate as it is
    del settings["cluster"]
    session: RaySession | None = None
    if cluster is not None:
        from localjury._ray import RaySession

        session = RaySession(cluster)
    try:
        return _evaluate(**settings, session=session)
    finally:
        if session is not None:
            session.close()


def _evaluate(
    records: str | Path | Iterable[Record | Mapping[str, Any]],
    metrics: Sequence[Metric],
    models: Sequence[str | ModelSpec] | None,
    *,
    seed: int,
    strictness: int | None,
    tie_break: TieBreak | None,
    temperature: float | None,
    max_tokens: int | None,
    extractor: str | None,
    adaptive: bool,
    engine: str | None,
    registry: str | Path | None,
    strict_input: bool,
    cache: str | Path | None,
    use_cache: bool,
    fresh: bool,
    on_overflow: OverflowPolicy,
    chunk_size: int,
    out: str | Path | None,
    summary: str | Path | None,
    inputs: Mapping[str, str | Path] | None,
    command: list[str] | None,
    progress: Progress | None,
    engine_factory: EngineFactory | None,
    session: RaySession | None,
) -> RunResult:
    started = time.perf_counter()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    _check_settings(metrics, strictness, tie_break, temperature, max_tokens, chunk_size, on_overflow)
    ks = {m.name: strictness or m.strictness for m in metrics}
    ties = {m.name: tie_break or m.tie_break for m in metrics}

    specs = _resolve_models(models, registry)
    resolve = session.resolve_engine if session is not None else resolve_engine
    specs = [spec.model_copy(update={"engine": resolve(spec, engine)}) for spec in specs]
    for spec in specs:
        temp = spec.temperature if temperature is None else temperature
        if temp <= 0 and max(ks.values()) > 1:
            raise ConfigError(
                f"model {spec.name!r} samples at temperature {temp}: strictness above 1 needs a temperature "
                "above 0 (set --temperature or temperature in models.yaml)"
            )
    if extractor is not None and extractor not in [s.name for s in specs]:
        raise ConfigError(
            f"extractor {extractor!r} is not in the jury; expected one of: {', '.join(s.name for s in specs)}"
        )
    factory = engine_factory or load_engine
    if engine_factory is None:
        for spec in specs:
            spec.require_files(spec.engine)  # fail before loading anything, naming the fix

    cache_path = (Path(cache) if cache is not None else default_cache_path()) if use_cache else None
    dataset = _Dataset(records)
    outputs = _output_paths(out, summary)
    if outputs:
        protected: dict[str, Path | None] = {
            "dataset": dataset.path,
            "judgment store": cache_path,
            **{
                f"judgment store's {suffix} file": Path(f"{cache_path}-{suffix}") if cache_path else None
                for suffix in ("wal", "shm", "journal")
            },
            "models.yaml": registry_path(registry),
            "file-hash memo": localjury_home() / "file-hashes.json",
            **{f"folder of model {spec.name!r}": spec.local_dir() for spec in specs},
            **{what: Path(p) for what, p in (inputs or {}).items()},
        }
        check_outputs(outputs, protected)
    # Hashed before it is read, and checked again at the end: the manifest describes the
    # data the run judged, or the run fails.
    dataset_before = dataset_record(dataset.path) if dataset.path is not None and dataset.path.is_file() else None

    total = good = 0
    for entry in dataset.entries():  # a cheap first pass: count, and check strict input
        if isinstance(entry, RecordError) and strict_input:
            raise entry
        total += 1
        good += isinstance(entry, Record)

    manifests = [model_record(spec) for spec in specs]
    jury = [
        _Model(
            spec=spec,
            identity=rec.sha256 or f"unhashed:{spec.name}:{rec.path}",
            temperature=spec.temperature if temperature is None else temperature,
            top_p=spec.top_p,
            max_tokens=spec.max_tokens if max_tokens is None else max_tokens,
            neutralise=Neutraliser(tokenizer_markers(spec.tokenizer_dir())),
        )
        for spec, rec in zip(specs, manifests, strict=True)
    ]
    has_composite = any(isinstance(m, CompositeMetric) for m in metrics)
    extractor_model = next((m for m in jury if m.spec.name == (extractor or specs[0].name)), None)
    extractor_model = extractor_model if has_composite else None

    tmpdir = None if cache_path is not None else Path(tempfile.mkdtemp(prefix="localjury-"))
    store_path = cache_path or Path(tmpdir or ".") / "judgments.sqlite"
    try:
        store = JudgmentStore(store_path)
    except BaseException:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    run = _Run(
        metrics,
        jury,
        extractor_model,
        store,
        ks=ks,
        ties=ties,
        seed=seed,
        adaptive=adaptive,
        fresh=fresh,
        on_overflow=on_overflow,
        factory=factory,
        progress=progress,
        cluster=session,
    )
    failed = True
    try:
        with Staging() as staging:
            if good:  # nothing to judge (empty dataset, or every record bad): load no model
                # The extractor runs first: every model judges the statements it extracted.
                for model in sorted(jury, key=lambda m: m is not extractor_model):
                    run.model_pass(model, dataset, chunk_size, total)
            results_file = staging.file(outputs["results file"]) if outputs else None
            results, summary_acc = _assemble_all(run, dataset, chunk_size, results_file)
            if dataset_before is not None and dataset_record(Path(dataset_before["path"])) != dataset_before:
                raise ConfigError(
                    f"the dataset {dataset.path} changed while this run read it; nothing was written. "
                    "Run again once it no longer changes (what was judged is in the judgment store)"
                )
            run_summary = _summarize(
                summary_acc,
                total,
                total - good,
                metrics,
                ks,
                ties,
                list(run.stats.values()),
                seed=seed,
                temperature=temperature,
                max_tokens=max_tokens,
                extractor=extractor_model.spec.name if extractor_model else None,
                dataset=str(records) if isinstance(records, str | Path) else None,
                started_at=started_at,
                seconds=time.perf_counter() - started,
            )
            manifest = build_manifest(
                command=command,
                dataset=dataset_before,
                seed=seed,
                settings={
                    "strictness": strictness,
                    "tie_break": tie_break,
                    "temperature": temperature,
                    "max_tokens": max_tokens,
                    "adaptive": adaptive,
                    "extractor": run_summary.extractor,
                    "chunk_size": chunk_size,
                    "on_overflow": on_overflow,
                    "engine": engine,
                    "cluster": None if session is None else {"backend": "ray", **asdict(session.cluster)},
                },
                metrics=[
                    {
                        "name": m.name,
                        "kind": "composite" if isinstance(m, CompositeMetric) else "judge",
                        "description": m.description,
                        "strictness": ks[m.name],
                        "tie_break": ties[m.name],
                    }
                    for m in metrics
                ],
                models=manifests,
                cache=str(store_path) if use_cache else None,
            )
            result = RunResult(results=results, summary=run_summary, manifest=manifest)
            if results_file is not None:
                result.manifest = _commit(staging, results_file, run_summary, manifest, outputs)
                result.results_path = results_file.path
        failed = False
        return result
    except BaseException as exc:
        exc.add_note(_kept_note(run, store_path, temporary=tmpdir is not None))
        raise
    finally:
        store.close()
        if tmpdir is not None and not (failed and any(st.generated for st in run.stats.values())):
            shutil.rmtree(tmpdir, ignore_errors=True)


def _output_paths(out: str | Path | None, summary: str | Path | None) -> dict[str, Path]:
    """What a run with ``out`` writes: the results, summary and manifest files."""
    if out is None:
        return {}
    results = Path(out)
    return {
        "results file": results,
        "summary": Path(summary) if summary is not None else summary_path_for(results),
        "manifest": manifest_path_for(results),
    }


def _commit(
    staging: Staging, results: StagedFile, summary: Summary, manifest: Manifest, outputs: Mapping[str, Path]
) -> Manifest:
    """Write the summary and the manifest (with the SHA-256 of the results and the summary)
    beside the staged results, and rename all three into place."""
    results.close()
    summary_file = staging.file(outputs["summary"], summary.model_dump_json(indent=2) + "\n")
    where = outputs["manifest"]
    manifest = manifest.model_copy(
        update={"results": output_record(results, where), "summary": output_record(summary_file, where)}
    )
    staging.file(outputs["manifest"], manifest.model_dump_json(indent=2) + "\n")
    staging.commit()
    return manifest


def _kept_note(run: _Run, store: Path, *, temporary: bool) -> str:
    """What a failed or interrupted run leaves for the next one."""
    generated = sum(st.generated for st in run.stats.values())
    if not generated:
        return "no judgment was generated before this; no results file was written"
    if temporary:
        return (
            f"the {generated} judgments generated before this are kept in the temporary store {store}; "
            "use it as the judgment store of the same run to resume without generating them again"
        )
    return (
        f"the {generated} judgments generated before this are kept in the judgment store {store}; "
        "the same command resumes from there without generating them again"
    )


@dataclass
class _MetricAcc:
    records: int = 0
    scored: int = 0
    total: float = 0.0
    passed: int = 0


def _assemble_all(
    run: _Run, dataset: _Dataset, chunk_size: int, out: StagedFile | None
) -> tuple[list[RecordResult], dict[str, _MetricAcc]]:
    """Assemble every chunk's results; stream them to ``out`` (a staged file, renamed into
    place with the summary and manifest) or keep them in memory."""
    acc = {m.name: _MetricAcc() for m in run.metrics}
    kept: list[RecordResult] = []
    for chunk in dataset.chunks(chunk_size):
        for r in run.assemble(chunk):
            a = acc[r.metric]
            if r.error is None:
                a.records += 1
                if r.score is not None:
                    a.scored += 1
                    a.total += r.score
                    a.passed += bool(passes(r.score))
            if out is not None:
                out.write(r.model_dump_json() + "\n")
            else:
                kept.append(r)
    return kept, acc


def _summarize(
    acc: dict[str, _MetricAcc],
    total: int,
    errors: int,
    metrics: Sequence[Metric],
    ks: dict[str, int],
    ties: dict[str, TieBreak],
    stats: list[_ModelStats],
    *,
    seed: int,
    temperature: float | None,
    max_tokens: int | None,
    extractor: str | None,
    dataset: str | None,
    started_at: str,
    seconds: float,
) -> Summary:
    metric_summaries = []
    for m in metrics:
        a = acc[m.name]
        metric_summaries.append(
            MetricSummary(
                metric=m.name,
                kind="composite" if isinstance(m, CompositeMetric) else "judge",
                definition=m.description,
                strictness=ks[m.name],
                tie_break=ties[m.name],
                records=a.records,
                scored=a.scored,
                mean_score=a.total / a.scored if a.scored else None,
                pass_rate=a.passed / a.scored if a.scored else None,
            )
        )
    model_summaries = [
        ModelSummary(
            model=st.spec.name,
            path=str(st.spec.local_dir()),
            engine=st.spec.engine,
            judgments=st.used,
            cached=st.cached,
            abstentions=st.abstentions,
            abstained_verdicts=st.unscored,
            pass_rate=st.passes / st.decided if st.decided else None,
            load_seconds=round(st.load_seconds, 3),
            generate_seconds=round(st.generate_seconds, 3),
            judgments_per_second=st.generated / st.generate_seconds if st.generate_seconds else None,
            output_tokens=st.output_tokens,
            output_tokens_per_second=st.output_tokens / st.generate_seconds if st.generate_seconds else None,
            samples_saved=st.saved,
            replicas=st.replicas,
            lost_records=st.lost_records,
        )
        for st in stats
    ]
    return Summary(
        localjury_version=__version__,
        dataset=dataset,
        records=total,
        record_errors=errors,
        seed=seed,
        temperature=temperature,
        max_tokens=max_tokens,
        metrics=metric_summaries,
        models=model_summaries,
        extractor=extractor,
        started_at=started_at,
        seconds=round(seconds, 3),
    )
