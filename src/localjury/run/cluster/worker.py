"""The Ray side of a sharded run: the replica actor that runs shards, how its errors travel
back to the driver, and the checks before connecting (see :mod:`localjury.run.cluster.session`)."""

from __future__ import annotations

import os
import pickle
import socket
import sys
import traceback
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from localjury.errors import ConfigError, EngineError, LocaljuryError

if TYPE_CHECKING:
    import pyarrow as pa

    from localjury.models.registry import ModelSpec

#: Seconds to wait for a cluster address to accept a connection before giving up.
CONNECT_TIMEOUT_S = 5.0


class ShardFn(Protocol):
    """What a replica runs: one shard (its plan and the stored generations it needs) in, the
    new generations and the replica's counters out."""

    def __call__(self, shard: Any) -> Any: ...


class _Replica:
    """One Ray Data actor: a loaded engine applied to each shard it is given."""

    def __init__(self, make: Callable[[], ShardFn], threads: int | None) -> None:
        if threads is not None:
            # Before the engine loads (vLLM's CPU worker fixes its thread count then): a CPU
            # replica uses the cores Ray gave it, not every core of the node.
            # torch reads OMP_NUM_THREADS when it is imported, llama.cpp when its engine loads
            # (engines/native/cpu.compute_threads); a replica that has already imported torch
            # is told directly (one that never needs torch, on llama.cpp, never imports it:
            # seconds of each replica's start).
            os.environ["OMP_NUM_THREADS"] = str(threads)
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.set_num_threads(threads)
        self.fn = make()

    def __call__(self, batch: pa.Table) -> pa.Table:
        import pyarrow as pa

        results: list[bytes | None] = []
        errors: list[bytes | None] = []
        for payload in batch.column("shard").to_pylist():
            try:
                results.append(pickle.dumps(self.fn(pickle.loads(zlib.decompress(payload)))))
                errors.append(None)
            except Exception as exc:  # back to the driver as data: it raises it, the pass stops
                results.append(None)
                errors.append(_pickled_error(exc))
        return pa.table(
            {
                "index": batch.column("index"),
                "result": pa.array(results, pa.binary()),
                "error": pa.array(errors, pa.binary()),
                "records": batch.column("records"),
            }
        )


def _pickled_error(exc: Exception) -> bytes:
    """A localjury error pickled as itself; any other as a RuntimeError holding the
    replica's traceback (it need not pickle, and the driver's traceback would not show it)."""
    if isinstance(exc, LocaljuryError):
        try:
            return pickle.dumps(exc)
        except Exception:
            pass
    return pickle.dumps(RuntimeError(traceback.format_exc().rstrip()))


def _replica_error(exc: BaseException, spec: ModelSpec) -> BaseException:
    if isinstance(exc, LocaljuryError):
        return exc
    error = EngineError(f"a Ray replica failed: {_last_line(exc)}", engine=spec.engine, model=spec.name)
    error.__cause__ = exc
    return error


def _check_reachable(address: str | None) -> None:
    """Fail fast on a cluster address nobody answers at: Ray itself retries for minutes.

    Raises:
        ConfigError: Nothing accepts a connection at the address's host and port.
    """
    if not address or address in ("auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"Ray cluster address {address!r} is not HOST:PORT (or auto); e.g. 10.0.0.1:6379")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster answers at {address} ({exc.strerror or exc}); start one with `ray start --head` "
            "there, or fix `address`"
        ) from None


def _placement_group(gpus: int) -> dict[str, Any]:
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    group = ray.util.placement_group([{"GPU": 1, "CPU": 1}] * gpus, strategy="PACK")
    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(group, placement_group_capture_child_tasks=True)}


def _our_error(exc: BaseException) -> LocaljuryError | None:
    """The localjury error a replica raised, out of Ray's wrappers (``RayTaskError`` and
    Ray Data's exceptions chain it as ``cause`` / ``__cause__``)."""
    todo: list[BaseException | None] = [exc]
    seen: set[int] = set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, LocaljuryError):
            return e
        todo += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return None


def _last_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[-1] if lines else type(exc).__name__
