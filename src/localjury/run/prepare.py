"""What a run settles, checks and opens before any model loads: its metrics and settings
(:func:`settle`), the metrics' judgings, its jury's files, the records, and the files no output
may overwrite. :func:`~localjury.run.pipeline.evaluate`, :func:`~localjury.run.dry.dry_run` and
``localjury run`` all start here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury._files import localjury_home
from localjury.errors import ConfigError, RecordError
from localjury.metrics.base import Metric
from localjury.metrics.checklist import checklist_metrics
from localjury.metrics.kinds import judging_for
from localjury.metrics.profile import JudgeProfile, with_profile
from localjury.metrics.protocol import Judging
from localjury.metrics.rubric_file import rubric_file_metrics
from localjury.models.registry import ModelSpec
from localjury.records.readers import Dataset
from localjury.records.record import Record
from localjury.results._outputs import check_not_input
from localjury.run.config import RunConfig
from localjury.run.context import EngineFactory
from localjury.run.jury import Jury, resolve_jury, resolve_models

if TYPE_CHECKING:
    from localjury.run.cluster.session import RaySession


@dataclass(frozen=True)
class Settled:
    """A run's settings and what it judges, settled once."""

    config: RunConfig
    metrics: list[Metric]
    """The metrics judged, in order: the rubric file's and the judge profile's after the
    others, each checklist as its criteria."""
    inputs: dict[str, str | Path]
    """The files the run depends on beside its records, by what they are: no output may overwrite them."""
    specs: list[ModelSpec]
    """The jury's models, as the registry (or the caller) gives them: resolved first, before
    what they judge (:func:`~localjury.run.jury.resolve_models`)."""


def settle(
    metrics: Sequence[Metric],
    models: Sequence[str | ModelSpec] | None = None,
    *,
    config: RunConfig | None = None,
    inputs: Mapping[str, str | Path] | None = None,
    profile: str | Path | JudgeProfile | None = None,
    rubrics: str | Path | None = None,
    specs: Sequence[ModelSpec] | None = None,
    **settings: Any,
) -> Settled:
    """The run's settings (``models`` and ``settings`` over ``config``), its jury's models (the
    registry read first, unless a judge profile names them; ``specs``: read already, by
    :func:`jury_of`), the metrics it judges (the rubric file's and then the judge profile's
    added; checklists expanded, and with the ``checklist`` setting the Aspect Critics grouped)
    and the files no output may overwrite (the rubric file and the profile added). The
    profile's models are the jury when none is named. Settling settled metrics again changes
    nothing.

    Raises:
        ConfigError: An invalid setting, an unknown model, a model asking to run its own code
            that ``trust_remote_code`` does not name, or a rubric file or profile that cannot be read.
        TypeError: An unknown setting.
    """
    files = dict(inputs or {})
    if models is not None:
        settings["models"] = models
    config = (config or RunConfig()).replace(**settings)
    if specs is None and (profile is None or config.jury.models is not None):
        specs = jury_of(config)
    if rubrics is not None:
        metrics = [*metrics, *rubric_file_metrics(rubrics)]
        files["rubrics file"] = rubrics
    if profile is not None:
        metrics, files, jury = with_profile(profile, metrics, files)
        if specs is None and jury:  # the profile's models are the jury
            config = config.replace(models=jury)
    specs = list(specs) if specs is not None else jury_of(config)
    return Settled(config, checklist_metrics(metrics, config.sampling.checklist), files, specs)


def jury_of(config: RunConfig) -> list[ModelSpec]:
    """The jury's models, as ``config`` names them (:func:`~localjury.run.jury.resolve_models`)."""
    jury = config.jury
    return resolve_models(jury.models, jury.registry, jury.trust_remote_code)


@dataclass(frozen=True)
class Checked:
    """What a run checked before reading its records."""

    judgings: list[Judging]
    """How each metric is judged, in order."""
    jury: Jury


def prepare(settled: Settled, session: RaySession | None, engine_factory: EngineFactory | None) -> Checked:
    """Check the metrics and resolve the jury (each model's files required, unless an engine
    factory stands in for the engines, and hashed): what a run and a dry run do before anything
    else.

    Raises:
        ConfigError, ModelNotAvailableError: See :func:`~localjury.run.pipeline.evaluate`.
    """
    judgings = check_metrics(settled.metrics, settled.config)
    jury = resolve_jury(judgings, settled.config, settled.specs, session, require=engine_factory is None)
    return Checked(judgings, jury)


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
    checked: Checked, records: str | Path | Iterable[Any], cache_path: Path | None, inputs: Mapping[str, str | Path]
) -> dict[str, Path | None]:
    """The files no output of the run may overwrite, by what they are: the records' file (its
    path, as :class:`~localjury.records.readers.Dataset` takes it: refused before the records
    are opened), the judgment store and its journals, models.yaml, the file-hash memo, each
    model's files, and the other ``inputs`` (a criteria file...)."""
    return {
        "dataset": Path(records) if isinstance(records, str | Path) else None,
        **store_files(cache_path),
        **checked.jury.files,
        "file-hash memo": localjury_home() / "file-hashes.json",
        **{what: Path(p) for what, p in inputs.items()},
    }


#: What :func:`store_files` calls the judgment store's files: the inputs a run also writes.
_STORE = "judgment store"


def check_store(inputs: Mapping[str, Path | None], given: Mapping[str, Path | None] | None = None) -> None:
    """Refuse a judgment store whose file (or a journal beside it) is one of the run's other
    ``inputs`` (by path, through links, or as a hard link) or lies in an input folder: a run
    writes its store in place, so ``--cache data.jsonl`` would turn the dataset into SQLite.
    Called with every input before the store opens; ``given``: the caller's inputs too (bench:
    its labels, which the run is given as records).

    Raises:
        ConfigError: Naming the store, the input and the fix.
    """
    inputs = {w: p for named in (given or {}, inputs) for w, p in named.items() if p is not None}
    others = {w: p for w, p in inputs.items() if not w.startswith(_STORE)}
    for what, path in inputs.items():
        if what.startswith(_STORE) and path is not None:
            check_not_input(what, path, others)


def store_files(path: Path | None) -> dict[str, Path | None]:
    """The judgment store's file and the journals SQLite keeps beside it, by what they are
    (``path``: the store where a run opens it, :meth:`~localjury.run.config.StoreConfig.path`)."""
    return {
        _STORE: path,
        **{
            f"{_STORE}'s {suffix} file": Path(f"{path}-{suffix}") if path else None
            for suffix in ("wal", "shm", "journal")
        },
    }
