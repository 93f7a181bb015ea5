"""evaluate(): a run as its stages, in one object, :class:`Run`.

A run streams the dataset in chunks of ``chunk_size`` records. When a metric extracts
statements (a composite), a first pass has the extractor generate every record's extraction
and store it like any other generation; then each model passes over the data in turn (the
extractor first, its engine still loaded): for each chunk, every prompt the model has not
already answered goes into ONE engine call per distinct (strictness, schema, token budget)
with n = strictness, and what it generated is committed to the judgment store before the
next chunk (see :mod:`localjury.store`). A model whose prompts are all in the store is not
even loaded. Models run one after another in this process, so a jury needs the memory of
one model. A last pass reads the store chunk by chunk, parses, votes and streams the
results out: memory stays bounded by the chunk, not the dataset.

Because a generation is keyed by its content and sampled from seeds derived from (run
seed, prompt, sample index), a run killed at any point and run again — or run with one
criterion changed — generates only what is missing and gives the same results.

The stages, in the order :meth:`Run.evaluate` calls them: the metrics and settings settled
once (:func:`~localjury.run.prepare.settle`); the checks before any model loads
(:func:`~localjury.run.prepare.prepare`, the jury: :mod:`.jury`) and the output files refused
or opened; the passes (:func:`run_passes`: :mod:`.generate`, planned by :mod:`.plan`, or
:mod:`.cluster.sharded` on Ray); the results (:mod:`.assemble`); the summary, manifest and
files (:mod:`.result`). A dry run (:mod:`.dry`) makes the same passes with an engine that
answers nothing.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury._hashing import dataset_record, is_saved_dataset
from localjury.errors import ConfigError
from localjury.metrics.base import Metric
from localjury.metrics.profile import JudgeProfile
from localjury.models.registry import ModelSpec
from localjury.records.readers import Dataset
from localjury.results._commit import StagedFile
from localjury.results._outputs import OutputSet
from localjury.run.assemble import Assembly
from localjury.run.cluster.sharded import sharded_pass
from localjury.run.config import RunConfig
from localjury.run.context import EngineFactory, JuryModel, RunContext, StoreOnUse, kept_note
from localjury.run.generate import Calls, EngineCalls, ModelPass
from localjury.run.prepare import Checked, Settled, check_store, count_records, prepare, protected_files, settle
from localjury.run.result import RunResult, commit, manifest_of, output_paths, summarize
from localjury.store import GenerationStore

if TYPE_CHECKING:
    from rich.progress import Progress

    from localjury.errors import RecordError
    from localjury.records.record import Record
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
    settled = settle(metrics, models, config=config, inputs=inputs, profile=profile, rubrics=rubrics, **settings)
    run = Run(records, settled, out=out, summary=summary, command=command, progress=progress,
              engine_factory=engine_factory, output_set=output_set)  # fmt: skip
    return run.evaluate()


@dataclass
class Run:
    """One run: what it judges (the records, and the metrics and settings settled once at the
    entry: :func:`evaluate`, ``localjury run``), where the results go, and its stages, which
    :meth:`evaluate` calls in order."""

    records: str | Path | Iterable[Any]
    settled: Settled
    out: str | Path | None = None
    summary: str | Path | None = None
    command: list[str] | None = None
    progress: Progress | None = None
    engine_factory: EngineFactory | None = None
    output_set: OutputSet | None = None
    started: float = field(default_factory=time.perf_counter)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def evaluate(self) -> RunResult:
        """Judge every record on every metric with every model: check everything before any model
        loads, make the passes (the statement extraction, then one per model), assemble the
        results and write them (see :func:`evaluate`)."""
        settled = self.settled
        if self.output_set is not None and self.out is not None:
            raise ConfigError("give `out` or `output_set`, not both: a run writes one set of files")
        with ExitStack() as opened:
            session = opened.enter_context(_ray_session(settled.config))
            checked = prepare(settled, session, self.engine_factory)
            files = opened.enter_context(self._outputs(checked, settled))
            read = _read(checked, Dataset(self.records), settled.config)
            ctx, store = opened.enter_context(self._context(checked, settled.config, session))
            writes = files is not None and bool(files.outputs)
            assembly = Assembly(ctx, spool=writes)
            opened.callback(assembly.close)
            if read.good and ctx.cluster is None:  # the last model's pass assembles each chunk it generates
                self._passes(ctx, read.records, read.total, assembly)
            else:  # replicas generate, or nothing to judge (no model loads): the results in a pass of their own
                if read.good:
                    self._passes(ctx, read.records, read.total, None)
                assembly.all(read.records)
            store.close()  # all it holds is read: closed before the files are written
            _unchanged(read)
            results_file = files.file(files.outputs["results file"]) if files is not None and writes else None
            if results_file is not None:
                assembly.write_to(results_file)
            return self._write(ctx, read, assembly, files, results_file)

    @contextmanager
    def _outputs(self, checked: Checked, settled: Settled) -> Iterator[OutputSet | None]:
        """The run's files, refused before any model loads when one would overwrite an input: an
        open set of files (without ``out``, an empty one), or None where the caller writes its
        own (``output_set``: bench, calibrate)."""
        config = settled.config
        protected = protected_files(checked, self.records, config.store.path(), settled.inputs)
        check_store(protected, self.output_set.inputs if self.output_set is not None else {})
        if self.output_set is not None:
            self.output_set.check(protected)
            yield None
            return
        with OutputSet(output_paths(self.out, self.summary), protected) as files:
            yield files

    @contextmanager
    def _context(
        self, checked: Checked, config: RunConfig, session: RaySession | None
    ) -> Iterator[tuple[RunContext, StoreOnUse]]:
        """The run's context and its judgment store (a temporary one without a cache), opened
        at its first lookup; an error from here on says what the store kept for the next run."""
        cache_path = config.store.path()
        tmpdir = None if cache_path is not None else Path(tempfile.mkdtemp(prefix="localjury-"))
        store = StoreOnUse(cache_path or Path(tmpdir or ".") / "judgments.sqlite")
        jury = checked.jury
        ctx = RunContext(config, checked.judgings, jury.models, jury.extractor, store, self.engine_factory,
                         self.progress, session)  # fmt: skip
        failed = True
        try:
            yield ctx, store
            failed = False
        except BaseException as exc:
            if store.opened:  # else nothing was generated, and the store's own error says why
                exc.add_note(kept_note(ctx, store, temporary=tmpdir is not None, exc=exc))
            raise
        finally:
            if not store.closed:  # closed by the run once its passes are done
                store.close()
            if tmpdir is not None and not (failed and store.kept):
                shutil.rmtree(tmpdir, ignore_errors=True)

    def _passes(self, ctx: RunContext, dataset: Dataset, total: int, assembly: Assembly | None) -> None:
        """The passes on each model's engine, loaded when a pass first needs it."""
        engines = {m.spec.name: EngineCalls(m, ctx.seed, ctx.factory) for m in ctx.models}
        run_passes(ctx, dataset, total, engines, ctx.store, assembly=assembly)

    def _write(
        self,
        ctx: RunContext,
        read: _Read,
        assembly: Assembly,
        files: OutputSet | None,
        results_file: StagedFile | None,
    ) -> RunResult:
        """The summary and the manifest; with ``out``, the results, summary and manifest committed together."""
        name = str(self.records) if isinstance(self.records, str | Path) else None
        summary = summarize(ctx, assembly.figures, read.total, read.total - read.good, dataset=name,
                            started_at=self.started_at, seconds=time.perf_counter() - self.started)  # fmt: skip
        cache = str(ctx.config.store.path()) if ctx.config.store.use_cache else None
        models = read.checked.jury.records
        manifest = manifest_of(ctx, summary, command=self.command, dataset=read.dataset, models=models, cache=cache)
        result = RunResult(results=assembly.kept, summary=summary, manifest=manifest)
        if files is not None and results_file is not None:
            result.manifest = commit(files, results_file, summary, manifest, files.outputs)
            result.results_path = results_file.path
        return result


@dataclass(frozen=True)
class _Read:
    """What a run reads before its passes."""

    checked: Checked
    records: Dataset
    dataset: dict[str, Any] | None
    """The records' file as the manifest records it, hashed before the run reads it (checked
    again at the end: the manifest describes the data the run judged, or the run fails)."""
    total: int
    good: int


def _read(checked: Checked, records: Dataset, config: RunConfig) -> _Read:
    """Hash the records' file and count the records (the first bad one raised, with
    ``strict_input``)."""
    path = records.path
    on_disk = path is not None and (path.is_file() or is_saved_dataset(path))
    before = dataset_record(path) if on_disk and path is not None else None
    total, good = count_records(records, config)
    return _Read(checked, records, before, total, good)


def _unchanged(read: _Read) -> None:
    """Refuse to write anything when the records' file changed while the run read it."""
    if read.dataset is not None and dataset_record(Path(read.dataset["path"])) != read.dataset:
        raise ConfigError(
            f"the dataset {read.records.path} changed while this run read it; nothing was written. "
            "Run again once it no longer changes (what was judged is in the judgment store)"
        )


@contextmanager
def _ray_session(config: RunConfig) -> Iterator[RaySession | None]:
    """A session on the run's Ray cluster, or None for a run on this machine (Ray not imported)."""
    if config.cluster is None:
        yield None
        return
    from localjury.run.cluster.session import RaySession

    session = RaySession(config.cluster)
    try:
        yield session
    finally:
        session.close()


def run_passes(
    ctx: RunContext,
    dataset: Dataset,
    total: int,
    calls: Mapping[str, Calls],
    store: GenerationStore,
    *,
    planning: bool = False,
    assembly: Assembly | None = None,
) -> None:
    """The run's passes over the data, in order: the statement extraction (when a metric
    extracts), then one pass per model, the extractor's first while its engine is still loaded;
    each model's ``calls`` closed after its pass. With ``assembly``, the last pass plans each
    chunk for the whole jury and hands it on once generated: each chunk's results are assembled
    from the plan its last pass made. A dry run makes the same passes (``planning``, :mod:`.dry`)."""
    try:
        if ctx.extractor is not None:
            extractor = ctx.extractor
            model_pass(ctx, extractor, calls[extractor.spec.name], store, dataset, total, extracting=True,
                       planning=planning)  # fmt: skip
        order = ctx.in_pass_order()
        for model in order:
            last = assembly if model is order[-1] else None
            model_pass(ctx, model, calls[model.spec.name], store, dataset, total, planning=planning, assembly=last)
            calls[model.spec.name].close()  # freed before the next model loads
    finally:
        for c in calls.values():
            c.close()


def model_pass(
    ctx: RunContext,
    model: JuryModel,
    calls: Calls,
    store: GenerationStore,
    dataset: Dataset,
    total: int,
    *,
    extracting: bool = False,
    planning: bool = False,
    assembly: Assembly | None = None,
) -> None:
    """One pass of a model over every chunk (``extracting``: the extraction pass), generating
    only what the store lacks: on this process, or sharded over the cluster's replicas
    (``planning``: a dry run's pass, as its progress shows it; ``assembly``: the last pass, whose
    chunks' results are assembled as it goes)."""
    name = model.spec.name
    what = f"{name}: statements" if extracting else name
    doing, done = (f"{what}: planning", f"{what}: planned") if planning else (what, f"{what}: done")
    progress = ctx.progress
    task = progress.add_task(doing, total=total) if progress is not None else None

    def advance(count: int) -> None:
        if progress is not None and task is not None:
            progress.advance(task, count)

    try:
        if ctx.cluster is not None:
            sharded_pass(ctx, ctx.cluster, model, dataset, total, advance, extracting=extracting)
            return
        this = ModelPass(ctx, model, calls, store, ctx.counts[name])
        for chunk in dataset.chunks(ctx.config.input.chunk_size):
            _pass_chunk(this, chunk, extracting, assembly)
            advance(len(chunk))
    finally:
        if progress is not None and task is not None:
            progress.update(task, description=done)


def _pass_chunk(
    this: ModelPass, chunk: list[Record | RecordError], extracting: bool, assembly: Assembly | None
) -> None:
    if extracting:
        this.extract(chunk)
    elif assembly is None:
        this.judge(this.plan(chunk))
    else:
        plans = this.plan(chunk, this.ctx.models)
        this.judge(plans)
        assembly.add(chunk, plans)
