"""Samples -> votes -> results: the last pass reads the store chunk by chunk, and each
metric's judging turns every model's samples into its judgment and those into a result."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from localjury.engines.base import Completion
from localjury.errors import RecordError
from localjury.records.readers import Dataset
from localjury.records.record import Record
from localjury.results._commit import StagedFile
from localjury.results.record_result import ModelJudgment, RecordResult
from localjury.run.context import Run
from localjury.run.plan import Planned, plan_chunk, read_first_steps
from localjury.run.state import JuryModel
from localjury.store import Stored
from localjury.votes.voting import passes


@dataclass
class MetricAcc:
    """One metric's running figures for the summary."""

    records: int = 0
    scored: int = 0
    total: float = 0.0
    passed: int = 0
    paired: int = 0
    """Pairwise metrics: (record, model) judgments with a majority in both orders."""
    consistent: int = 0
    """Of those, the ones whose two majorities agree once order-corrected."""
    records_cut: int = 0
    """Records whose conversation had turns cut to fit a judge's context."""
    turns_cut: int = 0
    """The turns cut, over those records."""


def assemble_all(run: Run, dataset: Dataset, out: StagedFile | None) -> tuple[list[RecordResult], dict[str, MetricAcc]]:
    """Assemble every chunk's results; stream them to ``out`` (a staged file, renamed into
    place with the summary and manifest) or keep them in memory."""
    acc = {m.name: MetricAcc() for m in run.metrics}
    kept: list[RecordResult] = []
    for chunk in dataset.chunks(run.config.input.chunk_size):
        for r in assemble(run, chunk):
            a = acc[r.metric]
            if r.error is None:
                a.records += 1
                if r.score is not None:
                    a.scored += 1
                    a.total += r.score
                    a.passed += bool(passes(r.score, r.rubric.threshold if r.rubric else None))
                if r.turns_cut:
                    a.records_cut += 1
                    a.turns_cut += r.turns_cut
                for j in r.models:
                    if j.position_consistent is not None:
                        a.paired += 1
                        a.consistent += j.position_consistent
            if out is not None:
                out.write(r.model_dump_json() + "\n")
            else:
                kept.append(r)
    return kept, acc


def assemble(run: Run, chunk: list[Record | RecordError]) -> list[RecordResult]:
    """Parse and vote a chunk's stored generations into results, in input order."""
    plans = plan_chunk(run, chunk, run.models, partial(read_first_steps, run, run.store))
    wanted = [
        (plan, model, [[model.store_key(q, run.seed) for q in qs] for qs in plan.requests[model.spec.name]])
        for plan in plans
        if plan.requests
        for model in run.models
    ]
    found = run.store.get_many(k for _, _, keys in wanted for ks in keys for k in ks)
    keys = {(id(plan), model.spec.name): ks for plan, model, ks in wanted}

    results: list[RecordResult] = []
    planned = iter(plans)
    for entry in chunk:
        if isinstance(entry, RecordError):
            results.extend(
                RecordResult(record_id=entry.record_id, metric=m.name, score=None, error=str(entry), models=[])
                for m in run.metrics
            )
            continue
        for _ in run.metrics:
            plan = next(planned)
            stored = {name: [[found.get(k) for k in ks] for ks in keys[(id(plan), name)]] for name in plan.requests}
            results.append(_result(run, plan, stored))
    return results


def _result(run: Run, plan: Planned, stored: dict[str, list[list[Stored | None]]]) -> RecordResult:
    judging = plan.judging
    extracted_by = run.extractor.spec.name if run.extractor is not None and judging.extracts else None
    if plan.error is not None:
        return RecordResult(
            record_id=plan.record.id,
            metric=judging.metric.name,
            score=None,
            error=plan.error,
            models=[],
            extracted_by=extracted_by,
        )
    judged = [_judge(run, plan, model, stored[model.spec.name]) for model in run.models if plan.requests]
    result = judging.result(plan.record, plan.context, judged, extracted_by)
    cut = max((q.turns_cut for prompts in plan.requests.values() for part in prompts for q in part), default=0)
    return result.model_copy(update={"turns_cut": cut}) if cut else result


def _judge(
    run: Run, plan: Planned, model: JuryModel, stored: list[list[Stored | None]]
) -> tuple[ModelJudgment, object]:
    """One model's judgment of a planned (record, metric), counted in its stats. ``stored``
    holds each prompt's stored generations (its first samples, and the rest under adaptive
    strictness); a prompt that could not run makes the model's whole judgment an error."""
    st = run.stats[model.spec.name]
    k = plan.judging.k
    name = model.spec.name
    error = None
    for part in stored:
        first = part[0]
        error = first if isinstance(first, str) else (run.missing(name, plan.record.id) if first is None else None)
        if error is not None:
            break
    detail = None
    if error is not None:
        judgment = plan.judging.unjudged(name, error)
    else:
        prompts: list[list[Completion]] = []
        for part in stored:
            samples: list[Completion] = list(part[0])  # type: ignore[arg-type]
            if len(part) > 1:
                rest = part[1]
                if isinstance(rest, list):
                    samples += rest
                else:
                    st.saved += k - len(samples)
            prompts.append(samples)
        st.used += sum(len(s) for s in prompts)
        judgment, detail = plan.judging.judge(name, plan.record, plan.context, prompts)
    st.abstentions += judgment.abstentions
    st.unscored += judgment.score is None
    st.decided += judgment.verdict is not None
    st.passes += judgment.verdict == 1
    return judgment, detail
