"""evaluate(): a run as a list of stages.

A run streams the dataset in chunks of ``chunk_size`` records and goes model by model (the
extractor of the composite metrics first): for each chunk, every prompt the model has not
already answered goes into ONE engine call per distinct (strictness, schema, token budget)
with n = strictness, and what it generated is committed to the judgment store before the
next chunk (see :mod:`localjury.store`). A model whose prompts are all in the store is not
even loaded. Models run one after another in this process, so a jury needs the memory of
one model. A last pass reads the store chunk by chunk, parses, votes and streams the
results out: memory stays bounded by the chunk, not the dataset.

Because a generation is keyed by its content and sampled from seeds derived from (run
seed, prompt, sample index), a run killed at any point and run again — or run with one
criterion changed — generates only what is missing and gives the same results.

The stages and their modules: settings (:mod:`.config`), checks before any model loads
(:mod:`.prepare`), requests (:mod:`.plan`, through each metric's judging,
:mod:`localjury.metrics.judging`), model passes (:mod:`.generate`, or :mod:`.sharded` on Ray),
results (:mod:`.assemble`), summary (:mod:`.summary`), files (:mod:`.result`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury.engines import load_engine
from localjury.errors import CommitError, ConfigError
from localjury.metrics.base import Metric
from localjury.metrics.checklist import checklist_metrics
from localjury.metrics.judging import Judging
from localjury.metrics.profile import JudgeProfile, with_profile
from localjury.metrics.rubric_file import rubric_file_metrics
from localjury.models.registry import ModelSpec
from localjury.records.readers import Dataset, is_saved_dataset
from localjury.results._outputs import OutputSet
from localjury.results.manifest import build_manifest, dataset_record, model_record
from localjury.run.assemble import assemble_all
from localjury.run.cluster.sharded import sharded_pass
from localjury.run.config import RunConfig
from localjury.run.context import Run
from localjury.run.generate import Worker
from localjury.run.jury import jury_models
from localjury.run.prepare import count_records, prepare, protected_files
from localjury.run.result import RunResult, commit, output_paths
from localjury.run.state import EngineFactory, JuryModel
from localjury.run.summary import summarize
from localjury.store import JudgmentStore

if TYPE_CHECKING:
    from rich.progress import Progress

    from localjury.run.cluster.session import RaySession


def evaluate(
    records: str | Path | Iterable[Any],
    metrics: Sequence[Metric],
    models: Sequence[str | ModelSpec] | None = None,
    *,
    config: RunConfig | None = None,
    out: str | Path | None = None,
    summary: str | Path | None = None,
    inputs: Mapping[str, str | Path] | None = None,
    command: list[str] | None = None,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    output_set: OutputSet | None = None,
    profile: str | Path | JudgeProfile | None = None,
    rubrics: str | Path | None = None,
    **settings: Any,
) -> RunResult:
    """Judge every record on every metric with every model, and vote.

    Args:
        records: A dataset path (JSONL, JSON, CSV, Parquet, or a folder Hugging Face
            ``datasets``' ``save_to_disk`` wrote), a ``datasets.Dataset``, a RAGAS
            ``EvaluationDataset`` (or any object whose ``samples`` have its fields), or records
            as dicts/``Record``, read chunk by chunk (see :func:`localjury.records.readers.record_reader`).
        metrics: What to judge, e.g. ``[AspectCritic("dated", "The response includes a year."),
            Faithfulness()]``.
        models: Judge model names from models.yaml (or specs); default ``qwen2.5-coder-1.5b-instruct``.
        config: The run's settings (default: :class:`~localjury.run.config.RunConfig`'s defaults).
        out: Stream the results to this JSONL file with its summary and manifest beside it,
            and keep none in memory; the three files are committed together at the end (see
            :mod:`localjury.results._commit`). An output path that is a folder, cannot be written, or
            resolves to an input or to another output is refused before any model loads.
        summary: The summary JSON (default: ``<out stem>.summary.json``); only with ``out``.
        inputs: Other files the run depends on (e.g. a criteria file), by what they are:
            no output may overwrite them.
        command: The command line, for the manifest.
        progress: A rich ``Progress`` to show each model's pass in.
        engine_factory: Build an engine from a spec (default: the registry's engine).
        output_set: The files the caller writes from the results (``bench``, ``calibrate``),
            an open :class:`~localjury.results._outputs.OutputSet`: checked against the run's inputs
            before any model loads, like ``out``; the caller writes and commits them. Not with ``out``.
        profile: A judge profile (its YAML file, or a :class:`~localjury.metrics.profile.JudgeProfile`)
            from ``localjury align``: its criterion is judged too, each record shown its nearest
            labeled examples; its models are the jury when none is named.
        rubrics: A rubric file (YAML: named, versioned criteria and rubrics, see
            :mod:`localjury.metrics.rubric_file`): its metrics are judged after ``metrics``.
        **settings: Settings that replace ``config``'s, by name: ``seed``, ``strictness``,
            ``tie_break``, ``temperature``, ``max_tokens``, ``adaptive``, ``checklist`` (sampling);
            ``cache``, ``use_cache``, ``fresh`` (the judgment store); ``strict_input``,
            ``on_overflow``, ``chunk_size`` (input); ``registry``, ``engine``, ``extractor``,
            ``trust_remote_code`` (the jury); ``cluster`` (a :class:`localjury.RayCluster`: shard
            each model's pass over engine replicas on Ray). Each is documented on its field of
            :class:`~localjury.run.config.RunConfig`.

    Returns:
        The results, one per (record, metric) in input order, and the run summary.

    Raises:
        ConfigError: No metric, duplicate names, unknown model, invalid settings, an output
            path refused or being written by another process.
        CommitError: The file system failed part way through renaming the files into place:
            says which files are new and which are the previous ones.
        ModelNotAvailableError: A model's weights are not on this machine (before any loads).
        RecordError: With ``strict_input``, the first bad record.
        KeyboardInterrupt, or any error after generation started: re-raised with a note
            (``exc.__notes__``) saying how many judgments the store kept and where.
        MissingDependencyError: ``cluster`` without Ray installed, or an engine's packages.
        EngineError: A model failed to load or generate (on a replica, too).
        TypeError: An unknown setting.
    """
    config, metrics, inputs = _settle(metrics, models, config, inputs, profile, rubrics, settings)
    session = _ray_session(config)
    try:
        wiring = _Wiring(out, summary, inputs, command, progress, engine_factory, output_set, session)
        return _evaluate(records, metrics, config, wiring)
    finally:
        if session is not None:
            session.close()


def _settle(
    metrics: Sequence[Metric],
    models: Sequence[str | ModelSpec] | None,
    config: RunConfig | None,
    inputs: Mapping[str, str | Path] | None,
    profile: str | Path | JudgeProfile | None,
    rubrics: str | Path | None,
    settings: dict[str, Any],
) -> tuple[RunConfig, list[Metric], Mapping[str, str | Path] | None]:
    """The run's config, the metrics it judges and the files no output may overwrite: ``models``
    and ``settings`` over ``config``; the rubric file's and then the judge profile's metrics and
    files added (the profile's models are the jury when none is named); checklists expanded."""
    if models is not None:
        settings["models"] = models
    if rubrics is not None:
        metrics = [*metrics, *rubric_file_metrics(rubrics)]
        inputs = {**(inputs or {}), "rubrics file": rubrics}
    if profile is not None:
        metrics, inputs, jury = with_profile(profile, metrics, inputs)
        if jury and "models" not in settings and (config is None or config.jury.models is None):
            settings["models"] = jury
    config = (config or RunConfig()).replace(**settings)
    return config, checklist_metrics(metrics, config.sampling.checklist), inputs


def _ray_session(config: RunConfig) -> RaySession | None:
    """A session on the run's Ray cluster, or None for a run on this machine (Ray not imported)."""
    if config.cluster is None:
        return None
    from localjury.run.cluster.session import RaySession

    return RaySession(config.cluster)


class _Wiring:
    """What a call of evaluate() connects the run to, beside its settings."""

    def __init__(
        self,
        out: str | Path | None,
        summary: str | Path | None,
        inputs: Mapping[str, str | Path] | None,
        command: list[str] | None,
        progress: Progress | None,
        engine_factory: EngineFactory | None,
        output_set: OutputSet | None,
        session: RaySession | None,
    ) -> None:
        if output_set is not None and out is not None:
            raise ConfigError("give `out` or `output_set`, not both: a run writes one set of files")
        self.outputs = output_paths(out, summary)
        self.inputs = inputs or {}
        self.command = command
        self.progress = progress
        self.engine_factory = engine_factory
        self.output_set = output_set
        self.session = session
        self.started = time.perf_counter()
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")


def _evaluate(
    records: str | Path | Iterable[Any],
    metrics: Sequence[Metric],
    config: RunConfig,
    wiring: _Wiring,
) -> RunResult:
    specs, dataset, judgings = prepare(records, metrics, config, wiring.session, wiring.engine_factory)
    protected = protected_files(dataset, config.store.path(), config, specs, wiring.inputs)
    if wiring.output_set is not None:  # the caller's files (bench, calibrate): checked here, written there
        wiring.output_set.check(protected)
        return _judge(records, judgings, config, wiring, specs, dataset, None)
    with OutputSet(wiring.outputs, protected) as files:
        return _judge(records, judgings, config, wiring, specs, dataset, files)


def _judge(
    records: str | Path | Iterable[Any],
    judgings: list[Judging],
    config: RunConfig,
    wiring: _Wiring,
    specs: list[ModelSpec],
    dataset: Dataset,
    files: OutputSet | None,
) -> RunResult:
    """Everything after the checks: the model passes, the results, and (with ``files``) the
    results, summary and manifest committed together."""
    cache_path = config.store.path()
    # Hashed before it is read, and checked again at the end: the manifest describes the
    # data the run judged, or the run fails.
    on_disk = dataset.path is not None and (dataset.path.is_file() or is_saved_dataset(dataset.path))
    dataset_before = dataset_record(dataset.path) if on_disk and dataset.path is not None else None
    total, good = count_records(dataset, config)
    manifests = [model_record(spec) for spec in specs]
    jury, extractor = jury_models(specs, manifests, judgings, config)

    tmpdir = None if cache_path is not None else Path(tempfile.mkdtemp(prefix="localjury-"))
    store_path = cache_path or Path(tmpdir or ".") / "judgments.sqlite"
    try:
        store = JudgmentStore(store_path)
    except BaseException:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    factory = wiring.engine_factory or load_engine
    run = Run(config, judgings, jury, extractor, store, factory, wiring.progress, wiring.session)
    failed = True
    try:
        if good:  # nothing to judge (empty dataset, or every record bad): load no model
            for model in jury_order(run):
                model_pass(run, model, dataset, total)
        outputs = wiring.outputs if files is not None else {}
        results_file = files.file(outputs["results file"]) if files is not None and outputs else None
        results, acc = assemble_all(run, dataset, results_file)
        if dataset_before is not None and dataset_record(Path(dataset_before["path"])) != dataset_before:
            raise ConfigError(
                f"the dataset {dataset.path} changed while this run read it; nothing was written. "
                "Run again once it no longer changes (what was judged is in the judgment store)"
            )
        dataset_name = str(records) if isinstance(records, str | Path) else None
        seconds = time.perf_counter() - wiring.started
        run_summary = summarize(
            run, acc, total, total - good, dataset=dataset_name, started_at=wiring.started_at, seconds=seconds
        )
        manifest = build_manifest(
            command=wiring.command,
            dataset=dataset_before,
            seed=config.sampling.seed,
            settings=config.manifest_settings(run_summary.extractor),
            metrics=[metric_record(j) for j in run.judgings],
            models=manifests,
            cache=str(store_path) if config.store.use_cache else None,
        )
        result = RunResult(results=results, summary=run_summary, manifest=manifest)
        if files is not None and results_file is not None:
            result.manifest = commit(files, results_file, run_summary, manifest, outputs)
            result.results_path = results_file.path
        failed = False
        return result
    except BaseException as exc:
        exc.add_note(_kept_note(run, store, temporary=tmpdir is not None, exc=exc))
        raise
    finally:
        store.close()
        if tmpdir is not None and not (failed and store.kept):
            shutil.rmtree(tmpdir, ignore_errors=True)


def metric_record(j: Judging) -> dict[str, Any]:
    """A metric as the manifest records it."""
    record = {"name": j.metric.name, "kind": j.kind, "description": j.metric.description, "strictness": j.k,
              "tie_break": j.tie}  # fmt: skip
    profile = j.metric.profile  # an AlignedCritic's judge profile: its hash
    source = j.metric.source  # a rubric file's entry: the file's hash, its version
    record = {**record, "source": source} if source else record
    return {**record, "profile": profile} if profile else record


def jury_order(run: Run) -> list[JuryModel]:
    """The models in the order their passes run: the extractor first, since every model
    judges the statements it extracted."""
    return sorted(run.models, key=lambda m: m is not run.extractor)


def model_pass(run: Run, model: JuryModel, dataset: Dataset, total: int | None) -> None:
    """Run one model over every chunk, generating only what the store lacks (on this
    process's engine, or sharded over the cluster's replicas)."""
    progress = run.progress
    task = progress.add_task(f"{model.spec.name}", total=total) if progress is not None else None

    def advance(count: int) -> None:
        if progress is not None and task is not None:
            progress.advance(task, count)

    try:
        if run.cluster is not None:
            sharded_pass(run, run.cluster, model, dataset, total or 0, advance)
            return
        worker = Worker(run, model)
        try:
            for chunk in dataset.chunks(run.config.input.chunk_size):
                worker.run(chunk)
                advance(len(chunk))
        finally:
            worker.close()
    finally:
        if progress is not None and task is not None:
            progress.update(task, description=f"{model.spec.name}: done")


def _kept_note(run: Run, store: JudgmentStore, *, temporary: bool, exc: BaseException) -> str:
    """What a failed or interrupted run leaves for the next one: the judgments the store
    committed (not those generated: a write that failed kept none of its chunk), and whether
    its files were written."""
    generated = sum(st.generated for st in run.stats.values())
    kept = store.kept
    files = "" if isinstance(exc, CommitError) and exc.outcome != "previous" else "; no results file was written"
    where = f"the temporary store {store.path}" if temporary else f"the judgment store {store.path}"
    resume = (
        "use it as the judgment store of the same run to resume without generating them again"
        if temporary
        else "the same command resumes from there without generating them again"
    )
    if not generated and not kept:
        return f"no judgment was generated before this{files}"
    if not kept:
        return (
            f"none of the {generated} judgments generated before this could be stored in {where}{files}; "
            "the same command generates them again"
        )
    if kept < generated:
        return (
            f"of the {generated} judgments generated before this, {kept} are kept in {where} and "
            f"{generated - kept} could not be stored{files}; {resume}"
        )
    return f"the {kept} judgments generated before this are kept in {where}{files}; {resume}"
