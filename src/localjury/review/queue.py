"""One review: the file under review indexed, the records it judged, the criteria's wording and
the reviewer's labels; the queue's filters and what the page shows of a row."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from localjury.bench.label_rows import LABEL_FIELDS
from localjury.errors import ConfigError
from localjury.review import source
from localjury.review.labels import LabelBook
from localjury.review.records import Lookup, bench_records, in_background, no_records, records_for
from localjury.review.source import LABELS, PREDICTIONS, RESULTS, Index

#: Below this sureness (the jury's mean probability of a pass within 0.25 of one half) a row is
#: "unsure".
UNSURE = 0.5

#: The queue's filters: name, and what the page calls it.
FILTERS = {
    "all": "all",
    "unlabeled": "unlabeled",
    "labeled": "labeled",
    "disagree": "label ≠ jury",
    "failed": "failed",
    "jury-split": "jury split",
    "votes-split": "votes split",
    "unsure": "unsure",
    "head": "head ≠ votes",
}
SORTS = {"file": "file order", "unsure": "least sure first"}


@dataclass(frozen=True)
class Opened:
    """What a review was opened on, for the page's header and the terminal."""

    path: Path
    kind: str
    labels: Path
    data: Path | None
    """The data set the records are read from; None when not found."""
    why_no_data: str | None
    """Why the records' texts are not shown, when they are not."""


class Review:
    """A file under review and its labels."""

    def __init__(self, path: Path, labels: Path | None = None, data: Path | None = None) -> None:
        self.path = path
        criteria, metric, found, why, bench_format = _context(path, data)
        self.index: Index = source.index(path, metric=metric)
        self.criteria = criteria
        if self.index.kind == LABELS:
            # Reviewed alone, the labels file is the one the labels go to, rewritten at each: the
            # review reads its rows from the file's bytes as opened (compacted first).
            self.labels = LabelBook(labels or path)
            self.index = source.index(path, snapshot=True)
            self.records: Lookup = no_records
        else:
            self.labels = LabelBook(labels or default_labels(path, self.index.kind))
            # Built while the queue is served: the first record's page waits for it.
            if self.index.kind == PREDICTIONS and found is not None and bench_format is not None:
                self.records = in_background(lambda: bench_records(found, bench_format))
            else:
                self.records = in_background(lambda: records_for(found))
        self.opened = Opened(path, self.index.kind, self.labels.path, found, why)

    def metrics(self) -> list[str]:
        """The metrics of the file's rows, in the order first met."""
        return self.index.metrics

    def labeled(self) -> np.ndarray:
        """Each row's label: 1, 0, or -1 where it has none."""
        book = self.labels.labels
        return np.fromiter(
            (book[k]["gold"] if (k := self.index.key(n)) in book else -1 for n in range(len(self.index))),
            dtype=np.int8,
            count=len(self.index),
        )

    def masks(self, metric: str | None) -> dict[str, np.ndarray]:
        """Each filter's rows (under one metric, when given)."""
        ix = self.index
        labeled = self.labeled()
        masks = {
            "all": np.ones(len(ix), dtype=bool),
            "unlabeled": labeled < 0,
            "labeled": labeled >= 0,
            "disagree": (labeled >= 0) & (ix.jury >= 0) & (labeled != ix.jury),
            "failed": (ix.flags & source.FAILED) > 0,
            "jury-split": (ix.flags & source.JURY_SPLIT) > 0,
            "votes-split": (ix.flags & source.VOTES_SPLIT) > 0,
            "unsure": ix.sure < UNSURE,
            "head": (ix.flags & source.HEAD_DISAGREES) > 0,
        }
        if metric is not None and metric in ix.metrics:
            chosen = ix.metric_codes == ix.metrics.index(metric)
            masks = {name: mask & chosen for name, mask in masks.items()}
        return masks

    def queue(self, name: str, sort: str, metric: str | None, masks: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """The row numbers of a filter, in file order or the least sure first (rows without a
        probability last); ``masks``: :meth:`masks` of ``metric`` where the caller has them.

        Raises:
            ConfigError: An unknown filter or sort.
        """
        if name not in FILTERS or sort not in SORTS:
            raise ConfigError(f"unknown filter {name!r} or sort {sort!r}; filters: {', '.join(FILTERS)}")
        rows = np.flatnonzero((masks or self.masks(metric))[name])
        if sort == "unsure":
            sure = np.where(np.isnan(self.index.sure[rows]), np.inf, self.index.sure[rows])
            rows = rows[np.argsort(sure, kind="stable")]
        return rows

    def item(self, n: int) -> dict[str, Any]:
        """Row ``n`` as the page shows it: its judgment, its record, the criterion, its label.

        Raises:
            ConfigError: No row ``n``.
        """
        if not 0 <= n < len(self.index):
            raise ConfigError(f"no row {n} in {self.path} (it has {len(self.index):,})")
        row = self.index.row(n)
        record_id, metric = self.index.key(n)
        record = self.record_of(n, row)
        return {
            "n": n,
            "record_id": record_id,
            "metric": metric,
            "criterion": self.criteria.get(metric) or row.get("criterion"),
            "row": row,
            "models": source.judgments(row) if self.index.kind != LABELS else [],
            "jury": None if self.index.jury[n] < 0 else int(self.index.jury[n]),
            "record": record,
            "label": self.labels.get((record_id, metric)),
        }

    def record_of(self, n: int, row: dict[str, Any]) -> dict[str, Any] | None:
        """The record row ``n`` judged (its fields), or None where the data set is not found."""
        if self.index.kind == LABELS:
            return {k: v for k, v in row.items() if k not in (*LABEL_FIELDS, "gold")}
        return self.records(self.index.record_ids[n])

    def label(self, n: int, gold: int | None, note: str | None) -> dict[str, Any] | None:
        """Label row ``n`` (None: take its label away) and return the label as kept.

        Raises:
            ConfigError: No row ``n``, a gold that is not 0/1/None, or the labels cannot be written.
        """
        item = self.item(n)
        fields = item["record"] or {"id": item["record_id"]}
        label = {**fields, "id": item["record_id"], "metric": item["metric"], "criterion": item["criterion"]}
        return self.labels.put(label, gold, note)


def default_labels(path: Path, kind: str) -> Path:
    """Where a review keeps its labels unless told: a bench folder's ``labels.jsonl``; beside a
    results file, its name with ``.labels.jsonl``."""
    if kind == PREDICTIONS:
        return path.with_name("labels.jsonl")
    return path.with_name(f"{path.stem}.labels.jsonl")


def _context(path: Path, data: Path | None) -> tuple[dict[str, str], str | None, Path | None, str | None, str | None]:
    """What stands beside the file under review: each metric's criterion, the metric of a bench's
    rows, the data set (given, or the one its manifest or metrics.json names), why there is none,
    and a bench's format."""
    figures = path.with_name("metrics.json")
    if path.name == "predictions.jsonl" and figures.is_file():
        try:
            bench = json.loads(figures.read_text(encoding="utf-8"))["benchmark"]
            metric = bench["metric"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"cannot read the bench's {figures}: {exc}") from exc
        found = data or (Path(bench["dataset"]) if Path(bench["dataset"]).exists() else None)
        why = None if found else f"the bench's data set {bench['dataset']} is not found (pass --data)"
        fmt = bench.get("format") if data is None else "jsonl"
        return {metric["name"]: metric.get("description", "")}, metric["name"], found, why, fmt
    from localjury.results.manifest import manifest_path_for
    from localjury.results.verify import read_manifest, recorded_dataset

    manifest_path = manifest_path_for(path)
    if not manifest_path.is_file():
        why = None if data else f"no manifest beside {path.name} names the data set (pass --data)"
        return {}, None, data, why, None
    manifest = read_manifest(manifest_path)
    criteria = {str(m.get("name")): str(m.get("description") or "") for m in manifest.metrics}
    found = data or recorded_dataset(manifest)
    why = None if found else "the data set the manifest names is not found as it was (pass --data)"
    return criteria, None, found, why, None


__all__ = ["FILTERS", "LABELS", "RESULTS", "SORTS", "Review", "default_labels"]
