"""dry_run(): plan a run without running it, and estimate its time from a short sample.

The plan is the run's own passes (:func:`~localjury.run.pipeline.run_passes`: the statement
extraction, then one pass per model over the records chunk by chunk, each chunk planned as the
run plans it) with an engine that answers nothing (:class:`~localjury.run.generate.DryCalls`:
it formats and counts the prompts with the model's tokenizer) and a store that reads through and
writes nothing (:class:`~localjury.run.generate.ReadOnly`), as the probe of each shard of a
sharded run does. What the store holds is counted as cached, what it lacks as prompts to
generate; none is generated. Requests that depend on a generation the store does not hold yet
(a composite metric's verification waits on its statement extraction; under adaptive
strictness, the remaining samples wait on the first) are counted apart, not guessed.

The estimate then loads each model that has work left and generates the first few prompts
the run would generate (``estimate`` of them), through the run's own model pass: the same
requests, engine calls and store keys. What it generated stays in the judgment store, so the
run that follows does not generate it again; no results, summary or manifest file is written.
A warm-up call first pays the one-time costs; then the first prompt alone and the others
together give two engine batches of different sizes, from which the time of the run's
batches is extrapolated (see :mod:`localjury.run.estimate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury.engines import load_tokenizer
from localjury.errors import ConfigError
from localjury.metrics.base import Metric
from localjury.models.registry import ModelSpec
from localjury.records.readers import Dataset
from localjury.results.summary import ModelEstimate, ModelPlan, RunPlan
from localjury.run.config import RunConfig
from localjury.run.context import EngineFactory, ModelCounts, RunContext
from localjury.run.estimate import Measured, measure
from localjury.run.generate import DryCalls, ReadOnly, TokenizerFactory
from localjury.run.pipeline import run_passes
from localjury.run.prepare import Settled, check_store, count_records, prepare, protected_files, settle
from localjury.store import GenerationStore, JudgmentStore, Stored

if TYPE_CHECKING:
    from rich.progress import Progress


def dry_run(
    records: str | Path | Iterable[Any],
    metrics: Sequence[Metric],
    models: Sequence[str | ModelSpec] | None = None,
    *,
    config: RunConfig | None = None,
    estimate: int = 0,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    tokenizer_factory: TokenizerFactory | None = None,
    **settings: Any,
) -> RunPlan:
    """Plan the run :func:`~localjury.evaluate` would make with the same arguments, per model:
    the records, prompts and samples (judgments) it would generate, their prompt tokens, and
    the samples already in the judgment store, without loading a model (the prompt tokens are
    counted with each model's tokenizer alone); with ``estimate``, then estimate its time from a
    short sample.

    ``records``, ``metrics``, ``models``, ``config`` and ``settings`` are as for
    :func:`~localjury.evaluate` (``cluster`` excepted: a dry run plans a run on this machine).

    Args:
        estimate: Prompts per model to generate and time (the first ones the run would
            generate; each draws its k samples); 0 (the default) loads no model and estimates
            nothing.
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
    settled = settle(metrics, models, config=config, **settings)
    return plan_run(records, settled, estimate=estimate, progress=progress, engine_factory=engine_factory,
                    tokenizer_factory=tokenizer_factory)  # fmt: skip


def plan_run(
    records: str | Path | Iterable[Any],
    settled: Settled,
    *,
    estimate: int = 0,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    tokenizer_factory: TokenizerFactory | None = None,
) -> RunPlan:
    """:func:`dry_run` of a run whose metrics and settings are settled (``localjury run --dry-run``
    settles them once at its entry)."""
    config = settled.config
    if config.cluster is not None:
        raise ConfigError("a dry run plans a run on this machine; give it without a Ray `cluster`")
    if estimate < 0:
        raise ConfigError(f"estimate must be 0 or more prompts per model, got {estimate}")
    checked = prepare(settled, None, engine_factory)
    store_path = config.store.path()
    check_store(protected_files(checked, records, store_path, settled.inputs))
    dataset = Dataset(records)
    total, good = count_records(dataset, config)
    jury = checked.jury
    tokenizer = tokenizer_factory or engine_factory or load_tokenizer
    plan = _new_plan(records, total, good, store_path, estimate)
    store = _open_store(store_path, estimate)
    try:
        ctx = RunContext(config, checked.judgings, jury.models, jury.extractor, store, engine_factory, progress)
        counting = {m.spec.name: DryCalls(m, ctx.seed, tokenizer, estimate) for m in ctx.models}
        if good:
            # Every model is planned before any generates, so that the counts all describe the
            # store as the dry run found it.
            run_passes(ctx, dataset, total, counting, ReadOnly(store), planning=True)
        for model in ctx.in_pass_order():
            sample = counting[model.spec.name].sample
            measured = measure(ctx, model, sample, progress) if sample else None
            plan.models.append(_model_plan(ctx.counts[model.spec.name], len(sample), measured, kept=plan.kept))
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


def _open_store(store_path: Path | None, estimate: int) -> GenerationStore:
    """The judgment store the dry run reads (and its estimate writes to)."""
    # A store that does not exist yet holds nothing; the dry run creates it only to keep what
    # its estimate generates.
    if estimate == 0 and (store_path is None or not store_path.exists()):
        return _Empty()
    return JudgmentStore(store_path) if store_path is not None else _Empty()


class _Empty:
    """The judgment store of a dry run with none on disk: it holds nothing."""

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        return {}

    def put_many(self, items: Mapping[str, Stored]) -> None:
        pass


def _model_plan(counts: ModelCounts, sampled: int, measured: Measured | None, *, kept: bool) -> ModelPlan:
    """A model's plan from what its dry passes counted; with ``measured`` (its sample of
    ``sampled`` prompts), the estimate of its part of the run that follows (``kept``: the
    sample is in the judgment store by then)."""
    estimate = None
    if measured is not None and measured.whole.generated and measured.whole.generate_seconds > 0:
        whole = measured.whole
        fixed, per_prompt = measured.batch_costs()
        left = max(0, counts.prompts - (sampled if kept else 0))
        seconds = measured.run_seconds(left, counts.spec.batch_size)
        estimate = ModelEstimate(
            prompts=sampled,
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
        model=counts.spec.name,
        engine=counts.spec.engine,
        records=counts.records,
        prompts=counts.prompts,
        judgments=counts.generated,
        cached=counts.cached,
        prompt_tokens=counts.prompt_tokens,
        over_context=counts.over_context,
        awaiting_extraction=counts.awaiting,
        adaptive_more=counts.adaptive_more,
        estimate=estimate,
    )
