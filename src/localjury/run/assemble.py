"""Samples -> votes -> results: each chunk's plan, for the whole jury, read back from the store,
and each metric's judging turning every model's samples into its judgment and those into a
result. The last model's pass hands each chunk's plan here once it has generated it
(:class:`Assembly`, which spools the results to a temporary file); a sharded run, whose
replicas generate, and a run with nothing to generate assemble in a pass of their own
(:meth:`Assembly.all`)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import IO, NamedTuple

from localjury.engines.base import Completion
from localjury.errors import RecordError
from localjury.metrics.protocol import Samples
from localjury.records.readers import Dataset
from localjury.records.record import Record
from localjury.results._commit import StagedFile
from localjury.results.record_result import RecordResult
from localjury.results.summary import MetricFigures
from localjury.run.context import JuryModel, RunContext
from localjury.run.generate import stored_extractions
from localjury.run.plan import Planned, first_steps, plan_chunk
from localjury.store import Stored
from localjury.votes.voting import passes


@dataclass
class Assembly:
    """The run's results, chunk by chunk, with each metric's figures: spooled to an unnamed
    temporary file (``spool``: nothing is left of it when the process dies; the results file is
    written from it once every pass is done, :meth:`write_to`) or kept in memory."""

    ctx: RunContext
    spool: bool
    figures: dict[str, MetricFigures] = field(init=False)
    kept: list[RecordResult] = field(default_factory=list)
    _spooled: IO[bytes] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.figures = {m.name: MetricFigures() for m in self.ctx.metrics}
        # Closed by close(): the spool lives as long as the run.
        self._spooled = tempfile.TemporaryFile() if self.spool else None  # noqa: SIM115

    def add(self, chunk: list[Record | RecordError], plans: list[Planned]) -> None:
        """A chunk's results, from its plan for the whole jury and what the store holds of it."""
        results = assemble(self.ctx, chunk, plans)
        decided = [passes(r.score, r.rubric.threshold if r.rubric else None) for r in results]
        for r, passed in zip(results, decided, strict=True):
            self.figures[r.metric].add(r, passed)
            if self._spooled is not None:
                self._spooled.write((r.model_dump_json() + "\n").encode("utf-8"))
            else:
                self.kept.append(r)

    def write_to(self, out: StagedFile) -> None:
        """Write the spooled results to ``out`` (a staged file, renamed into place with the summary
        and manifest)."""
        assert self._spooled is not None  # a spooling assembly's
        self._spooled.seek(0)
        for block in iter(lambda: self._spooled.read(1 << 20), b""):  # type: ignore[union-attr]
            out.write(block)

    def close(self) -> None:
        if self._spooled is not None:
            self._spooled.close()

    def all(self, dataset: Dataset) -> None:
        """Every chunk's results in a pass of their own, each chunk planned for the whole jury."""
        ctx = self.ctx
        for chunk in dataset.chunks(ctx.config.input.chunk_size):
            steps = first_steps(ctx, chunk)
            self.add(chunk, plan_chunk(ctx, steps, stored_extractions(ctx, ctx.store, steps)[0], ctx.models))


def assemble(ctx: RunContext, chunk: list[Record | RecordError], plans: list[Planned]) -> list[RecordResult]:
    """Parse and vote a chunk's stored generations into results, in input order (``plans``: its
    plan for the whole jury)."""
    wanted = [
        (plan, model, [[model.store_key(q, ctx.seed) for q in qs] for qs in plan.requests[model.spec.name]])
        for plan in plans
        if plan.requests
        for model in ctx.models
    ]
    found = ctx.store.get_many([k for _, _, keys in wanted for ks in keys for k in ks])
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
    drawn = {m.spec.name: _samples(ctx, plan, m, stored[m.spec.name]) for m in ctx.models if plan.requests}
    judged, result = judging.result(plan.record, plan.context, {name: d.samples for name, d in drawn.items()})
    for (name, d), one in zip(drawn.items(), judged, strict=True):
        ctx.counts[name].judged(one.judgment, used=d.used, saved=d.saved)
    cut = max((q.turns_cut for prompts in plan.requests.values() for part in prompts for q in part), default=0)
    update: dict[str, object] = {"extracted_by": extracted_by} if extracted_by else {}
    update |= {"turns_cut": cut} if cut else {}
    return result.model_copy(update=update) if update else result


class _Drawn(NamedTuple):
    samples: Samples
    """Each prompt's samples, or why the model has none."""
    used: int
    saved: int
    """Samples adaptive strictness did not draw."""


def _samples(ctx: RunContext, plan: Planned, model: JuryModel, stored: list[list[Stored | None]]) -> _Drawn:
    """One model's samples of a planned (record, metric), from ``stored``: each prompt's
    stored generations (its first samples, and the rest under adaptive strictness). A prompt
    that could not run makes the model's whole judgment an error."""
    name = model.spec.name
    for part in stored:
        first = part[0]
        error = first if isinstance(first, str) else (ctx.missing(name, plan.record.id) if first is None else None)
        if error is not None:
            return _Drawn(error, 0, 0)
    prompts: list[list[Completion]] = []
    saved = 0
    for part in stored:
        samples: list[Completion] = list(part[0])  # type: ignore[arg-type]
        if len(part) > 1:
            rest = part[1]
            if isinstance(rest, list):
                samples += rest
            else:
                saved += plan.judging.k - len(samples)
        prompts.append(samples)
    return _Drawn(prompts, sum(len(s) for s in prompts), saved)
