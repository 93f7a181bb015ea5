"""The requests of a chunk of records: records x metrics x models, planned without I/O.

Planning is two pure steps around one read of the store. :func:`first_steps` gives each
(record, metric) of the chunk its error, or its first step: a request to the extractor (a
composite's statement extraction), which the extraction pass generates and stores like any
other generation. A pass then reads those extractions from the store and hands them to
:func:`plan_chunk`, which gives each (record, metric) its context (the statements) and each
model's requests, split in two under adaptive strictness. Each model's pass (a dry run's too)
plans a chunk once; the last pass plans it for the whole jury and hands that plan, once
generated, to the assembly of its results. Plans are pure, so the assembly finds in the store
exactly what the earlier passes put there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from localjury.errors import RecordError
from localjury.metrics.prompt_fit import over_bound
from localjury.metrics.protocol import Extraction, Judging, Key, Request
from localjury.records.record import Record
from localjury.run.context import JuryModel, RunContext
from localjury.store import Stored


@dataclass(frozen=True)
class FirstStep:
    """One (record, metric) of a chunk before any model is asked."""

    record: Record
    judging: Judging
    error: str | None
    """Why it cannot be judged (the record is over the jury's bound, or the metric's prompt
    cannot be rendered for it); None when it can."""
    extraction: Extraction | None
    """Its first step, to the extractor (a composite's statement extraction); None without one."""

    @property
    def request(self) -> Request | None:
        """Its first step's request; None without one."""
        return None if self.extraction is None else self.extraction.request


@dataclass
class Planned:
    """One (record, metric) of a chunk, planned."""

    record: Record
    judging: Judging
    error: str | None = None
    """Why it cannot be judged: the record's error, or its first step's."""
    context: Any = None
    """What its first step gave (a composite's statements); None without one."""
    requests: dict[str, list[list[Request]]] = field(default_factory=dict)
    """Each model's requests, by model name: per prompt it is asked (one; a pairwise
    metric's two orders), one request, or two under adaptive strictness."""


def first_model(ctx: RunContext) -> JuryModel:
    """The model a first step is asked of: the extractor, else the first model (a record's
    error does not depend on the model)."""
    return ctx.extractor or ctx.models[0]


def first_steps(ctx: RunContext, chunk: list[Record | RecordError]) -> list[FirstStep]:
    """Every (record, metric) of the chunk's good records, in order, with its error or its first step."""
    first = first_model(ctx)
    steps: list[FirstStep] = []
    for record in (e for e in chunk if isinstance(e, Record)):
        # Before any prompt is rendered or tokenized, and against the whole jury (not the
        # models of one pass), so that every pass and the assembly agree on the error.
        too_long = over_bound(record, ctx.models)
        for judging in ctx.judgings:
            if too_long is not None:
                steps.append(FirstStep(record, judging, too_long, None))
                continue
            try:
                steps.append(FirstStep(record, judging, None, judging.first_step(record, first)))
            except RecordError as exc:
                steps.append(FirstStep(record, judging, str(exc), None))
    return steps


def extraction_requests(steps: list[FirstStep]) -> list[Request]:
    """The first steps' requests to the extractor, in order."""
    return [s.request for s in steps if s.request is not None]


def plan_chunk(
    ctx: RunContext, steps: list[FirstStep], extracted: Mapping[Key, Stored], models: list[JuryModel]
) -> list[Planned]:
    """Plan every (record, metric) of ``steps`` for ``models``.

    Args:
        ctx: The run.
        steps: The chunk's first steps (:func:`first_steps`).
        extracted: What the store holds of the first steps' generations, by request key.
        models: The models to plan requests for (one model's pass; all of them to assemble).
    """
    by = first_model(ctx).spec.name
    adaptive, on_overflow = ctx.config.sampling.adaptive, ctx.config.input.on_overflow
    plans: list[Planned] = []
    for step in steps:
        plan = Planned(step.record, step.judging, error=step.error)
        plans.append(plan)
        if step.extraction is not None:
            stored = extracted.get(step.extraction.request.key)
            context = step.extraction.read(stored, by, ctx.lost.get((by, step.record.id)))
            if isinstance(context, str):
                plan.error = context
            else:
                plan.context = context
        if plan.error is not None:
            continue
        asked = {m.spec.name: plan.judging.requests(m, plan.record, plan.context, on_overflow) for m in models}
        if any(asked.values()):  # a record no model is asked about (a kind computed without one) has none
            plan.requests = {name: [_split(q, adaptive) for q in prompts] for name, prompts in asked.items()}
    return plans


def _split(request: Request, adaptive: bool) -> list[Request]:
    """The request of k samples, or under adaptive strictness one for the first k // 2 + 1 and
    one for the rest (drawn only where the first are not unanimous). A request of one sample (a
    decision head's) stays whole."""
    k = request.n
    m = k // 2 + 1
    if not adaptive or m >= k:
        return [request]
    return [replace(request, n=m), replace(request, n=k - m, first_sample=m)]
