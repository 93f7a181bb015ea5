"""A model's pass sharded over a pool of engine replicas on Ray (the Ray side: :mod:`localjury.run.cluster.session`).

Each shard is first looked up in the store on the driver (a dry pass: :class:`Probe`);
only shards with something to generate go out, with the stored generations they need and a
copy of the run (its :class:`~localjury.run.config.RunConfig`, metrics and jury). What comes
back is committed shard by shard, as a local pass commits its chunks, so resume and cache
work the same way, and the results are those of a local run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING

from localjury.errors import EngineError
from localjury.records.readers import Dataset
from localjury.records.record import Record
from localjury.run.context import Run
from localjury.run.generate import MemoryStore, Probe, Worker
from localjury.run.state import JuryModel, ModelStats
from localjury.store import Stored

if TYPE_CHECKING:
    from localjury.run.cluster.session import RaySession


def sharded_pass(
    run: Run, session: RaySession, model: JuryModel, dataset: Dataset, total: int, advance: Callable[[int], None]
) -> None:
    """Run one model over the data on the session's replicas."""
    placement = session.placement(model.spec)
    size = session.shard_size(total, run.config.input.chunk_size, placement.replicas)
    stats = run.stats[model.spec.name]
    sent: list[list[str]] = []  # the record ids of each shard sent out, in order

    def shards() -> Iterator[tuple[tuple[list[Record], dict[str, Stored]], int]]:
        for chunk in dataset.chunks(size):
            probe = Probe(run, model)
            probe.run(chunk)
            if not probe.missing:
                stats.absorb(probe.st)
                advance(len(chunk))
                continue
            records = [e for e in chunk if isinstance(e, Record)]
            sent.append([r.id for r in records])
            yield (records, probe.found), len(chunk)

    started = time.perf_counter()
    slowest_load = 0.0
    make = partial(ShardWorker, run.portable(MemoryStore(), split=placement.split), model.spec.name)
    from localjury.run.cluster.session import LostShard

    lost = 0
    for output, count in session.map_shards(shards(), make, model.spec, placement):
        if isinstance(output, LostShard):
            ids = sent[output.index]
            run.lost.update({(model.spec.name, i): output.reason for i in ids})
            lost += len(ids)
            advance(count)
            continue
        new, replica_stats = output
        run.store.put_many(new)
        slowest_load = max(slowest_load, replica_stats.load_seconds)
        stats.absorb(replica_stats, timings=False)
        advance(count)
    # The replicas load and generate side by side: the pass's wall-clock (less the slowest
    # load) is what judgments/s of a sharded run is measured against.
    stats.load_seconds += slowest_load
    stats.generate_seconds += max(0.0, time.perf_counter() - started - slowest_load)
    stats.replicas = max(stats.replicas, session.pool_size)
    stats.lost_records += lost


class ShardWorker:
    """What a replica of a sharded run holds: the run's settings and one model's loaded
    engine; it runs the local pass on each shard it is given.

    Raises:
        EngineError: The replica's copy of the model is not the driver's (other files), or
            the engine fails to load.
    """

    def __init__(self, run: Run, name: str) -> None:
        model = next(m for m in run.models if m.spec.name == name)
        self.run_ = run
        self.model = model
        if not model.identity.startswith("unhashed:"):
            from localjury.results.manifest import model_identity

            here = model_identity(model.spec)
            if here != model.identity:
                raise EngineError(
                    f"this replica's model files at {model.spec.location} hash to {here[:12]}, the driver's to "
                    f"{model.identity[:12]}: every node must hold the same weights",
                    engine=model.spec.engine,
                    model=model.spec.name,
                )
        self.stats = ModelStats(model.spec)
        self.worker = Worker(run, model, store=MemoryStore(), stats=self.stats)
        started = time.perf_counter()
        self.worker.engine = run.factory(model.spec)
        self.load_seconds = time.perf_counter() - started

    def __call__(self, shard: tuple[list[Record], dict[str, Stored]]) -> tuple[dict[str, Stored], ModelStats]:
        records, known = shard
        store = MemoryStore(known)
        self.worker.store = store
        self.worker.st = self.stats = ModelStats(self.model.spec, load_seconds=self.load_seconds)
        self.load_seconds = 0.0  # counted once, with this replica's first shard
        self.worker.run(list(records))
        return store.new, self.stats
