"""What a run writes and returns: its summary (:func:`summarize`) and manifest
(:func:`manifest_of`), its files committed together (:func:`commit`), and :class:`RunResult`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury._version import __version__
from localjury.metrics.protocol import Judging
from localjury.models.identity import ModelRecord
from localjury.results._commit import StagedFile
from localjury.results._outputs import OutputSet
from localjury.results.manifest import Manifest, build_manifest, manifest_path_for, output_record
from localjury.results.record_result import RecordResult, read_results
from localjury.results.summary import MetricFigures, Summary, summary_path_for
from localjury.run.context import RunContext

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class RunResult:
    """What :func:`evaluate` returns: one result per (record, metric), and the summary.

    When the run streamed its results to a file (``out=``), ``results`` is empty and
    :meth:`iter_results` reads them back from ``results_path``.
    """

    results: list[RecordResult]
    summary: Summary
    manifest: Manifest | None = None
    results_path: Path | None = None

    def iter_results(self) -> Iterator[RecordResult]:
        """Every result, from memory or from the results file (read back one bounded line at a
        time: :func:`~localjury.results.record_result.read_results`).

        Raises:
            ConfigError: The results file is not a regular file, cannot be read, or a line of it
                is too long or not a result (naming the file and the line).
        """
        if self.results or self.results_path is None:
            yield from self.results
        else:
            yield from read_results(self.results_path)

    def write(self, out: str | Path, summary: str | Path | None = None) -> tuple[Path, Path]:
        """Write results.jsonl, its summary JSON (default: ``<out stem>.summary.json``) and
        manifest, committed together as :func:`evaluate` does with ``out``.

        Raises:
            ConfigError: An output path is a folder, cannot be written, is the dataset, two
                of them are the same file, or another localjury process is writing one of them.
            CommitError: The file system failed part way through the commit.
        """
        outputs = output_paths(out, summary)
        dataset = self.manifest.dataset if self.manifest is not None else None
        with OutputSet(outputs, {"dataset": Path(dataset["path"]) if dataset else None}) as files:
            results = files.file(outputs["results file"])
            for r in self.iter_results():
                results.write(r.model_dump_json() + "\n")
            if self.manifest is not None:
                self.manifest = commit(files, results, self.summary, self.manifest, outputs)
            else:  # no manifest to vouch for them: the set's previous manifest is removed
                files.file(outputs["summary"], self.summary.model_dump_json(indent=2) + "\n")
                files.commit()
        return outputs["results file"], outputs["summary"]

    def to_pandas(self) -> pd.DataFrame:
        """One row per (record, metric, model) with votes, verdict and scores."""
        import pandas as pd

        rows: list[dict[str, Any]] = []
        for r in self.iter_results():
            base = {"record_id": r.record_id, "metric": r.metric, "score": r.score, "error": r.error}
            if not r.models:
                rows.append(base)
            for m in r.models:
                rows.append(
                    {
                        **base,
                        "model": m.model,
                        "votes": m.votes,
                        "abstentions": m.abstentions,
                        "verdict": m.verdict,
                        "model_score": m.score,
                        "model_error": m.error,
                    }
                )
        return pd.DataFrame(rows)


def output_paths(out: str | Path | None, summary: str | Path | None) -> dict[str, Path]:
    """What a run with ``out`` writes: the results, summary and manifest files."""
    if out is None:
        return {}
    results = Path(out)
    return {
        "results file": results,
        "summary": Path(summary) if summary is not None else summary_path_for(results),
        "manifest": manifest_path_for(results),
    }


def commit(
    files: OutputSet, results: StagedFile, summary: Summary, manifest: Manifest, outputs: Mapping[str, Path]
) -> Manifest:
    """Write the summary and the manifest (with the SHA-256 of the results and the summary)
    beside the staged results, and rename all three into place."""
    results.close()
    summary_file = files.file(outputs["summary"], summary.model_dump_json(indent=2) + "\n")
    where = outputs["manifest"]
    manifest = manifest.model_copy(
        update={"results": output_record(results, where), "summary": output_record(summary_file, where)}
    )
    files.file(outputs["manifest"], manifest.model_dump_json(indent=2) + "\n")
    files.commit()
    return manifest


def summarize(
    ctx: RunContext,
    figures: dict[str, MetricFigures],
    total: int,
    errors: int,
    *,
    dataset: str | None,
    started_at: str,
    seconds: float,
) -> Summary:
    """The summary of a run over ``total`` records (``errors`` of them bad): each metric's
    figures and each model's counters."""
    sampling = ctx.config.sampling
    return Summary(
        localjury_version=__version__,
        dataset=dataset,
        records=total,
        record_errors=errors,
        seed=sampling.seed,
        temperature=sampling.temperature,
        max_tokens=sampling.max_tokens,
        metrics=[
            figures[j.metric.name].summary(j.metric.name, j.kind, j.description, j.k, j.tie, j.metric.stack)
            for j in ctx.judgings
        ],
        models=[ctx.counts[m.spec.name].summary(m.location) for m in ctx.models],
        extractor=ctx.extractor.spec.name if ctx.extractor is not None else None,
        started_at=started_at,
        seconds=round(seconds, 3),
    )


def manifest_of(
    ctx: RunContext,
    summary: Summary,
    *,
    command: list[str] | None,
    dataset: dict[str, Any] | None,
    models: list[ModelRecord],
    cache: str | None,
) -> Manifest:
    """The run's manifest: what it judged (``dataset``: the records' hash taken before the run
    read them), with which settings, metrics and models (``models``: their files hashed)."""
    return build_manifest(
        command=command,
        dataset=dataset,
        seed=ctx.config.sampling.seed,
        settings=ctx.config.manifest_settings(summary.extractor),
        metrics=[metric_record(j) for j in ctx.judgings],
        models=models,
        cache=cache,
    )


def metric_record(j: Judging) -> dict[str, Any]:
    """A metric as the manifest records it."""
    record = {"name": j.metric.name, "kind": j.kind, "description": j.description, "strictness": j.k,
              "tie_break": j.tie}  # fmt: skip
    profile = j.metric.profile  # an AlignedCritic's judge profile: its hash
    source = j.metric.source  # a rubric file's entry: the file's hash, its version
    record = {**record, "source": source} if source else record
    return {**record, "profile": profile} if profile else record
