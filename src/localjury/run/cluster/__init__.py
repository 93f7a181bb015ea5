"""The settings of a sharded run (``--cluster ray``): where and how wide it goes. A light
module, so that the run's settings (:mod:`localjury.run.config`) hold a cluster without
importing the Ray driver (:mod:`localjury.run.cluster.session`)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field

from localjury._setting_bounds import Bounded


class RayCluster(Bounded):
    """Where and how wide a sharded run goes. An address that refuses connections is an error at
    once; a process already connected to Ray (``ray.init`` done by the caller) keeps that
    connection. Each field's docstring is also the help of its option beside ``--cluster ray``
    (:mod:`localjury.cli._settings` derives the options from the fields, their ranges from the
    constraints)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    _setting_prefix: ClassVar[str] = "cluster "

    address: str | None = None
    """The Ray cluster to join: HOST:PORT, as `ray start --head` prints it, or auto (the one on this
    machine). Default: $RAY_ADDRESS, else a local Ray for this run, stopped after it."""
    replicas: int | None = Field(None, ge=1)
    """Engine replicas per model. Default: one per GPU (or per GPU set of a split model); on CPUs, one
    per node (or as many as fit `cpus_per_replica`)."""
    cpus_per_replica: int | None = Field(None, ge=1)
    """CPU cores (threads) per CPU replica. Default: the cluster's CPUs shared among `replicas`, else
    all cores of the smallest node."""
    shard_size: int | None = Field(None, ge=1)
    """Records per shard. Default: the run's chunk size, lowered so that every replica gets at least
    four shards."""
