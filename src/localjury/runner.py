"""Plan the batches, run each model over the whole dataset, vote, and collect results.

For each model: load -> for each strictness value, ONE engine call with every
(record, criterion) prompt and n = strictness -> free the model -> parse -> votes.
Models run one after another in this process, so a jury needs the memory of one model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury import __version__
from localjury.engines import load_engine
from localjury.engines.base import Engine, Sampling
from localjury.errors import ConfigError, RecordError
from localjury.metrics.base import Metric
from localjury.records import Record, coerce_records, dedupe, iter_records
from localjury.registry import DEFAULT_MODEL, ModelSpec, load_registry
from localjury.report import (
    InvalidSample,
    MetricSummary,
    ModelJudgment,
    ModelSummary,
    RecordResult,
    Summary,
    summary_path_for,
    write_results,
    write_summary,
)
from localjury.voting import TieBreak, check_tie_break, final_score, model_score, model_verdict, passes

if TYPE_CHECKING:
    import pandas as pd
    from rich.progress import Progress

EngineFactory = Callable[[ModelSpec], Engine]


@dataclass
class RunResult:
    """What :func:`evaluate` returns: one result per (record, criterion), and the summary."""

    results: list[RecordResult]
    summary: Summary

    def write(self, out: str | Path, summary: str | Path | None = None) -> tuple[Path, Path]:
        """Write results.jsonl and its summary JSON (default: ``<out stem>.summary.json``)."""
        out = Path(out)
        summary_file = Path(summary) if summary else summary_path_for(out)
        write_results(self.results, out)
        write_summary(self.summary, summary_file)
        return out, summary_file

    def to_pandas(self) -> pd.DataFrame:
        """One row per (record, criterion, model) with votes, verdict and scores."""
        import pandas as pd

        rows: list[dict[str, Any]] = []
        for r in self.results:
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
    judgments: int = 0
    output_tokens: int = 0
    abstentions: int = 0
    verdicts: list[int | None] = field(default_factory=list)


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


def _load_entries(
    records: str | Path | Iterable[Record | Mapping[str, Any]], strict_input: bool
) -> list[Record | RecordError]:
    raw = iter_records(records) if isinstance(records, str | Path) else coerce_records(records)
    entries: list[Record | RecordError] = []
    for entry in dedupe(raw):
        if strict_input and isinstance(entry, RecordError):
            raise entry
        entries.append(entry)
    return entries


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
    registry: str | Path | None = None,
    strict_input: bool = False,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
) -> RunResult:
    """Judge every record on every metric with every model, and vote.

    Args:
        records: A dataset path (JSONL, JSON, CSV, Parquet) or records as dicts/``Record``.
        metrics: The criteria, e.g. ``[AspectCritic("dated", "The response includes a year.")]``.
        models: Judge model names from models.yaml (or specs); default ``smollm2-135m-instruct``.
        seed: Run seed; the same inputs and seed give identical results.
        strictness: Override every metric's strictness (samples per model).
        tie_break: Override every metric's tie-break policy.
        temperature: Override the models' sampling temperature.
        max_tokens: Override the models' output token budget.
        registry: The models.yaml to read (default: see :mod:`localjury.registry`).
        strict_input: Raise the first bad record's error instead of reporting it per record.
        progress: A rich ``Progress`` to show model loading and generation in.
        engine_factory: Build an engine from a spec (default: the registry's engine).

    Returns:
        The results, one per (record, metric) in input order, and the run summary.

    Raises:
        ConfigError: No metric, duplicate names, unknown model, invalid settings.
        ModelNotAvailableError: A model's weights are not on this machine (before any loads).
        RecordError: With ``strict_input``, the first bad record.
    """
    started = time.perf_counter()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    if not metrics:
        raise ConfigError("no criterion to judge: give at least one metric (--aspect, --criterion or --criteria)")
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        raise ConfigError(f"criterion names must be unique, got: {', '.join(names)}")
    if strictness is not None and strictness < 1:
        raise ConfigError(f"strictness must be >= 1, got {strictness}")
    if tie_break is not None:
        try:
            check_tie_break(tie_break)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if max_tokens is not None and max_tokens < 1:
        raise ConfigError(f"max_tokens must be >= 1, got {max_tokens}")
    if temperature is not None and temperature < 0:
        raise ConfigError(f"temperature must be >= 0, got {temperature}")
    ks = {m.name: strictness or m.strictness for m in metrics}
    ties = {m.name: tie_break or m.tie_break for m in metrics}

    specs = _resolve_models(models, registry)
    for spec in specs:
        temp = spec.temperature if temperature is None else temperature
        if temp <= 0 and max(ks.values()) > 1:
            raise ConfigError(
                f"model {spec.name!r} samples at temperature {temp}: strictness above 1 needs a temperature "
                "above 0 (set --temperature or temperature in models.yaml)"
            )
    factory = engine_factory or load_engine
    if engine_factory is None:
        for spec in specs:
            spec.require_local_dir()  # fail before loading anything, naming the fix

    entries = _load_entries(records, strict_input)
    good = [e for e in entries if isinstance(e, Record)]
    messages = {(r.id, m.name): m.messages(r) for r in good for m in metrics}

    judgments: dict[tuple[str, str], list[ModelJudgment]] = {key: [] for key in messages}
    stats = [_ModelStats(spec) for spec in specs]
    for st in stats:
        if not messages:
            break  # nothing to judge (empty dataset, or every record bad): load no model
        spec = st.spec
        task = progress.add_task(f"loading {spec.name}", total=None) if progress else None
        t = time.perf_counter()
        engine = factory(spec)
        st.load_seconds = time.perf_counter() - t
        try:
            _run_model(
                engine,
                spec,
                metrics,
                messages,
                ks,
                ties,
                judgments,
                st,
                seed=seed,
                temperature=temperature,
                max_tokens=max_tokens,
                progress=progress,
                task=task,
            )
        finally:
            engine.close()
            del engine
            if progress is not None and task is not None:
                progress.update(task, description=f"{spec.name}: done")

    results: list[RecordResult] = []
    for entry in entries:
        for m in metrics:
            if isinstance(entry, RecordError):
                results.append(
                    RecordResult(record_id=entry.record_id, metric=m.name, score=None, error=str(entry), models=[])
                )
                continue
            per_model = judgments[(entry.id, m.name)]
            results.append(
                RecordResult(
                    record_id=entry.id,
                    metric=m.name,
                    score=final_score([j.score for j in per_model]),
                    error=None,
                    models=per_model,
                )
            )
    summary = _summarize(
        results,
        entries,
        metrics,
        ks,
        ties,
        stats,
        seed=seed,
        temperature=temperature,
        max_tokens=max_tokens,
        dataset=str(records) if isinstance(records, str | Path) else None,
        started_at=started_at,
        seconds=time.perf_counter() - started,
    )
    return RunResult(results=results, summary=summary)


def _run_model(
    engine: Engine,
    spec: ModelSpec,
    metrics: Sequence[Metric],
    messages: dict[tuple[str, str], Any],
    ks: dict[str, int],
    ties: dict[str, TieBreak],
    judgments: dict[tuple[str, str], list[ModelJudgment]],
    st: _ModelStats,
    *,
    seed: int,
    temperature: float | None,
    max_tokens: int | None,
    progress: Progress | None,
    task: Any,
) -> None:
    sampling = Sampling(
        temperature=spec.temperature if temperature is None else temperature,
        top_p=spec.top_p,
        max_tokens=spec.max_tokens if max_tokens is None else max_tokens,
        seed=seed,
    )
    by_metric = {m.name: m for m in metrics}
    keys = list(messages)
    prompts = {key: engine.format_prompt(messages[key]) for key in keys}
    lengths = dict(zip(keys, engine.count_tokens([prompts[k] for k in keys]), strict=True))
    runnable: list[tuple[str, str]] = []
    for key in keys:
        k = ks[key[1]]
        if lengths[key] + sampling.max_tokens > spec.context_length:
            reason = (
                f"prompt is {lengths[key]} tokens; with max_tokens {sampling.max_tokens} it exceeds "
                f"context_length {spec.context_length} of model {spec.name!r}"
            )
            judgments[key].append(
                ModelJudgment(
                    model=spec.name,
                    votes=[None] * k,
                    reasons=[None] * k,
                    abstentions=k,
                    verdict=None,
                    score=None,
                    error=reason,
                )
            )
            st.abstentions += k
            st.verdicts.append(None)
        else:
            runnable.append(key)
    if progress is not None and task is not None:
        progress.update(task, description=f"judging with {spec.name}", total=len(runnable), completed=0)

    # One engine call per strictness value (normally one in all), every prompt in it.
    for k in sorted({ks[key[1]] for key in runnable}):
        group = [key for key in runnable if ks[key[1]] == k]
        schema_groups: dict[str, list[tuple[str, str]]] = {}
        for key in group:
            schema_groups.setdefault(by_metric[key[1]].output_model.__qualname__, []).append(key)
        for keys_same_schema in schema_groups.values():
            schema = by_metric[keys_same_schema[0][1]].json_schema()
            t = time.perf_counter()
            outputs = engine.generate(
                [prompts[key] for key in keys_same_schema],
                n=k,
                sampling=sampling,
                schema=schema,
                progress=(lambda done: progress.advance(task, done))
                if progress is not None and task is not None
                else None,
            )
            st.generate_seconds += time.perf_counter() - t
            for key, samples in zip(keys_same_schema, outputs, strict=True):
                metric = by_metric[key[1]]
                parsed = [metric.parse(c.text, finished=c.finished) for c in samples]
                votes = [p.vote for p in parsed]
                verdict = model_verdict(votes, ties[key[1]])
                invalid = [
                    InvalidSample(sample=j, problem=p.problem or "invalid", raw=p.raw)
                    for j, p in enumerate(parsed)
                    if p.vote is None
                ]
                judgments[key].append(
                    ModelJudgment(
                        model=spec.name,
                        votes=votes,
                        reasons=[p.reason for p in parsed],
                        abstentions=len(invalid),
                        verdict=verdict,
                        score=model_score(verdict),
                        invalid=invalid,
                    )
                )
                st.judgments += len(samples)
                st.output_tokens += sum(c.n_tokens for c in samples)
                st.abstentions += len(invalid)
                st.verdicts.append(verdict)


def _summarize(
    results: list[RecordResult],
    entries: list[Record | RecordError],
    metrics: Sequence[Metric],
    ks: dict[str, int],
    ties: dict[str, TieBreak],
    stats: list[_ModelStats],
    *,
    seed: int,
    temperature: float | None,
    max_tokens: int | None,
    dataset: str | None,
    started_at: str,
    seconds: float,
) -> Summary:
    metric_summaries = []
    for m in metrics:
        rows = [r for r in results if r.metric == m.name and r.error is None]
        scores = [r.score for r in rows if r.score is not None]
        metric_summaries.append(
            MetricSummary(
                metric=m.name,
                definition=getattr(m, "definition", ""),
                strictness=ks[m.name],
                tie_break=ties[m.name],
                records=len(rows),
                scored=len(scores),
                mean_score=sum(scores) / len(scores) if scores else None,
                pass_rate=sum(1 for s in scores if passes(s)) / len(scores) if scores else None,
            )
        )
    model_summaries = []
    for st in stats:
        decided = [v for v in st.verdicts if v is not None]
        model_summaries.append(
            ModelSummary(
                model=st.spec.name,
                path=str(st.spec.local_dir()),
                engine=st.spec.engine,
                judgments=st.judgments,
                abstentions=st.abstentions,
                abstained_verdicts=sum(1 for v in st.verdicts if v is None),
                pass_rate=sum(decided) / len(decided) if decided else None,
                load_seconds=round(st.load_seconds, 3),
                generate_seconds=round(st.generate_seconds, 3),
                judgments_per_second=st.judgments / st.generate_seconds if st.generate_seconds else None,
                output_tokens=st.output_tokens,
                output_tokens_per_second=st.output_tokens / st.generate_seconds if st.generate_seconds else None,
            )
        )
    return Summary(
        localjury_version=__version__,
        dataset=dataset,
        records=len(entries),
        record_errors=sum(1 for e in entries if isinstance(e, RecordError)),
        seed=seed,
        temperature=temperature,
        max_tokens=max_tokens,
        metrics=metric_summaries,
        models=model_summaries,
        started_at=started_at,
        seconds=round(seconds, 3),
    )
