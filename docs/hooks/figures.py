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
    text = path.read_text()
    body = re.sub(r"^(#{1,4}) ", lambda m: "#" * min(len(m.group(1)) + 2, 6) + " ", text, flags=re.M)
    return f"{body.rstrip()}\n\n{source(name, text)}\n"


def source(name: str, text: str) -> str:
    """One line: the JSON the figures come from, the CPU and the command it records (or, where
    it records none, that the figures' own text states it, else "not recorded")."""
    path = RESULTS / f"{name}.json"
    facts = json.loads(path.read_text()) if path.is_file() else None
    if not isinstance(facts, dict):
        facts = {}
    cpu = facts.get("cpu") or facts.get("machine")
    if isinstance(cpu, dict):
        cpu = ", ".join(f"{k} {v}" for k, v in cpu.items() if isinstance(v, (str, int, float)))
    command = facts.get("command")
    where = f"`benchmarks/results/{name}.json`" if path.is_file() else f"`benchmarks/results/{name}.md`"
    stated = {
        "cpu": re.search(r"\b(CPU|Machine|machine|cores?)\b", text) is not None,
        "command": re.search(r"\b[Cc]ommand\b|`[^`]*\.py[^`]*`", text) is not None,
    }
    cpu_text = cpu or ("as stated above" if stated["cpu"] else "not recorded")
    command_text = f"`{command}`" if command else ("as stated above" if stated["command"] else "not recorded")
    return f"*Source: {where}. CPU: {cpu_text}. Command: {command_text}.*"
