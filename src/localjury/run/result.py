"""What a run returns, :class:`RunResult`, and how its files are committed together."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury.results._commit import StagedFile
from localjury.results._outputs import OutputSet
from localjury.results.manifest import Manifest, manifest_path_for, output_record
from localjury.results.record_result import RecordResult, read_results
from localjury.results.summary import Summary, summary_path_for

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
        """Every result, from memory or from the results file."""
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
