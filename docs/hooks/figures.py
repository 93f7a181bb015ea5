"""MkDocs hook: the benchmarks' figures, in the docs as the benchmarks wrote them.

A page marks where a benchmark's figures go with ``<!-- figures: throughput -->``; at build
time the marker becomes that benchmark's Markdown (``benchmarks/results/throughput.md``, its
headings moved two levels down) followed by where the figures come from: the JSON beside it,
the CPU they were measured on and the command that produced them, as the JSON records them
("not recorded" where an older run did not). The figures are written once, by the
benchmark; a marker naming no results file fails the build.

Declared under ``hooks:`` in mkdocs.yml (``exclude_docs`` keeps this folder out of the site).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"<!--\s*figures:\s*([\w.-]+)\s*-->")
RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace each ``figures`` marker of the page with its benchmark's figures."""
    if "figures:" not in markdown:
        return markdown
    return MARKER.sub(lambda m: figures(m.group(1)), markdown)


def figures(name: str) -> str:
    """The Markdown of ``benchmarks/results/NAME.md``, headings two levels down, and its source.

    Raises:
        PluginError: No such results file.
    """
    path = RESULTS / f"{name}.md"
    if not path.is_file():
        raise PluginError(f"figures: no benchmarks/results/{name}.md (run the benchmark that writes it)")
    body = re.sub(r"^(#{1,4}) ", lambda m: "#" * min(len(m.group(1)) + 2, 6) + " ", path.read_text(), flags=re.M)
    return f"{body.rstrip()}\n\n{source(name)}\n"


def source(name: str) -> str:
    """One line: the JSON the figures come from, the CPU and the command it records."""
    path = RESULTS / f"{name}.json"
    facts = json.loads(path.read_text()) if path.is_file() else None
    if not isinstance(facts, dict):
        facts = {}
    cpu = facts.get("cpu") or facts.get("machine")
    if isinstance(cpu, dict):
        cpu = ", ".join(f"{k} {v}" for k, v in cpu.items() if isinstance(v, (str, int, float)))
    command = facts.get("command")
    where = f"`benchmarks/results/{name}.json`" if path.is_file() else f"`benchmarks/results/{name}.md`"
    return (
        f"*Source: {where}. CPU: {cpu or 'not recorded'}. "
        f"Command: {f'`{command}`' if command else 'not recorded'}.*"
    )
