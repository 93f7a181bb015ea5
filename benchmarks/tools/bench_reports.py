"""The HTML reports of the committed bench folders, made again from their figures.

``localjury bench --out FOLDER`` writes ``metrics.json``, ``predictions.jsonl``, ``report.md``
and ``report.html``. Under benchmarks/results/ the first three are committed and
``report.html`` is not (.gitignore): a self-contained page of 100 to 260 kB whose plots are
inline SVG, made from ``metrics.json`` alone. This script writes it again beside each
``metrics.json``, as ``localjury bench`` does (``localjury.bench.report.html_report``), with
the SVG's element ids seeded so that two runs write the same bytes.

    python benchmarks/tools/bench_reports.py                 # every bench folder under benchmarks/results
    python benchmarks/tools/bench_reports.py benchmarks/results/bench-qwen/llmbar

Needs the ``bench`` extra (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS


def bench_folders(root: Path = RESULTS) -> list[Path]:
    """Every folder under ``root`` that holds a bench's ``metrics.json``, in path order."""
    return sorted(path.parent for path in root.rglob("metrics.json"))


def write_report(folder: Path) -> Path:
    """Write ``folder/report.html`` from ``folder/metrics.json``; return its path.

    Raises:
        SystemExit: The folder holds no ``metrics.json``.
    """
    import matplotlib

    from localjury.bench.report import html_report

    figures = folder / "metrics.json"
    if not figures.is_file():
        raise SystemExit(f"{folder} holds no metrics.json: give a folder `localjury bench --out` wrote")
    # matplotlib names the SVG's clip paths at random unless salted: salted, the page is reproducible.
    matplotlib.rcParams["svg.hashsalt"] = "localjury"
    page = folder / "report.html"
    page.write_text(html_report(json.loads(figures.read_text(encoding="utf-8"))), encoding="utf-8")
    return page


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "folders", type=Path, nargs="*", help="bench folders (default: every one under benchmarks/results)"
    )
    args = parser.parse_args(argv)
    for folder in args.folders or bench_folders():
        print(write_report(folder))


if __name__ == "__main__":
    main()
