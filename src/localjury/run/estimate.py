"""The dry run's estimate: time a model on a few of the run's own prompts, then extrapolate
to the engine batches of the run that follows.

A warm-up call first pays the one-time costs; then the first prompt alone and the others
together give two engine batches of different sizes, from which a batch's time is split into
a part that does not grow with its prompts and a part that does (:meth:`Measured.batch_costs`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from localjury.engines.base import GenerateCall, Sampling
from localjury.metrics.protocol import Request
from localjury.run.context import JuryModel, ModelCounts, RunContext
from localjury.run.generate import EngineCalls, ModelPass

if TYPE_CHECKING:
    from rich.progress import Progress


@dataclass
class Measured:
    """What a model did on its sample: the warm-up call, then two calls of the sample's requests."""

    warmup_seconds: float
    first: ModelCounts
    """The first request's call alone."""
    whole: ModelCounts
    """All the sample's calls (the load included)."""
    prompts: int

    def batch_costs(self) -> tuple[float, float]:
        """Seconds of an engine batch of B prompts as ``fixed + per_prompt * B``, from the
        sample's two calls (1 prompt, then the others). Decoding a small batch on a CPU reads
        every weight once a step however many sequences run, so a batch takes nearly as long as
        one prompt alone; a large batch on a GPU grows with its prompts. Without two sizes (a
        sample of 2 prompts or fewer) or with timings that contradict the model, the time is
        per prompt."""
        t1 = self.first.generate_seconds
        t2 = self.whole.generate_seconds - t1
        rest = self.prompts - 1
        if rest >= 2:
            per_prompt = (t2 - t1) / (rest - 1)
            fixed = t1 - per_prompt
            if per_prompt >= 0 and fixed >= 0:
                return fixed, per_prompt
        return 0.0, self.whole.generate_seconds / self.prompts

    def run_seconds(self, prompts: int, batch_size: int) -> float:
        """The estimated seconds of a run's pass that generates ``prompts`` prompts, which its
        engine calls batch ``batch_size`` at a time; with any prompt left, the pass loads the
        model and pays the one-time costs again."""
        if not prompts:
            return 0.0
        fixed, per_prompt = self.batch_costs()
        full, part = divmod(prompts, batch_size)
        seconds = full * (fixed + per_prompt * batch_size) + (fixed + per_prompt * part if part else 0.0)
        return seconds + self.whole.load_seconds + self.warmup_seconds


def measure(ctx: RunContext, model: JuryModel, sample: list[Request], progress: Progress | None) -> Measured:
    """Time the model on the sample, through the run's own pass (its store keys and engine
    calls): after a warm-up call that pays the one-time costs (the schema's constraint index,
    the first forward passes: one output token of the first prompt, not stored), the first
    request alone, then the others together. Two calls of different sizes tell the part of an
    engine batch's time that does not grow with its prompts from the part that does."""
    name = model.spec.name
    task = progress.add_task(f"{name}: measuring", total=len(sample)) if progress is not None else None
    counts = ModelCounts(model.spec)
    calls = EngineCalls(model, ctx.seed, ctx.factory)
    timed = ModelPass(ctx, model, calls, ctx.store, counts)

    def fetch(part: list[Request]) -> None:
        timed.fetch(part)
        if progress is not None and task is not None:
            progress.advance(task, len(part))

    try:
        engine = calls.load(counts)
        q = sample[0]
        sampling = Sampling(q.temperature, model.top_p, 1, ctx.seed, q.first_sample)
        started = time.perf_counter()
        engine.generate(GenerateCall([engine.format_prompt(q.messages)], 1, sampling, q.schema))
        warmup = time.perf_counter() - started
        fetch(sample[:1])
        first = replace(counts)
        fetch(sample[1:])
    finally:
        calls.close()
        if progress is not None and task is not None:
            progress.update(task, description=f"{name}: measured")
    return Measured(warmup, first, counts, len(sample))
