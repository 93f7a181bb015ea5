"""Plan the batches, run each model over the whole dataset, vote, and collect results.

For each model: load -> (the extractor only: ONE greedy call extracting every record's
statements for the composite metrics) -> ONE engine call with every (record, metric) judge
or verification prompt and n = strictness (one per distinct strictness, schema and token
budget) -> free the model -> parse -> votes. Models run one after another in this process,
so a jury needs the memory of one model; the extractor runs first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury import __version__
from localjury.engines import load_engine
from localjury.engines.base import Completion, Engine, Sampling
from localjury.errors import ConfigError, RecordError
from localjury.metrics.base import JudgeMetric, Message, Metric
from localjury.metrics.composite import EXTRACTION_TOKENS, TOKENS_PER_STATEMENT, CompositeMetric
from localjury.records import Record, coerce_records, dedupe, iter_records
from localjury.registry import DEFAULT_MODEL, ModelSpec, load_registry
from localjury.report import (
    InvalidSample,
    MetricSummary,
    ModelJudgment,
    ModelSummary,
    RecordResult,
    StatementJudgment,
    StatementResult,
    Summary,
    summary_path_for,
    write_results,
    write_summary,
)
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
    """Verdicts on single-step metrics (None: abstained)."""
    unscored: int = 0
    """(record, metric) pairs where the model gave no verdict or score."""
    saved: int = 0
    """Samples not drawn because the first ones were unanimous (adaptive strictness)."""


@dataclass(frozen=True)
class _Request:
    """One prompt to run with one model: n samples under a schema."""

    key: tuple[str, str]
    messages: list[Message]
    schema: dict[str, Any]
    n: int
    max_tokens: int
    temperature: float


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


def _check_settings(
    metrics: Sequence[Metric],
    strictness: int | None,
    tie_break: TieBreak | None,
    temperature: float | None,
    max_tokens: int | None,
) -> None:
    if not metrics:
        raise ConfigError("no metric to judge: give at least one (--aspect, --criterion, --criteria or --metric)")
    for m in metrics:
        if not isinstance(m, JudgeMetric | CompositeMetric):
            raise ConfigError(f"metric {m.name!r} is a {type(m).__name__}; expected a JudgeMetric or CompositeMetric")
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        raise ConfigError(f"metric names must be unique, got: {', '.join(names)}")
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


class _Plan:
    """Every (record, metric) pair of a run, the prompts it needs, and what came back."""

    def __init__(self, entries: list[Record | RecordError], metrics: Sequence[Metric]) -> None:
        self.entries = entries
        self.metrics = {m.name: m for m in metrics}
        self.records = {e.id: e for e in entries if isinstance(e, Record)}
        self.errors: dict[tuple[str, str], str] = {}
        self.judge: dict[tuple[str, str], list[Message]] = {}
        self.extract: dict[tuple[str, str], list[Message]] = {}
        self.statements: dict[tuple[str, str], list[str]] = {}
        self.judgments: dict[tuple[str, str], list[ModelJudgment]] = {}
        self.statement_votes: dict[tuple[str, str], list[list[StatementJudgment]]] = {}
        for record in self.records.values():
            for m in metrics:
                key = (record.id, m.name)
                self.judgments[key] = []
                try:
                    if isinstance(m, JudgeMetric):
                        self.judge[key] = m.messages(record)
                    elif isinstance(m, CompositeMetric):
                        m.verify_input(record, [])  # a missing context fails now, before any model loads
                        self.extract[key] = m.extract_messages(record)
                except RecordError as exc:
                    self.errors[key] = str(exc)

    def has_work(self) -> bool:
        return bool(self.judge or self.extract)

    def composite(self, key: tuple[str, str]) -> CompositeMetric:
        metric = self.metrics[key[1]]
        assert isinstance(metric, CompositeMetric)
        return metric


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
    registry: str | Path | None = None,
    strict_input: bool = False,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
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
    _check_settings(metrics, strictness, tie_break, temperature, max_tokens)
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
    has_composite = any(isinstance(m, CompositeMetric) for m in metrics)
    extractor_name = (extractor or specs[0].name) if has_composite else None
    if extractor is not None and extractor not in [s.name for s in specs]:
        raise ConfigError(
            f"extractor {extractor!r} is not in the jury; expected one of: {', '.join(s.name for s in specs)}"
        )
    factory = engine_factory or load_engine
    if engine_factory is None:
        for spec in specs:
            spec.require_local_dir()  # fail before loading anything, naming the fix

    entries = _load_entries(records, strict_input)
    plan = _Plan(entries, metrics)
    stats = [_ModelStats(spec) for spec in specs]
    # The extractor runs first: every model judges the statements it extracted.
    order = sorted(stats, key=lambda st: st.spec.name != extractor_name)
    for st in order:
        if not plan.has_work():
            break  # nothing to judge (empty dataset, or every record bad): load no model
        spec = st.spec
        task = progress.add_task(f"loading {spec.name}", total=None) if progress else None
        t = time.perf_counter()
        engine = factory(spec)
        st.load_seconds = time.perf_counter() - t
        try:
            runner = _ModelRun(
                engine, spec, st, plan, ks, ties, seed, temperature, max_tokens, adaptive, progress, task
            )
            if spec.name == extractor_name:
                runner.extract_statements()
            runner.judge()
        finally:
            engine.close()
            del engine
            if progress is not None and task is not None:
                progress.update(task, description=f"{spec.name}: done")

    jury = {spec.name: i for i, spec in enumerate(specs)}
    results = [_result(plan, entry, m, extractor_name, jury) for entry in entries for m in metrics]
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
        extractor=extractor_name,
        dataset=str(records) if isinstance(records, str | Path) else None,
        started_at=started_at,
        seconds=time.perf_counter() - started,
    )
    return RunResult(results=results, summary=summary)


def _result(
    plan: _Plan, entry: Record | RecordError, m: Metric, extractor: str | None, jury: dict[str, int]
) -> RecordResult:
    """One line of results; per-model entries in jury order (the extractor may have run first)."""
    if isinstance(entry, RecordError):
        return RecordResult(record_id=entry.record_id, metric=m.name, score=None, error=str(entry), models=[])
    key = (entry.id, m.name)
    composite = isinstance(m, CompositeMetric)
    if key in plan.errors:
        return RecordResult(
            record_id=entry.id,
            metric=m.name,
            score=None,
            error=plan.errors[key],
            models=sorted(plan.judgments[key], key=lambda j: jury[j.model]),
            extracted_by=extractor if composite else None,
        )
    per_model = sorted(plan.judgments[key], key=lambda j: jury[j.model])
    statements = None
    if composite:
        texts = plan.statements.get(key, [])
        votes = plan.statement_votes.get(key, [[] for _ in texts])
        statements = [
            StatementResult(
                statement=text,
                score=final_score([model_score(j.verdict) for j in judged]),
                models=sorted(judged, key=lambda j: jury[j.model]),
            )
            for text, judged in zip(texts, votes, strict=True)
        ]
    return RecordResult(
        record_id=entry.id,
        metric=m.name,
        score=final_score([j.score for j in per_model]),
        error=None,
        models=per_model,
        statements=statements,
        extracted_by=extractor if composite else None,
    )


class _ModelRun:
    """One loaded model's work: the extraction stage (if it is the extractor), then every
    judge and verification prompt, each stage in as few batched engine calls as possible."""

    def __init__(
        self,
        engine: Engine,
        spec: ModelSpec,
        st: _ModelStats,
        plan: _Plan,
        ks: dict[str, int],
        ties: dict[str, TieBreak],
        seed: int,
        temperature: float | None,
        max_tokens: int | None,
        adaptive: bool,
        progress: Progress | None,
        task: Any,
    ) -> None:
        self.engine = engine
        self.spec = spec
        self.st = st
        self.plan = plan
        self.ks = ks
        self.ties = ties
        self.seed = seed
        self.temperature = spec.temperature if temperature is None else temperature
        self.max_tokens = spec.max_tokens if max_tokens is None else max_tokens
        self.adaptive = adaptive
        self.progress = progress
        self.task = task

    def extract_statements(self) -> None:
        """Stage 1 of the composite metrics: one greedy sample per record."""
        plan = self.plan
        requests = [
            _Request(
                key,
                messages,
                plan.composite(key).extract_schema(),
                n=1,
                max_tokens=max(self.max_tokens, EXTRACTION_TOKENS),
                temperature=0.0,
            )
            for key, messages in plan.extract.items()
        ]
        for key, out in self._generate(requests, "extracting statements with").items():
            if isinstance(out, str):
                plan.errors[key] = f"statement extraction by {self.spec.name!r} failed: {out}"
                continue
            (sample,) = out
            statements, problem = plan.composite(key).parse_statements(sample.text, finished=sample.finished)
            if statements is None:
                plan.errors[key] = (
                    f"statement extraction by {self.spec.name!r} abstained: {problem}; raw: {sample.text!r}"
                )
            else:
                plan.statements[key] = statements
                plan.statement_votes[key] = [[] for _ in statements]

    def judge(self) -> None:
        """Every single-step prompt and every verification prompt, batched."""
        plan = self.plan
        requests = [
            _Request(
                key,
                messages,
                self._judge_metric(key).json_schema(),
                n=self.ks[key[1]],
                max_tokens=self.max_tokens,
                temperature=self.temperature,
            )
            for key, messages in plan.judge.items()
            if key not in plan.errors
        ]
        for key, statements in plan.statements.items():
            if not statements or key in plan.errors:
                continue
            metric, record = plan.composite(key), plan.records[key[0]]
            requests.append(
                _Request(
                    key,
                    metric.verify_messages(record, statements),
                    metric.verify_schema(record, statements),
                    n=self.ks[key[1]],
                    max_tokens=max(self.max_tokens, 64 + TOKENS_PER_STATEMENT * len(statements)),
                    temperature=self.temperature,
                )
            )
        outputs = self._generate_adaptive(requests) if self.adaptive else self._generate(requests, "judging with")
        for key, out in outputs.items():
            k = self.ks[key[1]]
            if isinstance(out, str):
                plan.judgments[key].append(
                    ModelJudgment(
                        model=self.spec.name,
                        votes=[None] * k if key in plan.judge else [],
                        reasons=[None] * k if key in plan.judge else [],
                        abstentions=k,
                        verdict=None,
                        score=None,
                        error=out,
                    )
                )
                self.st.abstentions += k
                self.st.unscored += 1
                if key in plan.judge:
                    self.st.verdicts.append(None)
            elif key in plan.judge:
                self._record_judgment(key, out)
            else:
                self._record_verification(key, out)

    def _generate_adaptive(self, requests: list[_Request]) -> dict[tuple[str, str], list[Completion] | str]:
        """Draw m = k // 2 + 1 samples first; where their votes are unanimous (on every
        statement, for a composite) the majority of k is already decided, whatever the rest
        would be. Draw the other k - m samples only for the pairs still open."""
        first = [replace(r, n=r.n // 2 + 1) if r.n > 2 else r for r in requests]
        outputs = self._generate(first, "judging (first samples) with")
        rest: list[_Request] = []
        for r, f in zip(requests, first, strict=True):
            drawn = outputs[r.key]
            if f.n == r.n or isinstance(drawn, str):
                continue  # nothing to save (k <= 2), or the prompt could not run
            if self._unanimous(r.key, drawn):
                self.st.saved += r.n - f.n
            else:
                rest.append(replace(r, n=r.n - f.n))
        more = self._generate(rest, "judging (open pairs) with")
        for key, samples in more.items():
            done = outputs[key]
            assert not isinstance(done, str)
            outputs[key] = samples if isinstance(samples, str) else [*done, *samples]
        return outputs

    def _unanimous(self, key: tuple[str, str], samples: list[Completion]) -> bool:
        if key in self.plan.judge:
            metric = self._judge_metric(key)
            votes = [metric.parse(c.text, finished=c.finished).vote for c in samples]
            return None not in votes and len(set(votes)) == 1
        composite, record, statements = self.plan.composite(key), self.plan.records[key[0]], self.plan.statements[key]
        parsed = [composite.parse_verification(c.text, record, statements, finished=c.finished) for c in samples]
        if any(p.problem for p in parsed):
            return False
        return all(len({p.votes[i] for p in parsed}) == 1 for i in range(len(statements)))

    def _judge_metric(self, key: tuple[str, str]) -> JudgeMetric:
        metric = self.plan.metrics[key[1]]
        assert isinstance(metric, JudgeMetric)
        return metric

    def _record_judgment(self, key: tuple[str, str], samples: list[Completion]) -> None:
        metric = self._judge_metric(key)
        parsed = [metric.parse(c.text, finished=c.finished) for c in samples]
        votes = [p.vote for p in parsed]
        verdict = model_verdict(votes, self.ties[key[1]])
        invalid = [
            InvalidSample(sample=j, problem=p.problem or "invalid", raw=p.raw)
            for j, p in enumerate(parsed)
            if p.vote is None
        ]
        self.plan.judgments[key].append(
            ModelJudgment(
                model=self.spec.name,
                votes=votes,
                reasons=[p.reason for p in parsed],
                drawn=len(samples),
                abstentions=len(invalid),
                verdict=verdict,
                score=model_score(verdict),
                invalid=invalid,
            )
        )
        self.st.abstentions += len(invalid)
        self.st.verdicts.append(verdict)
        self.st.unscored += verdict is None

    def _record_verification(self, key: tuple[str, str], samples: list[Completion]) -> None:
        plan = self.plan
        metric, record, statements = plan.composite(key), plan.records[key[0]], plan.statements[key]
        parsed = [metric.parse_verification(c.text, record, statements, finished=c.finished) for c in samples]
        verdicts: list[int | None] = []
        for i, judged in enumerate(plan.statement_votes[key]):
            votes = [p.votes[i] for p in parsed]
            verdict = model_verdict(votes, self.ties[key[1]])
            verdicts.append(verdict)
            judged.append(
                StatementJudgment(
                    model=self.spec.name, votes=votes, reasons=[p.reasons[i] for p in parsed], verdict=verdict
                )
            )
        invalid = [
            InvalidSample(sample=j, problem=p.problem or "invalid", raw=p.raw)
            for j, p in enumerate(parsed)
            if p.problem is not None
        ]
        score = share_supported(verdicts)
        plan.judgments[key].append(
            ModelJudgment(
                model=self.spec.name,
                votes=[],
                reasons=[],
                drawn=len(samples),
                abstentions=len(invalid),
                verdict=None,
                score=score,
                invalid=invalid,
            )
        )
        self.st.abstentions += len(invalid)
        self.st.unscored += score is None

    def _generate(self, requests: list[_Request], doing: str) -> dict[tuple[str, str], list[Completion] | str]:
        """Run requests in as few engine calls as possible: one per distinct (n, schema,
        token budget, temperature). Prompts over the model's context come back as an error
        string. Identical prompts at temperature 0 are generated once."""
        spec, engine = self.spec, self.engine
        if not requests:
            return {}
        prompts = [engine.format_prompt(r.messages) for r in requests]
        lengths = engine.count_tokens(prompts)
        results: dict[tuple[str, str], list[Completion] | str] = {}
        groups: dict[tuple[int, str, int, float], list[tuple[_Request, str]]] = {}
        for req, prompt, length in zip(requests, prompts, lengths, strict=True):
            if length + req.max_tokens > spec.context_length:
                results[req.key] = (
                    f"prompt is {length} tokens; with max_tokens {req.max_tokens} it exceeds "
                    f"context_length {spec.context_length} of model {spec.name!r}"
                )
                continue
            group = (req.n, json.dumps(req.schema, sort_keys=True), req.max_tokens, req.temperature)
            groups.setdefault(group, []).append((req, prompt))
        batches = [
            (group, members, list(dict.fromkeys(p for _, p in members)) if group[3] == 0 else [p for _, p in members])
            for group, members in groups.items()
        ]
        if self.progress is not None and self.task is not None:
            total = sum(len(unique) for _, _, unique in batches)
            self.progress.update(self.task, description=f"{doing} {spec.name}", total=total, completed=0)
        for (n, _, budget, temp), members, unique in batches:
            sampling = Sampling(temperature=temp, top_p=self.spec.top_p, max_tokens=budget, seed=self.seed)
            t = time.perf_counter()
            outputs = engine.generate(
                unique,
                n=n,
                sampling=sampling,
                schema=members[0][0].schema,
                progress=self._advance,
            )
            self.st.generate_seconds += time.perf_counter() - t
            by_prompt = dict(zip(unique, outputs, strict=True)) if temp == 0 else None
            for j, (req, prompt) in enumerate(members):
                samples = by_prompt[prompt] if by_prompt is not None else outputs[j]
                results[req.key] = samples
            for samples in outputs:
                self.st.judgments += len(samples)
                self.st.output_tokens += sum(c.n_tokens for c in samples)
        return results

    def _advance(self, done: int) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task, done)


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
    extractor: str | None,
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
                kind="composite" if isinstance(m, CompositeMetric) else "judge",
                definition=m.description,
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
                abstained_verdicts=st.unscored,
                pass_rate=sum(decided) / len(decided) if decided else None,
                load_seconds=round(st.load_seconds, 3),
                generate_seconds=round(st.generate_seconds, 3),
                judgments_per_second=st.judgments / st.generate_seconds if st.generate_seconds else None,
                output_tokens=st.output_tokens,
                output_tokens_per_second=st.output_tokens / st.generate_seconds if st.generate_seconds else None,
                samples_saved=st.saved,
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
        extractor=extractor,
        started_at=started_at,
        seconds=round(seconds, 3),
    )
