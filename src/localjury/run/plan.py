"""The requests of a chunk of records: records x metrics x models, in one place.

:func:`plan_chunk` is what both a model's pass (:mod:`~localjury.run.generate`) and the
assembly of results (:mod:`~localjury.run.assemble`) build: each (record, metric)'s error,
or its first step's outcome (a composite's statements) and each model's requests, split in
two under adaptive strictness. Because both build the same plan, the assembly finds in the
store exactly what the passes put there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from localjury.errors import RecordError
from localjury.metrics.judging import Judging, Request
from localjury.metrics.prompt_fit import over_bound
from localjury.records.record import Record
from localjury.run.context import Run
from localjury.run.state import JuryModel
from localjury.store import GenerationStore, Stored


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


#: Looks up (or generates) first-step requests: store key -> stored generation.
FirstSteps = Callable[[list["Request"]], Mapping[str, Stored]]


def read_first_steps(run: Run, store: GenerationStore, requests: list[Request]) -> Mapping[str, Stored]:
    """What ``store`` holds of the first steps (the extractor's generations)."""
    assert run.extractor is not None
    return store.get_many(run.extractor.store_key(q, run.seed) for q in requests)


def plan_chunk(
    run: Run, chunk: list[Record | RecordError], models: list[JuryModel], first_steps: FirstSteps
) -> list[Planned]:
    """Plan every (record, metric) of the chunk's good records, in order, for ``models``.

    ``first_steps`` resolves the first steps (the extractor's statement extractions) to what
    the store holds; a pass of the extractor itself generates the missing ones there.
    """
    first = run.extractor or run.models[0]  # a record's error does not depend on the model
    plans: list[Planned] = []
    steps: list[tuple[Planned, Request]] = []
    for record in (e for e in chunk if isinstance(e, Record)):
        # Before any prompt is rendered or tokenized, and against the whole jury (not the
        # models of this pass), so that every pass and the assembly agree on the error.
        too_long = over_bound(record, run.models)
        for judging in run.judgings:
            plan = Planned(record, judging, error=too_long)
            plans.append(plan)
            if too_long is not None:
                continue
            try:
                step = judging.first_step(record, first)
            except RecordError as exc:
                plan.error = str(exc)
                continue
            if step is not None:
                steps.append((plan, step))
    if steps:
        found = first_steps([q for _, q in steps])
        by = first.spec.name
        for plan, q in steps:
            stored = found.get(first.store_key(q, run.seed))
            context = plan.judging.read_first_step(plan.record, stored, by, run.lost.get((by, plan.record.id)))
            if isinstance(context, str):
                plan.error = context
            else:
                plan.context = context
    adaptive, on_overflow = run.config.sampling.adaptive, run.config.input.on_overflow
    for plan in plans:
        if plan.error is not None or not plan.judging.judged(plan.context):
            continue
        for model in models:
            prompts = plan.judging.requests(model, plan.record, plan.context, on_overflow)
            plan.requests[model.spec.name] = [_split(q, plan.judging.k, adaptive) for q in prompts]
    return plans


def _split(request: Request, k: int, adaptive: bool) -> list[Request]:
    """The request, or under adaptive strictness one for the first k // 2 + 1 samples and one
    for the rest (drawn only where the first are not unanimous)."""
    m = k // 2 + 1
    if not adaptive or m >= k:
        return [request]
    return [replace(request, n=m), replace(request, n=k - m, first_sample=m)]
