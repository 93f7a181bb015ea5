"""Sharded runs on Ray (``--cluster ray``): one model pass over a pool of engine replicas.

Needs the ``ray`` extra (``pip install 'localjury[ray]'``); nothing here imports Ray before
:class:`RaySession` opens one, so a run without ``--cluster`` never loads it.

How one pass goes (the statement extraction, then a jury's models one by one, each pass on its
own pool):

1. The driver (run/cluster/sharded.py) reads the records with localjury's own reader (the same ids, per-record errors
   and duplicate check as a local run), cuts them into shards, plans each shard once and looks
   its prompts up in the judgment store. A shard with nothing to generate is done there; each
   of the others goes into Ray's object store with its plan and the stored generations it needs.
2. Ray Data carries the shards (``from_items``, a row per block) through ``map_batches`` into a fixed
   actor pool: one replica per GPU (per ``tensor_parallel_size x pipeline_parallel_size``
   GPUs, in a placement group, when a model is split), or CPU actors with ``cpus_per_replica``
   cores each. A replica loads the model once, checks that its files hash to what the
   driver hashed, and runs the same pass a local run does on each shard's plan.
3. Each shard's new generations stream back to the driver, which commits them to the
   judgment store as they arrive (so a killed run resumes, as a local one does); the results
   are then assembled exactly as in a local run. A replica whose process dies is restarted
   and its shard tried again, ``SHARD_ATTEMPTS`` times in all; a shard that kills it every
   time comes back as a :class:`LostShard` (its records get no verdict, a rerun tries
   again), and too many lost shards abandon the pass.

Same results: both engines seed every sample from (run seed, prompt, sample index), and the
store keys name no shard, replica or node, so how the records are sharded cannot change a
sample (see docs/ray.md for what is and is not guaranteed).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from localjury.engines._catalog import gpus_per_replica
from localjury.errors import ConfigError, EngineError, LocaljuryError, MissingDependencyError
from localjury.run.cluster import RayCluster
from localjury.run.cluster.worker import (
    ShardFn,
    _check_reachable,
    _last_line,
    _our_error,
    _placement_group,
    _Replica,
    _replica_error,
)

if TYPE_CHECKING:
    from localjury.models.registry import ModelSpec

INSTALL = "pip install 'localjury[ray]'"
#: Shards per replica a pass is cut into at least (smaller shards when the data is small),
#: so that every replica gets work and a slow shard does not hold the others back.
SHARDS_PER_REPLICA = 4
#: Times a shard is tried when its replica's process dies under it (killed for memory, a
#: crash in the engine, a lost node); Ray restarts the replica before each new try. Ray
#: Data's default is to retry forever, so one shard that always kills its replica hung a run.
SHARD_ATTEMPTS = 3
#: Share of a pass's shards that may be lost (every try died) before the pass is abandoned:
#: a few lost shards are a few records the engine cannot take (their results say so, the
#: others are kept); many are a replica that cannot run at all.
LOST_SHARDS_TOLERATED = 0.1


@dataclass(frozen=True)
class LostShard:
    """A shard whose replica's process died on every try: its place in the order the shards
    were given (0 for the first), and why."""

    index: int
    reason: str


@dataclass(frozen=True)
class Placement:
    """How one model's replicas are placed."""

    replicas: int
    gpus_per_replica: int
    """0 for CPU replicas."""
    cpus_per_replica: int
    split: bool
    """The model is split over several GPUs (tensor/pipeline parallel): vLLM's Ray executor
    places its workers in a placement group per replica."""


def require_ray() -> Any:
    """Import Ray (and Ray Data), or say which extra installs it."""
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise MissingDependencyError(
            f"a Ray `cluster` needs Ray and Ray Data ({exc.name!r} is missing): {INSTALL}"
        ) from exc
    return ray


class RaySession:
    """A connection to a Ray cluster for one run.

    Args:
        cluster: Where to connect and how many replicas to use.

    Raises:
        MissingDependencyError: Ray is not installed.
        ConfigError: The cluster cannot be reached.
    """

    def __init__(self, cluster: RayCluster) -> None:
        self.cluster = cluster
        # Ray's usage statistics would be sent over the network: off (no network at run time).
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray = require_ray()
        self.started = False
        if not ray.is_initialized():
            _check_reachable(cluster.address)
            try:
                ray.init(
                    address=cluster.address,
                    include_dashboard=False,
                    logging_level=logging.ERROR,  # the replicas' own logs still reach the driver
                    log_to_driver=True,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(
                    f"cannot start or reach a Ray cluster at {cluster.address or 'local'}: {exc}"
                ) from None
            self.started = True
        from ray.data import DataContext

        ctx = DataContext.get_current()
        ctx.enable_progress_bars = False  # localjury shows its own progress
        ctx.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        resources = ray.cluster_resources()
        self.gpus = int(resources.get("GPU", 0))
        self.cpus = int(resources.get("CPU", 0))
        self.node_cpus = [int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
        """The CPUs of each live node (CPU replicas are sized to fit on one)."""
        self.pool_size = 0
        """Replicas of the last pool :meth:`map_shards` started (0: no shard needed one)."""

    def close(self) -> None:
        """Disconnect; a local Ray this session started is shut down."""
        if self.started:
            import ray

            ray.shutdown()
            self.started = False

    def resolve_engine(self, spec: ModelSpec, override: str | None) -> str:
        """The engine a model's replicas run: like a local run's ``auto``, but decided by the
        cluster's GPUs, not the driver's (a head node often has none).

        Raises:
            ConfigError: A model on a server (a sharded run has nothing to shard for it).
        """
        from localjury.engines import resolve_engine
        from localjury.engines._auto import native_engine

        if spec.is_served:
            raise ConfigError(
                f"model {spec.name!r} is served at {spec.base_url}: a sharded run (`cluster`) has nothing to shard "
                "for it (its server batches the requests itself); run it without `cluster`"
            )
        name = override or spec.engine
        if name == "auto":
            # The local rule (the engine of the model's files), with the cluster's GPUs: a
            # GGUF-only model runs on llamacpp replicas, where transformers could not load it.
            return native_engine(spec, gpu=self.gpus > 0)
        return resolve_engine(spec, name)

    def placement(self, spec: ModelSpec) -> Placement:
        """How many replicas of ``spec`` run, and what each takes.

        Raises:
            ConfigError: The cluster has too few GPUs or CPUs for one replica, or for the
                replicas asked for.
        """
        c = self.cluster
        per = gpus_per_replica(spec)
        if per is not None and self.gpus > 0:
            replicas = c.replicas or self.gpus // per
            if replicas < 1 or replicas * per > self.gpus:
                raise ConfigError(
                    f"model {spec.name!r}: {c.replicas or 1} replica(s) x {per} GPU(s) need "
                    f"{(c.replicas or 1) * per} GPUs; the Ray cluster has {self.gpus}"
                )
            return Placement(replicas, per, c.cpus_per_replica or 1, split=per > 1)
        if self.cpus < 1:
            raise ConfigError("the Ray cluster has no CPUs to run replicas on")
        nodes = [n for n in self.node_cpus if n > 0] or [self.cpus]
        if c.replicas is not None:
            # A replica lives on one node: never more cores than the largest node has.
            cpus = c.cpus_per_replica or max(1, min(max(nodes), self.cpus // c.replicas))
            replicas = c.replicas
        elif c.cpus_per_replica is not None:
            cpus = c.cpus_per_replica
            replicas = max(1, sum(n // cpus for n in nodes))
        else:
            # One replica per node with every core: what one process per machine would do. A
            # replica per core would hold a copy of the model per core, which only tiny models
            # afford; --replicas / --replica-cpus choose that.
            cpus = min(nodes)
            replicas = len(nodes)
        if replicas * cpus > self.cpus:
            raise ConfigError(
                f"model {spec.name!r}: {replicas} replica(s) x {cpus} CPU(s) need {replicas * cpus} CPUs; "
                f"the Ray cluster has {self.cpus}"
            )
        if sum(n // cpus for n in nodes) < replicas:  # Ray would wait for them forever
            raise ConfigError(
                f"model {spec.name!r}: {replicas} replica(s) of {cpus} CPU(s) do not fit on the Ray cluster's "
                f"nodes ({', '.join(map(str, nodes))} CPUs); lower `cpus_per_replica` or `replicas`"
            )
        return Placement(replicas, 0, cpus, split=False)

    def shard_size(self, records: int, chunk_size: int, replicas: int) -> int:
        """Records per shard for a pass over ``records`` records on ``replicas`` replicas."""
        if self.cluster.shard_size is not None:
            return self.cluster.shard_size
        return max(1, min(chunk_size, math.ceil(records / (replicas * SHARDS_PER_REPLICA))))

    def map_shards(
        self,
        shards: Iterable[tuple[Any, int]],
        make_replica: Callable[[], ShardFn],
        spec: ModelSpec,
        placement: Placement,
    ) -> Iterator[tuple[Any, int]]:
        """Run every shard on a pool of replicas; yield (its output, its record count) as each
        shard finishes, in whatever order they finish, and at the end a :class:`LostShard`
        in place of the output for each shard whose replica died on all its tries.

        ``shards`` yields (payload, record count); ``make_replica`` builds the function a
        replica applies to each payload (it loads the engine: it runs once per replica).

        Raises:
            EngineError: A replica failed to load its model or to generate, or replicas died
                on more than ``LOST_SHARDS_TOLERATED`` of the shards.
        """
        rows, counts = _shard_rows(shards)
        self.pool_size = min(placement.replicas, len(rows))
        if not rows:
            return
        ds = _replica_dataset(rows, make_replica, placement, self.pool_size)
        # A shard whose every try died is dropped by Ray Data (and logged), up to this many;
        # one more abandons the pass. An error raised in a replica comes back as data
        # (_Replica.__call__) and is raised by _shard_outputs, as a local run raises it.
        ds.context.max_errored_blocks = max(1, int(len(rows) * LOST_SHARDS_TOLERATED))
        done: set[int] = set()
        yield from _shard_outputs(ds, spec, done)
        yield from _lost_shards(counts, done)


def _shard_rows(shards: Iterable[tuple[Any, int]]) -> tuple[list[dict[str, Any]], list[int]]:
    """Each shard as a row (its index, pickled and compressed payload, and record count), and
    the record counts, in order. A shard's plan repeats each metric's instructions in every
    prompt: compressed, it is smaller than its records (1,000 records judged on 2 criteria:
    2.6 MB, 71 KB compressed)."""
    rows: list[dict[str, Any]] = []
    counts: list[int] = []
    for i, (payload, count) in enumerate(shards):
        rows.append({"index": i, "shard": zlib.compress(pickle.dumps(payload), 1), "records": count})
        counts.append(count)
    return rows, counts


def _actor_options(placement: Placement) -> dict[str, Any]:
    """The Ray options of each replica: its restarts and retries, and the GPUs and CPUs it takes."""
    remote: dict[str, Any] = {
        # Ray restarts a replica whose process dies and retries its shard there, a bounded
        # number of times (Ray Data's default would retry forever).
        "max_restarts": -1,
        "max_task_retries": SHARD_ATTEMPTS - 1,
    }
    if placement.split:
        # As Ray Data's own vLLM stage does: the actor takes no GPU itself; vLLM's Ray
        # executor starts one worker per GPU inside this replica's placement group.
        remote["num_gpus"] = 0
        remote["ray_remote_args_fn"] = partial(_placement_group, placement.gpus_per_replica)
    elif placement.gpus_per_replica:
        remote["num_gpus"] = placement.gpus_per_replica
    remote["num_cpus"] = placement.cpus_per_replica
    return remote


def _replica_dataset(
    rows: list[dict[str, Any]], make_replica: Callable[[], ShardFn], placement: Placement, pool_size: int
) -> Any:
    """The Ray dataset that runs the shard ``rows`` through a pool of ``pool_size`` replicas,
    one row per block (``from_items`` puts each block into the object store and reads its
    metadata on the driver; ``from_arrow_refs`` sent a task per block to read it, about 3 s of
    each pass on one core)."""
    import ray
    from ray.data import ActorPoolStrategy

    remote = _actor_options(placement)
    threads = None if placement.gpus_per_replica else placement.cpus_per_replica
    with warnings.catch_warnings():
        # Ray 2.60 deprecates passing actor options this way (removal announced for 2.64,
        # hence the pin in pyproject.toml) and has no named parameter for them yet; the
        # warning is for us, not for the user running a judgment.
        warnings.filterwarnings("ignore", message="`ray_remote_args(_fn)?` is deprecated")
        return ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
            _Replica,
            fn_constructor_kwargs={"make": make_replica, "threads": threads},
            batch_size=None,  # one block = one shard = one batch
            batch_format="pyarrow",
            # One shard at a time per replica: when a replica dies only the shard it was
            # running spends a try (with two in flight, a shard queued behind a poison one
            # died with it each time and was lost too: seen in about 1 test run in 5).
            compute=ActorPoolStrategy(size=pool_size, max_tasks_in_flight_per_actor=1),
            **remote,
        )


def _shard_outputs(ds: Any, spec: ModelSpec, done: set[int]) -> Iterator[tuple[Any, int]]:
    """Yield (output, record count) of each shard as it comes back, adding its index to ``done``;
    raise a replica's error as a local run raises it."""
    try:
        for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
            columns = (batch.column(c).to_pylist() for c in ("index", "result", "error", "records"))
            for index, result, error, count in zip(*columns, strict=True):
                if error is not None:
                    raise _replica_error(pickle.loads(error), spec)
                done.add(index)
                yield pickle.loads(result), int(count)
    except LocaljuryError:
        raise
    except Exception as exc:
        found = _our_error(exc)
        if found is not None:
            raise found from exc  # the replica's own error, as a local run raises it
        raise EngineError(f"a Ray replica failed: {_last_line(exc)}", engine=spec.engine, model=spec.name) from exc


def _lost_shards(counts: list[int], done: set[int]) -> Iterator[tuple[LostShard, int]]:
    """Yield a :class:`LostShard` and its record count for each shard not in ``done``."""
    reason = (
        f"the replica's process died on each of {SHARD_ATTEMPTS} tries at this record's shard (killed for "
        "memory, or a crash in the engine: see Ray's log); nothing was stored for it, a rerun tries again"
    )
    for index, count in enumerate(counts):
        if index not in done:
            yield LostShard(index, reason), count
