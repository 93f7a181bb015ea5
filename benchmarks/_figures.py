"""What every benchmark writes: a figure set as JSON and Markdown, saying the CPU it was measured
on and the command that produced it.

A script builds its figures as one JSON value, renders them as Markdown (tables with
:func:`table`) and writes both with :func:`save`::

    figures = {"benchmark": "throughput", **provenance(__file__, argv), "modes": rows}
    save(out, figures, markdown(figures))

The scripts are files, not a package (``python benchmarks/performance/throughput.py`` from the
repository's root, with localjury installed or ``PYTHONPATH=src``): each puts this folder on
``sys.path`` to import this module, and scripts of one group import each other directly (their
own folder is first on ``sys.path`` when one runs).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
#: Where the figures are committed: one flat folder, each file named after its script.
RESULTS = BENCHMARKS / "results"
#: The records most benchmarks judge: short answers, some with a date and some without.
DATED_ANSWERS = BENCHMARKS / "data" / "dated_answers.jsonl"


def cpu_facts() -> dict[str, Any]:
    """This machine's CPU as ``lscpu`` names it, the CPUs this process may use, and the flags
    that decide the bf16 matmul path (AMX, AVX-512 BF16 and VNNI)."""
    fields = _lscpu()
    flags = set(fields.get("Flags", "").split())
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return {
        "model_name": fields.get("Model name") or platform.processor() or platform.machine() or "unknown",
        "family": fields.get("CPU family"),
        "model": fields.get("Model"),
        "cpus": cpus,
        "amx": sorted(f for f in flags if f.startswith("amx")),
        "avx512_bf16": "avx512_bf16" in flags,
        "avx512_vnni": "avx512_vnni" in flags,
    }


def cpu() -> str:
    """The CPU in one line: "AMD EPYC 9R14 (family 25, model 17), 2 CPUs, no AMX, avx512_bf16"."""
    facts = cpu_facts()
    kind = ", ".join(f"{key} {facts[key]}" for key in ("family", "model") if facts[key])
    flags = ["AMX" if facts["amx"] else "no AMX", *(f for f in ("avx512_bf16",) if facts[f])]
    return f"{facts['model_name']}{f' ({kind})' if kind else ''}, {facts['cpus']} CPUs, {', '.join(flags)}"


def _lscpu() -> dict[str, str]:
    """``lscpu``'s fields (the first of a repeated name), empty where it is not installed."""
    try:
        out = subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=False, env={**os.environ, "LC_ALL": "C"}
        ).stdout
    except OSError:  # no lscpu: macOS, a minimal container
        return {}
    fields: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def command(script: str | Path, argv: Sequence[str] | None = None) -> str:
    """The command line that runs ``script`` with ``argv`` (this process's arguments by default),
    the script's path from the repository's root: "python benchmarks/performance/scale.py --records 300"."""
    path = Path(script).resolve()
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return shlex.join(["python", str(shown), *(sys.argv[1:] if argv is None else argv)])


def provenance(script: str | Path, argv: Sequence[str] | None = None) -> dict[str, str]:
    """The fields every figure set carries: ``cpu`` (:func:`cpu`) and ``command`` (:func:`command`)."""
    return {"cpu": cpu(), "command": command(script, argv)}


def measure(argv: Sequence[str], cwd: Path) -> dict[str, Any]:
    """Run ``argv`` in ``cwd``; its peak RSS (MiB, of that process alone: ``os.wait4`` reaps it
    with its own rusage), wall seconds, exit code and the tails of its output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(list(argv), cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return {
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "seconds": round(seconds, 2),
            "exit": os.waitstatus_to_exitcode(status),
            "stdout": out.read()[-300:].decode(errors="replace"),
            "stderr": err.read()[-600:].decode(errors="replace"),
        }


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> list[str]:
    """A Markdown table's lines: the header, the rule, one line a row. ``align`` holds one letter
    a column, ``l`` (left, the default for columns it leaves out) or ``r`` (right: numbers).

    Raises:
        ValueError: ``align`` names more columns than the header has.
    """
    if len(align) > len(header):
        raise ValueError(f"align {align!r} names {len(align)} columns; the header has {len(header)}")
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align.ljust(len(header), "l")) + "|"
    return [_cells(header), rule, *(_cells(row) for row in rows)]


def _cells(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def save(stem: str | Path, figures: Any, markdown: str) -> tuple[Path, Path]:
    """Write ``figures`` to STEM.json (indented) and ``markdown`` to STEM.md, the folder made.

    Returns:
        The two paths, JSON first.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = stem.with_suffix(".json"), stem.with_suffix(".md")
    paths[0].write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(markdown.rstrip("\n") + "\n", encoding="utf-8")
    return paths
