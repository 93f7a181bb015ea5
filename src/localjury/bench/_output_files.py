"""The bench's output files: the jury's models as metrics.json describes them, and the four
files written and committed together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury.models._pull import SOURCE_FILE
from localjury.results._outputs import OutputSet

if TYPE_CHECKING:
    from localjury.results.manifest import Manifest


def described(manifest: Manifest | None) -> list[dict[str, Any]]:
    """The jury's models as metrics.json describes them: their manifest records (without the
    files' hashes) and where each was pulled from."""
    described = []
    for m in manifest.models if manifest else []:
        entry = m.model_dump(exclude={"files"})
        source = Path(m.path) / SOURCE_FILE
        if source.is_file():
            entry["source"] = json.loads(source.read_text(encoding="utf-8"))
        described.append(entry)
    return described


def write(files: OutputSet, outputs: dict[str, Path], rows: list[dict[str, Any]], figures: dict[str, Any]) -> None:
    """Write the bench's four files and commit them together, metrics.json last: never new
    predictions beside old figures."""
    from localjury.bench.report import html_report, markdown

    predictions = files.file(outputs["predictions"])
    for row in rows:
        predictions.write(json.dumps(row, ensure_ascii=False) + "\n")
    files.file(outputs["Markdown report"], markdown(figures))
    files.file(outputs["HTML report"], html_report(figures))
    files.file(outputs["figures"], json.dumps(figures, indent=2) + "\n")
    files.commit()
