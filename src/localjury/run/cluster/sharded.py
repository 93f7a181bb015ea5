"""A model's pass sharded over a pool of engine replicas on Ray (the Ray side: :mod:`localjury.run.cluster.session`).

The driver plans each shard once and probes it: the same pass as a local one, with a
:class:`~localjury.run.generate.DryCalls` that answers nothing and a read-only view of the store
(a dry pass). Only shards with something to generate go out, with their plan (the extraction
pass: their statement extractions) and the stored generations they need; each replica holds a
copy of the run's context (its :class:`~localjury.run.config.RunConfig`, metrics and jury), runs
the pass on the plan it is handed and sends back what it generated. What comes back is
committed shard by shard, as a local pass commits its chunks, so resume and cache work the same
way, and the results are those of a local run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from localjury.errors import EngineError
from localjury.metrics.protocol import Request
from localjury.records.readers import Dataset
from localjury.records.record import Record
from localjury.run.context import JuryModel, ModelCounts, RunContext
from localjury.run.generate import DryCalls, EngineCalls, MemoryStore, ModelPass, ReadOnly
from localjury.run.plan import Planned, extraction_requests, first_steps
from localjury.store import Stored

if TYPE_CHECKING:
    from localjury.run.cluster.session import RaySession


@dataclass(frozen=True)
class Shard:
    """What a replica runs: one shard's plan, planned on the driver, and the stored generations it needs."""

    extracting: bool
    """The extraction pass's shard: ``requests`` are its statement extractions."""
    requests: list[Request] = field(default_factory=list)
    plans: list[tuple[int, Record, Any, list[list[Request]]]] = field(default_factory=list)
    """A model's pass: each (record, metric) it asks of the model, as its metric's place among
    the run's judgings (the replica holds the run's own: a judge profile's can be large), the
    record, its context and the model's requests."""
    known: dict[str, Stored] = field(default_factory=dict)


def sharded_pass(
    ctx: RunContext,
    session: RaySession,
    model: JuryModel,
    dataset: Dataset,
    total: int,
    advance: Callable[[int], None],
    *,
    extracting: bool = False,
) -> None:
    """Run one model's pass (``extracting``: the extraction pass) over the data on the session's replicas."""
    name = model.spec.name
    placement = session.placement(model.spec)
    size = session.shard_size(total, ctx.config.input.chunk_size, placement.replicas)
    counts = ctx.counts[name]
    sent: list[list[str]] = []  # the record ids of each shard sent out, in order

    def shards() -> Iterator[tuple[Shard, int]]:
        for chunk in dataset.chunks(size):
            shard, probed = _probe(ctx, model, chunk, extracting)
            if shard is None:
                counts.absorb(probed)
                advance(len(chunk))
                continue
            sent.append([r.id for r in chunk if isinstance(r, Record)])
            yield shard, len(chunk)

    started = time.perf_counter()
    slowest_load = 0.0
    make = partial(ShardWorker, ctx.portable(MemoryStore(), split=placement.split), name)
    from localjury.run.cluster.session import LostShard

    lost = 0
    for output, count in session.map_shards(shards(), make, model.spec, placement):
        if isinstance(output, LostShard):
            ids = sent[output.index]
            ctx.lost.update({(name, i): output.reason for i in ids})
            lost += len(ids)
            advance(count)
            continue
        new, replica_counts = output
        ctx.store.put_many(new)
        slowest_load = max(slowest_load, replica_counts.load_seconds)
        counts.absorb(replica_counts, timings=False)
        advance(count)
    # The replicas load and generate side by side: the pass's wall-clock (less the slowest
    # load) is what judgments/s of a sharded run is measured against.
    counts.sharded(slowest_load, max(0.0, time.perf_counter() - started - slowest_load), session.pool_size, lost)


def _probe(ctx: RunContext, model: JuryModel, chunk: list[Any], extracting: bool) -> tuple[Shard | None, ModelCounts]:
    """Plan a shard once and run the dry pass on it: the shard to send out (None when the store
    holds all it asks), and what the dry pass counted."""
    found: dict[str, Stored] = {}
    calls = DryCalls(model, ctx.seed)
    dry = ModelPass(ctx, model, calls, ReadOnly(ctx.store, found), ModelCounts(model.spec))
    if extracting:
        requests = extraction_requests(first_steps(ctx, chunk))
        dry.fetch(requests)
        return (Shard(True, requests=requests, known=found) if calls.asked else None), dry.counts
    plans = dry.plan(chunk)
    dry.judge(plans)
    if not calls.asked:
        return None, dry.counts
    place = {id(j): i for i, j in enumerate(ctx.judgings)}
    name = model.spec.name
    asked = [(place[id(p.judging)], p.record, p.context, p.requests[name]) for p in plans if p.requests.get(name)]
    return Shard(False, plans=asked, known=found), dry.counts


class ShardWorker:
    """What a replica of a sharded run holds: the run's context and one model's loaded
    engine; it runs the pass on the plan of each shard it is handed.

    Raises:
        EngineError: The replica's copy of the model is not the driver's (other files), or
            the engine fails to load.
    """

    def __init__(self, ctx: RunContext, name: str) -> None:
        model = next(m for m in ctx.models if m.spec.name == name)
        self.ctx = ctx
        self.model = model
        if not model.identity.startswith("unhashed:"):
            from localjury.engines import model_identity

            here = model_identity(model.spec)
            if here != model.identity:
                raise EngineError(
                    f"this replica's model files at {model.spec.location} hash to {here[:12]}, the driver's to "
                    f"{model.identity[:12]}: every node must hold the same weights",
                    engine=model.spec.engine,
                    model=model.spec.name,
                )
        self.calls = EngineCalls(model, ctx.seed, ctx.factory)
        self.first: ModelCounts | None = ModelCounts(model.spec)
        self.calls.load(self.first)  # counted once, with this replica's first shard

    def __call__(self, shard: Shard) -> tuple[dict[str, Stored], ModelCounts]:
        counts, self.first = self.first or ModelCounts(self.model.spec), None
        store = MemoryStore(shard.known)
        shard_pass = ModelPass(self.ctx, self.model, self.calls, store, counts)
        if shard.extracting:
            shard_pass.fetch(shard.requests)
        else:
            name, judgings = self.model.spec.name, self.ctx.judgings
            shard_pass.judge([Planned(r, judgings[i], None, c, {name: q}) for i, r, c, q in shard.plans])
        return store.new, counts
