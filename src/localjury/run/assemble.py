"""Samples -> votes -> results: the last pass reads the store chunk by chunk, plans each chunk
once for the whole jury, and each metric's judging turns every model's samples into its judgment
and those into a result."""

from __future__ import annotations

from localjury.engines.base import Completion
from localjury.errors import RecordError
from localjury.records.readers import Dataset
from localjury.records.record import Record
from localjury.results._commit import StagedFile
from localjury.results.record_result import ModelJudgment, RecordResult
from localjury.results.summary import MetricFigures
from localjury.run.context import JuryModel, RunContext
from localjury.run.generate import stored_extractions
from localjury.run.plan import Planned, first_steps, plan_chunk
from localjury.store import Stored


def assemble_all(
    ctx: RunContext, dataset: Dataset, out: StagedFile | None
) -> tuple[list[RecordResult], dict[str, MetricFigures]]:
    """Assemble every chunk's results, and each metric's figures; stream the results to ``out``
    (a staged file, renamed into place with the summary and manifest) or keep them in memory."""
    figures = {m.name: MetricFigures() for m in ctx.metrics}
    kept: list[RecordResult] = []
    for chunk in dataset.chunks(ctx.config.input.chunk_size):
        for r in assemble(ctx, chunk):
            figures[r.metric].add(r)
            if out is not None:
                out.write(r.model_dump_json() + "\n")
            else:
                kept.append(r)
    return kept, figures


def assemble(ctx: RunContext, chunk: list[Record | RecordError]) -> list[RecordResult]:
    """Parse and vote a chunk's stored generations into results, in input order."""
    steps = first_steps(ctx, chunk)
    plans = plan_chunk(ctx, steps, stored_extractions(ctx, ctx.store, steps)[0], ctx.models)
    wanted = [
        (plan, model, [[model.store_key(q, ctx.seed) for q in qs] for qs in plan.requests[model.spec.name]])
        for plan in plans
        if plan.requests
        for model in ctx.models
    ]
    found = ctx.store.get_many(k for _, _, keys in wanted for ks in keys for k in ks)
    keys = {(id(plan), model.spec.name): ks for plan, model, ks in wanted}

    results: list[RecordResult] = []
    planned = iter(plans)
    for entry in chunk:
        if isinstance(entry, RecordError):
            results.extend(
                RecordResult(record_id=entry.record_id, metric=m.name, score=None, error=str(entry), models=[])
                for m in ctx.metrics
            )
            continue
        for _ in ctx.metrics:
            plan = next(planned)
            stored = {name: [[found.get(k) for k in ks] for ks in keys[(id(plan), name)]] for name in plan.requests}
            results.append(_result(ctx, plan, stored))
    return results


def _result(ctx: RunContext, plan: Planned, stored: dict[str, list[list[Stored | None]]]) -> RecordResult:
    judging = plan.judging
    extracted_by = ctx.extractor.spec.name if ctx.extractor is not None and judging.extracts else None
    if plan.error is not None:
        return RecordResult(
            record_id=plan.record.id,
            metric=judging.metric.name,
            score=None,
            error=plan.error,
            models=[],
            extracted_by=extracted_by,
        )
    judged = [_judge(ctx, plan, model, stored[model.spec.name]) for model in ctx.models if plan.requests]
    result = judging.result(plan.record, plan.context, judged, extracted_by)
    cut = max((q.turns_cut for prompts in plan.requests.values() for part in prompts for q in part), default=0)
    return result.model_copy(update={"turns_cut": cut}) if cut else result


def _judge(
    ctx: RunContext, plan: Planned, model: JuryModel, stored: list[list[Stored | None]]
) -> tuple[ModelJudgment, object]:
    """One model's judgment of a planned (record, metric), counted in its counters. ``stored``
    holds each prompt's stored generations (its first samples, and the rest under adaptive
    strictness); a prompt that could not run makes the model's whole judgment an error."""
    k = plan.judging.k
    name = model.spec.name
    error = None
    for part in stored:
        first = part[0]
        error = first if isinstance(first, str) else (ctx.missing(name, plan.record.id) if first is None else None)
        if error is not None:
            break
    if error is not None:
        judgment = plan.judging.unjudged(name, error)
        ctx.counts[name].judged(judgment, used=0, saved=0)
        return judgment, None
    prompts: list[list[Completion]] = []
    saved = 0
    for part in stored:
        samples: list[Completion] = list(part[0])  # type: ignore[arg-type]
        if len(part) > 1:
            rest = part[1]
            if isinstance(rest, list):
                samples += rest
            else:
                saved += k - len(samples)
        prompts.append(samples)
    judgment, detail = plan.judging.judge(name, plan.record, plan.context, prompts)
    thinking = [c.thinking for samples in prompts for c in samples]
    if any(t is not None for t in thinking):
        judgment = judgment.model_copy(update={"thinking": thinking})
    ctx.counts[name].judged(judgment, used=sum(len(s) for s in prompts), saved=saved)
    return judgment, detail
