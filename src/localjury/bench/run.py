"""Run a judge benchmark: load a labeled set, judge it with the jury, compare with gold."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury._version import __version__
from localjury.bench._judge import is_pairwise, resolve_metric
from localjury.bench._output_files import described, write
from localjury.bench.align import add_aligned, aligned_judge, traces_of
from localjury.bench.checklist_comparison import checklist_critics, compare_checklist
from localjury.bench.config import BenchConfig
from localjury.bench.figures import compute
from localjury.bench.formats import FORMATS, BenchItem, load
from localjury.bench.published import llmbar_reference
from localjury.bench.sampling import check_unique_ids, sample
from localjury.errors import ConfigError
from localjury.metrics.base import Metric
from localjury.models.registry import ModelSpec
from localjury.results._outputs import OutputSet
from localjury.run import EngineFactory, RunResult, evaluate

if TYPE_CHECKING:
    from rich.progress import Progress

    from localjury.results.manifest import Manifest


def run_bench(
    data: str | Path,
    fmt: str,
    models: Sequence[str | ModelSpec],
    out: str | Path,
    config: BenchConfig | None = None,
    *,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Benchmark judge models (and their jury) against a labeled data set.

    Writes ``metrics.json`` (every figure), ``predictions.jsonl`` (each record with gold and
    per-model votes, reasons, quotes, verdicts and predictions), ``report.md`` and a self-contained
    ``report.html`` with plots into ``out``. The settings (:class:`~localjury.bench.config.BenchConfig`:
    the metric, strictness, sample, mode, checklist, aligned judges, and the run's own) are
    ``config``'s, with ``settings`` replacing them by name, as :func:`localjury.evaluate` takes
    them (``run_bench(data, "llmbar", models, out, strictness=3, limit=50, seed=1)``).

    Returns:
        The content of metrics.json.

    The four files are refused before any model loads when one would overwrite an input
    (the data set, the judgment store or its journals, models.yaml, a model's files), locked
    for the run, and committed together (see :class:`localjury.results._outputs.OutputSet`).

    Raises:
        ConfigError: Unknown format, unreadable data, bad settings, an output refused or
            being written by another process.
        CommitError: The file system failed part way through the commit.
    """
    bench = (config or BenchConfig()).replace(models=list(models), **settings)
    run_config = bench.run.replace(strictness=bench.strictness)
    folder = Path(out)
    outputs = {
        "predictions": folder / "predictions.jsonl",
        "Markdown report": folder / "report.md",
        "HTML report": folder / "report.html",
        "figures": folder / "metrics.json",
    }
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"the bench output folder {folder} is a file; give a folder")
    # Locked from here to the commit; checked against the models' files too (by evaluate)
    # before any model loads.
    with OutputSet(outputs, bench.inputs(data, "dataset")) as files:
        judging = partial(
            evaluate, config=run_config, progress=progress, engine_factory=engine_factory, output_set=files
        )
        labelled = _LabelledSet.load(data, fmt, bench)
        critics = checklist_critics(labelled.judge, bench.checklist, bench.strictness) if bench.checklist else None
        figures, rows = _judge(labelled, bench, judging)
        if critics:
            figures["checklist"] = compare_checklist(
                [it.entry() for it in labelled.items], [it.gold for it in labelled.items], critics, run_config,
                seed=bench.sample_seed, progress=progress, engine_factory=engine_factory, output_set=files,
            )  # fmt: skip
        if labelled.pairwise and fmt == "llmbar":
            figures["published"] = llmbar_reference(data)
        if bench.evidence:
            from localjury.bench.evidence_examples import examples

            figures["evidence"] = examples(labelled.items, rows)
        if any("thinking" in m for row in rows for m in row["models"].values()):
            from localjury.bench.thinking_examples import examples as thinking_examples

            figures["thinking"] = thinking_examples(rows)
        write(files, outputs, rows, figures)
    return figures


@dataclass(frozen=True)
class _LabelledSet:
    """The labelled records a bench judges, and what it judges them on."""

    data: str | Path
    fmt: str
    records_in_file: int
    items: list[BenchItem]
    judge: Metric
    pairwise: bool

    @classmethod
    def load(cls, data: str | Path, fmt: str, bench: BenchConfig) -> _LabelledSet:
        """The set's sample of ``bench.limit`` records and the bench's metric on them.

        Raises:
            ConfigError: Unknown format or mode, unreadable data, ids not unique, a bad metric.
        """
        pairwise = is_pairwise(bench.mode, fmt, data)
        judge = resolve_metric(
            bench.metric, fmt, bench.strictness, verdict_first=bench.verdict_first, pairwise=pairwise,
            evidence=bench.evidence,
        )  # fmt: skip
        all_items = load(data, fmt, pairwise=pairwise, metric=judge.name)
        items = sample(all_items, bench.limit, bench.sample_seed)
        check_unique_ids(items, data)
        return cls(data, fmt, len(all_items), items, judge, pairwise)


def _judge(
    labelled: _LabelledSet, bench: BenchConfig, judging: Callable[..., RunResult]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Judge the records with the bench's metric (and, with ``aligned``, shown their nearest
    labelled records), and compute the figures and prediction rows."""
    items, judge, seed = labelled.items, labelled.judge, bench.sample_seed
    records = [it.entry() for it in items]
    aligned, shots = bench.aligned, bench.shots
    # A quoting judge's examples quote what its zero-shot samples quoted: judged after them.
    fold_judge = aligned_judge(items, judge, aligned, shots, seed) if aligned and not bench.evidence else None
    run = judging(records, [judge, *([fold_judge] if fold_judge else [])])
    aligned_run = run
    if aligned and bench.evidence:
        fold_judge = aligned_judge(items, judge, aligned, shots, seed, traces_of(items, run, judge.name))
        aligned_run = judging(records, [fold_judge])
    names = [m.model for m in run.summary.models]
    figures, rows = compute(items, run, names, seed=seed, pairwise=labelled.pairwise, metric=judge.name)
    if fold_judge is not None:
        more = compute(items, aligned_run, names, seed=seed, metric=fold_judge.name)
        add_aligned(figures, rows, more, fold_judge, items)
    seconds = run.summary.seconds + (aligned_run.summary.seconds if aligned_run is not run else 0.0)
    return {"benchmark": _described(labelled, bench, run.manifest, seconds), **figures}, rows


def _described(labelled: _LabelledSet, bench: BenchConfig, manifest: Manifest | None, seconds: float) -> dict[str, Any]:
    """metrics.json's ``benchmark``: what was judged, how, with what, and how long it took."""
    judge = labelled.judge
    return {
        "dataset": str(Path(labelled.data).resolve()),
        "format": labelled.fmt,
        "format_description": FORMATS[labelled.fmt].description,
        "records_in_file": labelled.records_in_file,
        "records": len(labelled.items),
        "limit": bench.limit,
        "sample_seed": bench.sample_seed,
        "seed": bench.run.sampling.seed,
        "strictness": bench.strictness,
        "metric": {
            "name": judge.name,
            "description": judge.description,
            "verdict_first": bench.verdict_first,
            "evidence": bench.evidence,
        },
        "mode": "pairwise" if labelled.pairwise else "pointwise",
        "aligned": {"folds": bench.aligned, "shots": bench.shots, "similarity": "tfidf-cosine"}
        if bench.aligned
        else None,
        "models": described(manifest),
        "packages": manifest.packages if manifest else {},
        "localjury_version": __version__,
        "seconds": seconds,
    }
