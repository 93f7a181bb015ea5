"""A model's pass over the data: look each request up in the judgment store, generate what
is missing in as few engine calls as possible, and commit it chunk by chunk.

A pass loads its engine only when a chunk has something to generate, so a model whose
prompts are all in the store is never loaded. The same :class:`Worker` runs a chunk on this
process, a shard on a replica (with a :class:`MemoryStore`), and a dry pass on the driver of a
sharded run (:class:`Probe`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from localjury.engines.base import Completion, Engine, GenerateCall, Sampling, Usage
from localjury.errors import EngineError, RecordError
from localjury.metrics.judging import Key, Request
from localjury.records.record import Record
from localjury.run.context import Run
from localjury.run.plan import Planned, plan_chunk, read_first_steps
from localjury.run.state import JuryModel, ModelStats
from localjury.store import GenerationStore, Stored


class Worker:
    """One model's pass: loads the engine only when a chunk has something to generate."""

    def __init__(
        self, run: Run, model: JuryModel, store: GenerationStore | None = None, stats: ModelStats | None = None
    ) -> None:
        self.run_ = run
        self.model = model
        self.engine: Engine | None = None
        self.store = store if store is not None else run.store
        self.st = stats if stats is not None else run.stats[model.spec.name]

    def load(self) -> Engine:
        """The model's engine, loaded now if it is not yet (the load counted in its stats)."""
        if self.engine is None:
            t = time.perf_counter()
            self.engine = self.run_.factory(self.model.spec)
            self.st.load_seconds += time.perf_counter() - t
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def run(self, chunk: list[Record | RecordError]) -> None:
        """Look up or generate every request of the chunk for this model."""
        run, model = self.run_, self.model
        plans = plan_chunk(run, chunk, [model], self.first_steps)
        first: list[Request] = []
        rest: list[tuple[Request, Planned]] = []
        for plan in plans:
            for requests in plan.requests.get(model.spec.name, []):
                first.append(requests[0])
                if len(requests) > 1:
                    rest.append((requests[1], plan))
        outputs = self.fetch(first)
        if rest:
            self.fetch(self.undecided(rest, outputs))

    def undecided(self, rest: list[tuple[Request, Planned]], outputs: Mapping[Key, Stored]) -> list[Request]:
        """Adaptive strictness: the requests for the remaining samples of the prompts whose
        first samples (in ``outputs``) are not unanimous."""
        more = []
        for req, plan in rest:
            samples = outputs[req.key]
            # A request that could not run has nothing more to draw.
            if not isinstance(samples, str) and not plan.judging.unanimous(plan.record, plan.context, samples):
                more.append(req)
        return more

    def first_steps(self, requests: list[Request]) -> Mapping[str, Stored]:
        """The statement extractions: generated here on the extractor's own pass, else read."""
        run, extractor = self.run_, self.run_.extractor
        assert extractor is not None
        if extractor is self.model:
            found = self.fetch(requests)
            return {extractor.store_key(q, run.seed): found[q.key] for q in requests}
        return read_first_steps(run, self.store, requests)

    def fetch(self, requests: list[Request]) -> dict[Key, Stored]:
        """Each request's samples: from the store, or generated now and stored."""
        run, model = self.run_, self.model
        keys = [model.store_key(q, run.seed) for q in requests]
        found = {} if run.config.store.fresh else self.store.get_many(keys)
        out: dict[Key, Stored] = {}
        missing: list[tuple[Request, str]] = []
        for q, key in zip(requests, keys, strict=True):
            if key in found:
                out[q.key] = found[key]
                stored = found[key]
                if not isinstance(stored, str):
                    self.st.cached += len(stored)
            else:
                missing.append((q, key))
        if missing:
            new: dict[Key, Stored] = {}
            try:
                self.generate([q for q, _ in missing], new)
            finally:
                # Stored even when generation failed part way: what was generated before the
                # failure (earlier calls, and the prompts an engine error says were answered) is
                # not generated again by the rerun.
                self.store.put_many({key: new[q.key] for q, key in missing if q.key in new})
            out.update(new)
        return out

    def generate(self, requests: list[Request], results: dict[Key, Stored] | None = None) -> dict[Key, Stored]:
        """Run requests in as few engine calls as possible: one per distinct (n, first
        sample, schema, token budget, temperature). Prompts over the model's context come
        back as an error string. Identical prompts of a call are generated once.

        Args:
            requests: What to generate.
            results: Where to put each request's samples as soon as its call returns (also
                filled with what a failing call had answered, see :attr:`EngineError.completed`).
        """
        results = {} if results is None else results
        spec = self.model.spec
        engine = self.load()
        prompts = [engine.format_prompt(r.messages) for r in requests]
        lengths = engine.count_tokens(prompts)
        groups: dict[tuple[int, int, str, int, float], list[tuple[Request, str]]] = {}
        length_of = dict(zip(prompts, lengths, strict=True))
        for req, prompt, length in zip(requests, prompts, lengths, strict=True):
            if length + req.max_tokens > spec.context_length:
                results[req.key] = (
                    f"prompt is {length} tokens; with max_tokens {req.max_tokens} it exceeds "
                    f"context_length {spec.context_length} of model {spec.name!r}"
                )
                continue
            group = (req.n, req.first_sample, repr(sorted(req.schema.items())), req.max_tokens, req.temperature)
            groups.setdefault(group, []).append((req, prompt))
        for (n, first_sample, _, budget, temp), members in groups.items():
            # Each prompt once, with its quotable texts: two records can render to one prompt
            # (the neutraliser writes their markers alike) and still hold different texts.
            unique = list(dict.fromkeys((p, req.quotes) for req, p in members))
            prompts_of = [p for p, _ in unique]
            sampling = Sampling(
                temperature=temp,
                top_p=self.model.top_p,
                max_tokens=budget,
                seed=self.run_.seed,
                first_sample=first_sample,
            )
            # Quotes only when a prompt has some: an engine without quotes never sees them otherwise.
            quoted = [q or () for _, q in unique] if any(q is not None for _, q in unique) else None
            call = GenerateCall(prompts_of, n, sampling, members[0][0].schema, quoted)
            t = time.perf_counter()
            try:
                outputs = engine.generate(call)
            except EngineError as exc:
                self._keep(members, {(p, None): samples for p, samples in exc.completed.items()}, results)
                raise
            finally:
                self.st.generate_seconds += time.perf_counter() - t
            usage = getattr(engine, "last_usage", None)  # an engine that does not report: counted here
            if usage is None:
                usage = Usage(sum(length_of[p] for p in prompts_of))
            self.st.prompt_tokens += usage.prompt_tokens
            self.st.reused_tokens += usage.reused_tokens
            self._keep(members, dict(zip(unique, outputs, strict=True)), results)
        return results

    def _keep(
        self,
        members: list[tuple[Request, str]],
        by_prompt: Mapping[tuple[str, tuple[str, ...] | None], list[Completion]],
        results: dict[Key, Stored],
    ) -> None:
        """Put the samples generated for a call's prompts (by prompt and quotable texts) into
        ``results`` and count them."""
        for req, prompt in members:
            if (prompt, req.quotes) in by_prompt:
                results[req.key] = by_prompt[(prompt, req.quotes)]
        for samples in by_prompt.values():
            self.st.generated += len(samples)
            self.st.output_tokens += sum(c.n_tokens for c in samples)


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


class _Lookups:
    """The judgment store seen by a dry pass: reads go through and are remembered; nothing
    is written."""

    def __init__(self, store: GenerationStore) -> None:
        self.store = store
        self.found: dict[str, Stored] = {}

    def get_many(self, keys: Iterable[str]) -> dict[str, Stored]:
        found = self.store.get_many(keys)
        self.found.update(found)
        return found

    def put_many(self, items: Mapping[str, Stored]) -> None:
        pass


#: What a dry pass puts in place of a generation the store lacks.
NOT_GENERATED = "not generated in the dry pass"


class Probe(Worker):
    """A dry pass of one model over one shard, on the driver of a sharded run: the same
    requests as a real pass, looked up in the store and never generated. ``missing`` counts
    the requests the store lacks (a request that depends on one of them, such as the
    verification of statements not extracted yet, is not reached: the replica finds it);
    ``found`` is what the replica will need from the store."""

    def __init__(self, run: Run, model: JuryModel) -> None:
        self.lookups = _Lookups(run.store)
        super().__init__(run, model, store=self.lookups, stats=ModelStats(model.spec))
        self.missing = 0

    @property
    def found(self) -> dict[str, Stored]:
        return self.lookups.found

    def generate(self, requests: list[Request], results: dict[Key, Stored] | None = None) -> dict[Key, Stored]:
        self.missing += len(requests)
        results = {} if results is None else results
        results.update({q.key: NOT_GENERATED for q in requests})
        return results
