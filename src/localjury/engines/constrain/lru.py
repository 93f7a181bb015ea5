"""A small thread-safe least-recently-used map, bounded by entry count and by total weight: the
in-process caches of compiled indexes, vocabularies, grammars and tokenizer-derived values."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """A thread-safe least-recently-used map bounded by entry count and by total weight.

    Args:
        entries: The most entries kept.
        budget: The most total weight kept (None: only the count bounds it). An entry heavier
            than the whole budget is not kept at all.
    """

    def __init__(self, entries: int, budget: int | None = None) -> None:
        self.entries = entries
        self.budget = budget
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: K, value: V, weight: int = 1) -> None:
        """Keep ``value`` under ``key``, dropping the least recently used beyond the bounds."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            if self.budget is not None and weight > self.budget:
                return
            self._items[key] = (value, weight)
            self._weight += weight
            while len(self._items) > self.entries or (self.budget is not None and self._weight > self.budget):
                self._weight -= self._items.popitem(last=False)[1][1]

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value under ``key``, made and kept if absent (two threads may both make it)."""
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._items.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._items)
