"""What a run checks and opens before any model loads: its metrics, its jury's files, the
records, and the files no output may overwrite. :func:`~localjury.run.pipeline.evaluate`
and :func:`~localjury.run.dry.dry_run` both start here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury.errors import ConfigError, RecordError
from localjury.metrics.base import Metric
from localjury.metrics.judging import Judging, judging_for
from localjury.models.registry import ModelSpec, localjury_home, registry_path
from localjury.records.readers import Dataset
from localjury.records.record import Record
from localjury.run.config import RunConfig
from localjury.run.jury import jury_specs
from localjury.run.state import EngineFactory

if TYPE_CHECKING:
    from localjury.run.cluster.session import RaySession


def prepare(
    records: str | Path | Iterable[Any],
    metrics: Sequence[Metric],
    config: RunConfig,
    session: RaySession | None,
    engine_factory: EngineFactory | None,
) -> tuple[list[ModelSpec], Dataset, list[Judging]]:
    """Check the metrics and the jury (each model's files, unless an engine factory stands in
    for the engines) and open the records: what a run and a dry run do before reading them.

    Raises:
        ConfigError, ModelNotAvailableError: See :func:`~localjury.run.pipeline.evaluate`.
    """
    judgings = check_metrics(metrics, config)
    specs = jury_specs(judgings, config, session)
    if engine_factory is None:
        for spec in specs:
            spec.require_files(spec.engine)  # fail before loading anything, naming the fix
    return specs, Dataset(records), judgings


def check_metrics(metrics: Sequence[Metric], config: RunConfig) -> list[Judging]:
    """How each metric is judged, with the run's settings (the one place a run builds it);
    refuse no metric, a metric of no kind a run can judge, and duplicate names.

    Raises:
        ConfigError: Naming the metric or the duplicate names.
    """
    if not metrics:
        raise ConfigError("no metric to judge: give at least one (`metrics`)")
    judgings = [judging_for(m, config.sampling) for m in metrics]  # a metric of no kind a run can judge
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        raise ConfigError(f"metric names must be unique, got: {', '.join(names)}")
    return judgings


def count_records(dataset: Dataset, config: RunConfig) -> tuple[int, int]:
    """A cheap first pass over the records: how many there are and how many are good.

    Raises:
        RecordError: With ``strict_input``, the first bad record.
    """
    total = good = 0
    for entry in dataset.entries():
        if isinstance(entry, RecordError) and config.input.strict_input:
            raise entry
        total += 1
        good += isinstance(entry, Record)
    return total, good


def protected_files(
    dataset: Dataset,
    cache_path: Path | None,
    config: RunConfig,
    specs: list[ModelSpec],
    inputs: Mapping[str, str | Path],
) -> dict[str, Path | None]:
    """The files no output of the run may overwrite, by what they are: the records, the
    judgment store and its journals, models.yaml, the file-hash memo, each model's files,
    and the other ``inputs`` (a criteria file...)."""
    return {
        "dataset": dataset.path,
        **store_files(cache_path),
        "models.yaml": registry_path(config.jury.registry),
        "file-hash memo": localjury_home() / "file-hashes.json",
        **{f"folder of model {spec.name!r}": spec.local_files() for spec in specs},
        **{what: Path(p) for what, p in inputs.items()},
    }


def store_files(path: Path | None) -> dict[str, Path | None]:
    """The judgment store's file and the journals SQLite keeps beside it, by what they are
    (``path``: the store where a run opens it, :meth:`~localjury.run.config.StoreConfig.path`)."""
    return {
        "judgment store": path,
        **{
            f"judgment store's {suffix} file": Path(f"{path}-{suffix}") if path else None
            for suffix in ("wal", "shm", "journal")
        },
    }
