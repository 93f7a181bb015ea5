"""dry_run(): plan a run without running it, and estimate its time from a short sample.

The plan is the run's own: every model passes over the records chunk by chunk as in
:func:`~localjury.run.pipeline.evaluate`, builds the same requests (:func:`~localjury.run.plan.plan_chunk`)
and looks each one up in the judgment store, as the dry pass of a sharded run does
(:class:`~localjury.run.generate.Probe`); what the store lacks is counted, its prompts
formatted and counted with the model's tokenizer, and never generated. Requests that depend
on a generation the store does not hold yet (a composite metric's verification waits on its
statement extraction; under adaptive strictness, the remaining samples wait on the first) are
counted apart, not guessed.

The estimate then loads each model that has work left and generates the first few prompts
the run would generate (``estimate`` of them), through the run's own model pass: the same
requests, engine calls and store keys. What it generated stays in the judgment store, so the
run that follows does not generate it again; no results, summary or manifest file is written.
A warm-up call first pays the one-time costs; then the first prompt alone and the others
together give two engine batches of different sizes, from which the time of the run's
batches is extrapolated (see :mod:`localjury.run.estimate`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury.engines import load_engine, load_tokenizer
from localjury.engines.base import Engine, PromptTokens
from localjury.errors import ConfigError, RecordError
from localjury.metrics.base import Metric
from localjury.metrics.checklist import checklist_metrics
from localjury.metrics.judging import Key, Request
from localjury.models.registry import ModelSpec
from localjury.records.readers import Dataset
from localjury.records.record import Record
from localjury.results.manifest import model_record
from localjury.results.summary import ModelEstimate, ModelPlan, RunPlan
from localjury.run.config import RunConfig
from localjury.run.context import Run
from localjury.run.estimate import Measured, measure
from localjury.run.generate import NOT_GENERATED, Probe
from localjury.run.jury import jury_models
from localjury.run.pipeline import jury_order
from localjury.run.plan import Planned
from localjury.run.prepare import count_records, prepare
from localjury.run.state import EngineFactory, JuryModel
from localjury.store import JudgmentStore, Stored

if TYPE_CHECKING:
    from rich.progress import Progress

#: Prompts per model that the estimate generates, by default.
DEFAULT_ESTIMATE_PROMPTS = 4

TokenizerFactory = Callable[[ModelSpec], "PromptTokens | Engine"]


def dry_run(
    records: str | Path | Iterable[Any],
    metrics: Sequence[Metric],
    models: Sequence[str | ModelSpec] | None = None,
    *,
    config: RunConfig | None = None,
    estimate: int = DEFAULT_ESTIMATE_PROMPTS,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    tokenizer_factory: TokenizerFactory | None = None,
    **settings: Any,
) -> RunPlan:
    """Plan the run :func:`~localjury.evaluate` would make with the same arguments, per model:
    the records, prompts and samples (judgments) it would generate, their prompt tokens, and
    the samples already in the judgment store; then estimate its time from a short sample.

    ``records``, ``metrics``, ``models``, ``config`` and ``settings`` are as for
    :func:`~localjury.evaluate` (``cluster`` excepted: a dry run plans a run on this machine).

    Args:
        estimate: Prompts per model to generate and time (the first ones the run would
            generate; each draws its k samples); 0 loads no model and estimates nothing.
            What they generate is kept in the judgment store, under the keys the run uses.
        progress: A rich ``Progress`` to show each model's planning pass in.
        engine_factory: Build an engine from a spec, for the estimate (default: the
            registry's engine).
        tokenizer_factory: What counts a model's prompt tokens (default: its tokenizer
            alone, :func:`localjury.engines.load_tokenizer`; with ``engine_factory`` and no
            ``tokenizer_factory``, the engine it builds).

    Returns:
        The plan: per model its counts and, with ``estimate``, the measured sample and the
        estimated seconds of the run that follows.

    Raises:
        ConfigError: As :func:`~localjury.evaluate`; a ``cluster``; ``estimate`` below 0.
        ModelNotAvailableError, RecordError, MissingDependencyError, EngineError: As
            :func:`~localjury.evaluate` (the tokenizer, or for the estimate the model).
    """
    if models is not None:
        settings["models"] = models
    config = (config or RunConfig()).replace(**settings)
    metrics = checklist_metrics(metrics, config.sampling.checklist)
    if config.cluster is not None:
        raise ConfigError("a dry run plans a run on this machine; give it without a Ray `cluster`")
    if estimate < 0:
        raise ConfigError(f"estimate must be 0 or more prompts per model, got {estimate}")
    specs, dataset, judgings = prepare(records, metrics, config, None, engine_factory)
    total, good = count_records(dataset, config)
    jury, extractor = jury_models(specs, [model_record(spec) for spec in specs], judgings, config)
    counter = tokenizer_factory or engine_factory or load_tokenizer
    store_path = config.store.path()
    plan = _new_plan(records, total, good, store_path, estimate)
    store = _open_store(store_path, estimate)
    try:
        run = Run(config, judgings, jury, extractor, store, engine_factory or load_engine)
        _plan_models(plan, run, dataset, total, good, counter, progress)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()
    if estimate:
        plan.seconds = round(sum(m.estimate.seconds for m in plan.models if m.estimate is not None), 3)
    return plan


def _new_plan(
    records: str | Path | Iterable[Any], total: int, good: int, store_path: Path | None, estimate: int
) -> RunPlan:
    """The plan's counts of the dataset, before any model is planned."""
    return RunPlan(
        dataset=str(records) if isinstance(records, str | Path) else None,
        records=total,
        record_errors=total - good,
        store=str(store_path) if store_path is not None else None,
        estimate_prompts=estimate,
        kept=estimate > 0 and store_path is not None,
        models=[],
    )


def _open_store(store_path: Path | None, estimate: int) -> Any:
    """The judgment store the dry run reads (and its estimate writes to)."""
    # A store that does not exist yet holds nothing; the dry run creates it only to keep what
    # its estimate generates.
    if estimate == 0 and (store_path is None or not store_path.exists()):
        return _Empty()
    return JudgmentStore(store_path) if store_path is not None else _Empty()


def _plan_models(
    plan: RunPlan,
    run: Run,
    dataset: Dataset,
    total: int,
    good: int,
    counter: TokenizerFactory,
    progress: Progress | None,
) -> None:
    """Plan every model's pass, then generate and time each one's sample (``plan.estimate_prompts``
    prompts), adding each model's plan to ``plan.models``."""
    ordered = jury_order(run)
    planners = {m.spec.name: _Planner(run, m, counter, plan.estimate_prompts) for m in ordered}
    if good:
        # Every model is planned before any generates, so that the counts all describe the
        # store as the dry run found it.
        for model in ordered:
            _plan_pass(planners[model.spec.name], dataset, total, progress)
    for model in ordered:
        planner = planners[model.spec.name]
        measured = measure(run, model, planner.sample, progress) if planner.sample else None
        plan.models.append(planner.summary(measured, kept=plan.kept))


class _Empty:
    """The judgment store of a dry run with none on disk: it holds nothing."""

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        return {}

    def put_many(self, items: Mapping[str, Stored]) -> None:
        pass


class _Planner(Probe):
    """One model's dry pass over the whole dataset, counting what the run would generate."""

    def __init__(self, run: Run, model: JuryModel, counter: TokenizerFactory, estimate: int) -> None:
        super().__init__(run, model)
        self.make_counter = counter
        self.counter: PromptTokens | Engine | None = None
        self.estimate = estimate
        self.records = self.prompts = self.judgments = self.prompt_tokens = self.over_context = 0
        self.adaptive_more = 0
        self.awaiting = 0
        self.sample: list[Request] = []
        self._ids: set[str] = set()

    def run(self, chunk: list[Record | RecordError]) -> None:
        self._ids = set()
        super().run(chunk)
        self.records += len(self._ids)

    def fetch(self, requests: list[Request]) -> dict[Key, Stored]:
        self._ids.update(q.key[0] for q in requests)
        return super().fetch(requests)

    def first_steps(self, requests: list[Request]) -> Mapping[str, Stored]:
        found = super().first_steps(requests)
        extractor = self.run_.extractor
        assert extractor is not None
        for q in requests:
            stored = found.get(extractor.store_key(q, self.run_.seed))
            if stored is None or stored == NOT_GENERATED:
                self.awaiting += 1  # its verification is planned once the extraction is stored
        return found

    def undecided(self, rest: list[tuple[Request, Planned]], outputs: Mapping[Key, Stored]) -> list[Request]:
        self.adaptive_more += sum(req.n for req, _ in rest if outputs[req.key] == NOT_GENERATED)
        return super().undecided(rest, outputs)

    def generate(self, requests: list[Request], results: dict[Key, Stored] | None = None) -> dict[Key, Stored]:
        if self.counter is None:
            self.counter = self.make_counter(self.model.spec)
        run, spec = self.run_, self.model.spec
        distinct = list({self.model.store_key(q, run.seed): q for q in requests}.values())
        texts = [self.counter.format_prompt(q.messages) for q in distinct]
        for q, length in zip(distinct, self.counter.count_tokens(texts), strict=True):
            if length + q.max_tokens > spec.context_length:
                self.over_context += 1  # the run stores an error for it, and generates nothing
                continue
            self.prompts += 1
            self.judgments += q.n
            self.prompt_tokens += length
            if len(self.sample) < self.estimate:
                self.sample.append(q)
        return super().generate(requests, results)

    def close(self) -> None:
        if self.counter is not None:
            self.counter.close()
            self.counter = None

    def summary(self, measured: Measured | None, *, kept: bool) -> ModelPlan:
        """The model's plan; with ``measured`` (its sample), the estimate of its part of the run
        that follows (``kept``: the sample is in the judgment store by then)."""
        estimate = None
        if measured is not None and measured.whole.generated and measured.whole.generate_seconds > 0:
            whole = measured.whole
            fixed, per_prompt = measured.batch_costs()
            left = max(0, self.prompts - (len(self.sample) if kept else 0))
            seconds = measured.run_seconds(left, self.model.spec.batch_size)
            estimate = ModelEstimate(
                prompts=len(self.sample),
                judgments=whole.generated,
                load_seconds=round(whole.load_seconds, 3),
                warmup_seconds=round(measured.warmup_seconds, 3),
                generate_seconds=round(whole.generate_seconds, 3),
                judgments_per_second=whole.generated / whole.generate_seconds,
                output_tokens_per_judgment=whole.output_tokens / whole.generated,
                batch_seconds=round(fixed, 3),
                prompt_seconds=round(per_prompt, 3),
                seconds=round(seconds, 3),
            )
        return ModelPlan(
            model=self.model.spec.name,
            engine=self.model.spec.engine,
            records=self.records,
            prompts=self.prompts,
            judgments=self.judgments,
            cached=self.st.cached,
            prompt_tokens=self.prompt_tokens,
            over_context=self.over_context,
            awaiting_extraction=self.awaiting,
            adaptive_more=self.adaptive_more,
            estimate=estimate,
        )


def _plan_pass(planner: _Planner, dataset: Dataset, total: int, progress: Progress | None) -> None:
    name = planner.model.spec.name
    task = progress.add_task(f"{name}: planning", total=total) if progress is not None else None
    try:
        for chunk in dataset.chunks(planner.run_.config.input.chunk_size):
            planner.run(chunk)
            if progress is not None and task is not None:
                progress.advance(task, len(chunk))
    finally:
        planner.close()
        if progress is not None and task is not None:
            progress.update(task, description=f"{name}: planned")
