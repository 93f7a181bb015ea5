"""A model's pass over the data: plan each chunk, look each request up in the judgment store,
generate what is missing in as few engine calls as possible, and store it chunk by chunk.

A :class:`ModelPass` generates with a :class:`Calls`: the model's engine (:class:`EngineCalls`,
loaded only when a chunk has something to generate, so a model whose prompts are all in the
store is never loaded), or a dry pass's :class:`DryCalls`, which answers nothing and counts what
it is asked. The same pass runs a chunk on this process, a shard on a replica (with a
:class:`MemoryStore`), a dry run's pass and the probe of each shard on the driver of a sharded
run (with :class:`DryCalls` and a :class:`ReadOnly` store).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from localjury.engines import load_engine
from localjury.engines.base import Engine, GenerateCall, PromptTokens, Sampling, Usage
from localjury.errors import EngineError, RecordError
from localjury.metrics.protocol import Key, Request
from localjury.models.registry import ModelSpec
from localjury.records.record import Record
from localjury.run.context import EngineFactory, JuryModel, ModelCounts, RunContext
from localjury.run.plan import FirstStep, Planned, extraction_requests, first_steps, plan_chunk
from localjury.store import GenerationStore, Stored
from localjury.types import Completion

#: What counts a model's prompt tokens in a dry run: its tokenizer alone, or an engine.
TokenizerFactory = Callable[[ModelSpec], "PromptTokens | Engine"]


class Calls(Protocol):
    """What a pass generates with."""

    def generate(self, requests: list[Request], into: dict[Key, Stored], counts: ModelCounts) -> None:
        """Put each request's samples (or why it could not run) into ``into``, counted in ``counts``."""
        ...

    def close(self) -> None: ...


class ModelPass:
    """One model's pass: each chunk planned once (or its statement extractions listed, in the
    extraction pass), its requests looked up in ``store`` and the missing ones generated with
    ``calls`` and stored, counted in ``counts``."""

    def __init__(
        self, ctx: RunContext, model: JuryModel, calls: Calls, store: GenerationStore, counts: ModelCounts
    ) -> None:
        self.ctx = ctx
        self.model = model
        self.calls = calls
        self.store = store
        self.counts = counts

    def extract(self, chunk: list[Record | RecordError]) -> None:
        """The extraction pass's work on a chunk: its statement extractions, found or generated and stored."""
        self.fetch(extraction_requests(first_steps(self.ctx, chunk)))

    def plan(self, chunk: list[Record | RecordError], models: list[JuryModel] | None = None) -> list[Planned]:
        """The chunk's plan for this model (``models``: for those, this one among them: the last
        pass plans for the whole jury, whose results it assembles), from the statement
        extractions the store holds."""
        steps = first_steps(self.ctx, chunk)
        plans = plan_chunk(self.ctx, steps, self._extractions(steps), models or [self.model])
        name = self.model.spec.name
        asked = {p.record.id for p in plans if p.requests.get(name)}
        extractor = self.ctx.extractor
        if extractor is not None and extractor.spec.name == name:  # the records it extracted statements from
            asked.update(s.record.id for s in steps if s.request is not None)
        self.counts.asked(len(asked))
        return plans

    def judge(self, plans: list[Planned]) -> None:
        """Find or generate every request of the plans; under adaptive strictness, the
        remaining samples of the prompts whose first samples are not unanimous."""
        first: list[Request] = []
        rest: list[tuple[Request, Planned]] = []
        for plan in plans:
            for requests in plan.requests.get(self.model.spec.name, []):
                first.append(requests[0])
                if len(requests) > 1:
                    rest.append((requests[1], plan))
        outputs = self.fetch(first)
        if rest:
            self.fetch(self._undecided(rest, outputs))

    def fetch(self, requests: list[Request]) -> dict[Key, Stored]:
        """Each request's samples: from the store, or generated now and stored (a dry pass's
        :class:`DryCalls` answers none of them)."""
        keys = [self.model.store_key(q, self.ctx.seed) for q in requests]
        found = {} if self.ctx.config.store.fresh else self.store.get_many(keys)
        out: dict[Key, Stored] = {}
        missing: list[tuple[Request, str]] = []
        for q, key in zip(requests, keys, strict=True):
            if key in found:
                out[q.key] = found[key]
                self.counts.found(found[key])
            else:
                missing.append((q, key))
        if missing:
            new: dict[Key, Stored] = {}
            try:
                self.calls.generate([q for q, _ in missing], new, self.counts)
            finally:
                # Stored even when generation failed part way: what was generated before the
                # failure (earlier calls, and the prompts an engine error says were answered) is
                # not generated again by the rerun.
                self.store.put_many({key: new[q.key] for q, key in missing if q.key in new})
            out.update(new)
        return out

    def _extractions(self, steps: list[FirstStep]) -> dict[Key, Stored]:
        found, missing = stored_extractions(self.ctx, self.store, steps)
        self.counts.awaiting_extraction(missing)
        return found

    def _undecided(self, rest: list[tuple[Request, Planned]], outputs: Mapping[Key, Stored]) -> list[Request]:
        """Adaptive strictness: the requests for the remaining samples of the prompts whose
        first samples (in ``outputs``) are not unanimous."""
        more = []
        for req, plan in rest:
            samples = outputs.get(req.key)
            if samples is None:  # not drawn (a dry pass): the rest waits on them
                self.counts.waiting_on_first(req.n)
            # A request that could not run has nothing more to draw.
            elif not isinstance(samples, str) and not plan.judging.unanimous(plan.record, plan.context, samples):
                more.append(req)
        return more


def stored_extractions(
    ctx: RunContext, store: GenerationStore, steps: list[FirstStep]
) -> tuple[dict[Key, Stored], int]:
    """What ``store`` holds of the steps' statement extractions, by request key, and how many it lacks."""
    requests = extraction_requests(steps)
    if not requests:
        return {}, 0
    extractor = ctx.extractor
    assert extractor is not None  # a first step is the extractor's
    keys = [extractor.store_key(q, ctx.seed) for q in requests]
    found = store.get_many(keys)
    held = {q.key: found[key] for q, key in zip(requests, keys, strict=True) if key in found}
    return held, len(requests) - len(held)


class EngineCalls:
    """A model's engine as a pass generates with it: loaded at the first request that needs it,
    each request run in as few engine calls as possible."""

    def __init__(self, model: JuryModel, seed: int, factory: EngineFactory | None) -> None:
        self.model = model
        self.seed = seed
        self.factory = factory
        self.engine: Engine | None = None

    def load(self, counts: ModelCounts) -> Engine:
        """The model's engine, loaded now if it is not yet (the load counted in ``counts``)."""
        if self.engine is None:
            started = time.perf_counter()
            model = self.model
            self.engine = self.factory(model.spec) if self.factory else load_engine(model.spec, files=model.files)
            counts.loaded(time.perf_counter() - started)
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def generate(self, requests: list[Request], into: dict[Key, Stored], counts: ModelCounts) -> None:
        """Run requests in one engine call per distinct (n, first sample, schema, token budget,
        temperature); identical prompts of a call are generated once. A prompt over the model's
        context gets an error string. ``into`` gets each request's samples as soon as its call
        returns (also what a failing call had answered, see :attr:`EngineError.completed`)."""
        spec = self.model.spec
        engine = self.load(counts)
        prompts = [engine.format_prompt(r.messages) for r in requests]
        lengths = engine.count_tokens(prompts)
        groups: dict[tuple[int, int, str, int, float], list[tuple[Request, str]]] = {}
        length_of = dict(zip(prompts, lengths, strict=True))
        for req, prompt, length in zip(requests, prompts, lengths, strict=True):
            if length + self.model.output_tokens(req.max_tokens) > spec.context_length:
                thinking = f" and thinking {spec.thinking}" if spec.thinking else ""
                into[req.key] = (
                    f"prompt is {length} tokens; with max_tokens {req.max_tokens}{thinking} it exceeds "
                    f"context_length {spec.context_length} of model {spec.name!r}"
                )
                counts.too_long()
                continue
            # A head's requests apart from others and from another head's (its revision names its hash).
            schema = repr(sorted(req.schema.items())) + (f" {req.revision}" if req.head is not None else "")
            group = (req.n, req.first_sample, schema, req.max_tokens, req.temperature)
            groups.setdefault(group, []).append((req, prompt))
        for (n, first_sample, _, budget, temp), members in groups.items():
            # Each prompt once, with its quotable texts: two records can render to one prompt
            # (the neutraliser writes their markers alike) and still hold different texts.
            unique = list(dict.fromkeys((p, req.quotes) for req, p in members))
            prompts_of = [p for p, _ in unique]
            sampling = Sampling(temp, self.model.top_p, budget, self.seed, first_sample)
            # Quotes only when a prompt has some: an engine without quotes never sees them otherwise.
            quoted = [q or () for _, q in unique] if any(q is not None for _, q in unique) else None
            head = members[0][0].head
            call = GenerateCall(prompts_of, n, sampling, members[0][0].schema, quoted)
            started = time.perf_counter()
            try:
                outputs = engine.generate(call) if head is None else [[c] for c in engine.decide(call, head)]
            except EngineError as exc:
                completed: dict[tuple[str, tuple[str, ...] | None], list[Completion]] = {
                    (p, None): samples for p, samples in exc.completed.items()
                }
                counts.drew(list(completed.values()), Usage(0), time.perf_counter() - started)
                _keep(members, completed, into)
                raise
            seconds = time.perf_counter() - started
            usage = getattr(engine, "last_usage", None)  # an engine that does not report: counted here
            if usage is None:
                usage = Usage(sum(length_of[p] for p in prompts_of))
            counts.drew(outputs, usage, seconds)
            _keep(members, dict(zip(unique, outputs, strict=True)), into)


def _keep(
    members: list[tuple[Request, str]],
    by_prompt: Mapping[tuple[str, tuple[str, ...] | None], list[Completion]],
    into: dict[Key, Stored],
) -> None:
    """Put the samples generated for a call's prompts (by prompt and quotable texts) into ``into``."""
    for req, prompt in members:
        if (prompt, req.quotes) in by_prompt:
            into[req.key] = by_prompt[(prompt, req.quotes)]


class DryCalls:
    """What a dry pass generates with: nothing. It counts the requests it is asked (``asked``:
    on the driver of a sharded run, a shard asking none has nothing to send out) and, with a
    ``tokenizer``, their prompts as the engine would take them, each distinct prompt once: over
    the model's context (the run stores an error for it and generates nothing) or to draw, the
    first ``keep`` of those kept as the estimate's ``sample``."""

    def __init__(self, model: JuryModel, seed: int, tokenizer: TokenizerFactory | None = None, keep: int = 0) -> None:
        self.model = model
        self.seed = seed
        self.tokenizer = tokenizer
        self.keep = keep
        self.counter: PromptTokens | Engine | None = None
        self.asked = 0
        self.sample: list[Request] = []

    def generate(self, requests: list[Request], into: dict[Key, Stored], counts: ModelCounts) -> None:
        self.asked += len(requests)
        if self.tokenizer is None:
            return
        if self.counter is None:
            self.counter = self.tokenizer(self.model.spec)
        distinct = list({self.model.store_key(q, self.seed): q for q in requests}.values())
        texts = [self.counter.format_prompt(q.messages) for q in distinct]
        for q, length in zip(distinct, self.counter.count_tokens(texts), strict=True):
            if length + self.model.output_tokens(q.max_tokens) > self.model.spec.context_length:
                counts.too_long()
                continue
            counts.would_draw(q.n, length)
            if len(self.sample) < self.keep:
                self.sample.append(q)

    def close(self) -> None:
        if self.counter is not None:
            self.counter.close()
            self.counter = None


class MemoryStore:
    """Generations in memory: a replica's judgment store for one shard, holding what the
    driver found for it and collecting what the replica generates."""

    def __init__(self, known: Mapping[str, Stored] | None = None) -> None:
        self.known: dict[str, Stored] = dict(known or {})
        self.new: dict[str, Stored] = {}

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        return {k: self.known[k] for k in keys if k in self.known}

    def put_many(self, items: Mapping[str, Stored]) -> None:
        self.known.update(items)
        self.new.update(items)


class ReadOnly:
    """The judgment store as a dry pass sees it: reads go through (and are remembered in
    ``found``, when given one: what a shard's replica will need); nothing is written."""

    def __init__(self, store: GenerationStore, found: dict[str, Stored] | None = None) -> None:
        self.store = store
        self.found = found

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        found = self.store.get_many(keys)
        if self.found is not None:
            self.found.update(found)
        return found

    def put_many(self, items: Mapping[str, Stored]) -> None:
        pass
