"""The settings of a sharded run (``--cluster ray``): where and how wide it goes. A light
module, so that the run's settings (:mod:`localjury.run.config`) hold a cluster without
importing the Ray driver (:mod:`localjury.run.cluster.session`)."""

from __future__ import annotations

from dataclasses import dataclass

from localjury.errors import ConfigError


@dataclass(frozen=True)
class RayCluster:
    """Where and how wide a sharded run goes.

    Args:
        address: A running Ray cluster, HOST:PORT (``ray start --head`` prints it; ``auto``
            finds the one on this machine); an address that refuses connections is an error
            at once. ``None``: ``$RAY_ADDRESS`` if set, else a local Ray started for this run
            and stopped after it. A process already connected to Ray (``ray.init`` done by
            the caller) keeps that connection.
        replicas: Engine replicas per model. Default: as many as the cluster has GPUs for
            (GPUs // GPUs per replica); on CPUs, one per node with all of its cores, or as
            many as fit when ``cpus_per_replica`` is given.
        cpus_per_replica: CPU cores each CPU replica gets (and uses as its thread count).
            Default: the cluster's CPUs divided among ``replicas``, or, when neither is
            given, the cores of the smallest node.
        shard_size: Records per shard. Default: the run's chunk size, lowered so that every
            replica gets at least four shards.
    """

    address: str | None = None
    replicas: int | None = None
    cpus_per_replica: int | None = None
    shard_size: int | None = None

    def __post_init__(self) -> None:
        for name in ("replicas", "cpus_per_replica", "shard_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"cluster {name} must be >= 1, got {value}")
