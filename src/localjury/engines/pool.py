"""Engines kept loaded across runs: ``with keep_loaded(): evaluate(...); evaluate(...)``.

A run loads each model's engine when it first has something to generate and closes it when
its pass ends. Inside :func:`keep_loaded`, :func:`localjury.engines.load_engine` hands back
the engine already loaded for the same model entry on the same engine, and a run's close
leaves it loaded; the block's end closes them all. For a notebook, a test session or a
script that runs several evaluations with the same judges: each loads once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localjury.engines.base import Engine
    from localjury.models.registry import ModelSpec

#: The open pools, innermost last: (engines it keeps, or None for all; the loaded engines).
_pools: list[tuple[frozenset[str] | None, dict[tuple[str, str], Engine]]] = []


class _Kept:
    """An engine the pool owns, as a run sees it: everything but ``close`` goes to the engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def close(self) -> None:
        """Nothing: the pool closes the engine when its block ends."""


@contextmanager
def keep_loaded(engines: Collection[str] | None = None) -> Iterator[None]:
    """Keep the engines loaded inside the block until it ends, shared by every run in it.

    Args:
        engines: Only these engines are kept (e.g. ``{"transformers", "llamacpp"}``: vLLM
            reserves its KV memory up front, so keeping several vLLM engines may not fit);
            None keeps all.
    """
    pool: dict[tuple[str, str], Engine] = {}
    _pools.append((frozenset(engines) if engines is not None else None, pool))
    try:
        yield
    finally:
        _pools.remove(next(p for p in _pools if p[1] is pool))
        for engine in pool.values():
            engine.close()


class Pool:
    """Engines kept loaded across blocks that follow one another (a scorer's batches): each
    ``with pool.active():`` block uses the engines the pool holds, loading what it lacks,
    and leaves them loaded; :meth:`close` closes them. Inside a :func:`keep_loaded` block
    already open, that block's pool keeps them instead (one load shared with its runs).

    Args:
        engines: As :func:`keep_loaded`'s.
    """

    def __init__(self, engines: Collection[str] | None = None) -> None:
        self._entry: tuple[frozenset[str] | None, dict[tuple[str, str], Engine]] = (
            frozenset(engines) if engines is not None else None,
            {},
        )

    @contextmanager
    def active(self) -> Iterator[None]:
        """Keep the engines loaded inside the block in this pool (unless another already keeps them)."""
        if _pools:
            yield
            return
        _pools.append(self._entry)
        try:
            yield
        finally:
            _pools.remove(next(p for p in _pools if p is self._entry))

    def close(self) -> None:
        """Close every engine the pool holds (a later block loads them again)."""
        engines = list(self._entry[1].values())
        self._entry[1].clear()
        for engine in engines:
            engine.close()


@contextmanager
def suspended() -> Iterator[None]:
    """Load and close engines as usual inside the block, even inside :func:`keep_loaded`
    (e.g. a test of loading itself)."""
    saved = _pools[:]
    _pools.clear()
    try:
        yield
    finally:
        _pools[:] = saved


def kept(spec: ModelSpec, name: str, load: Callable[[], Engine]) -> Engine:
    """The pooled engine for (``spec``, ``name``), loaded with ``load`` on first use; a plain
    ``load()`` outside any pool that keeps ``name``."""
    if not _pools or (_pools[-1][0] is not None and name not in _pools[-1][0]):
        return load()
    pool = _pools[-1][1]
    key = (name, spec.model_dump_json())
    if key not in pool:
        pool[key] = load()
    return _Kept(pool[key])  # type: ignore[return-value]
