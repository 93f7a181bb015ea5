"""What a bench takes of a labeled set: a sample drawn by its pairs and groups, and the check that
its records' ids are unique."""

from __future__ import annotations

import random
from pathlib import Path

from localjury.bench.formats import BenchItem
from localjury.errors import ConfigError


def check_unique_ids(items: list[BenchItem], data: str | Path) -> None:
    """Raise ConfigError when two of the records share an id (their judgments would mix).

    Raises:
        ConfigError: A repeated id, named with where both records sit.
    """
    seen: dict[str, BenchItem] = {}
    for it in items:
        if (first := seen.setdefault(it.id, it)) is not it:
            places = f" ({first.location} and {it.location})" if first.location and it.location else ""
            raise ConfigError(f"{data}: record ids are not unique: two records have the id {it.id!r}{places}")


def unit(item: BenchItem) -> str:
    """What a labeled record shares with the records that must never be its examples, nor be on
    the other side of a fold from it: its pair or group, else its user input, else its id."""
    return item.pair or item.group or str(item.record.get("user_input") or f"id:{item.record['id']}")


def sample(items: list[BenchItem], limit: int | None, seed: int) -> list[BenchItem]:
    """At most ``limit`` records, drawn with ``seed``: whole pairs for paired data; for
    grouped data (TruthfulQA) one question at a time, at most two answers each (one of each
    label when it has both), so that many questions are covered. Input order is kept."""
    if limit is None or limit >= len(items):
        return items
    rng = random.Random(seed)
    units: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        units.setdefault(item.pair or (f"g:{item.group}" if item.group else f"i:{i}"), []).append(i)
    chosen: list[int] = []
    keys = list(units)
    rng.shuffle(keys)
    for key in keys:
        members = units[key]
        if key.startswith("g:") and len(members) > 2:
            by_label: dict[int, list[int]] = {}
            for i in members:
                by_label.setdefault(items[i].gold, []).append(i)
            members = sorted(rng.choice(group) for group in by_label.values())[:2]
        if len(chosen) + len(members) > limit:
            if chosen:
                continue
            members = members[:limit]
        chosen.extend(members)
        if len(chosen) >= limit:
            break
    return [items[i] for i in sorted(chosen)]
