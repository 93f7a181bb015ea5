"""The compiled Outlines index of the Aspect Critic schema: built cold, read from the disk
cache, and taken from the process cache (issue 28).

Each phase runs in its own process over a fresh ``$LOCALJURY_HOME`` (so nothing is cached
before the first): ``cold`` builds the tokenizer's vocabulary and the index (and writes the
disk entry); ``disk`` is a new process that finds the entry; in that same process, an engine
loaded again (a new tokenizer object, the same content) takes both from the process cache.

    .venv/bin/python benchmarks/engines/index_cache.py --model qwen2.5-coder-1.5b-instruct

Prints and saves benchmarks/results/index_cache.{json,md}, with the CPU and the command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table


def phase(folder: str) -> dict[str, float]:
    """Time the vocabulary and the index as one engine load does, twice (a load, a reload)."""
    from transformers import AutoTokenizer

    from localjury.engines.constrain import index_cache
    from localjury.engines.constrain.schemas import JsonSchemaIndex, vocabulary_of_tokenizer
    from localjury.metrics.aspect_critic import AspectCritic

    schema = AspectCritic("mentions_date", "The response must include a specific date or year.").json_schema()
    out: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def run(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                out[name] = out.get(name, 0.0) + time.perf_counter() - start

        return run

    # The compile and the disk entry's write and read, apart.
    for name in ("build_index", "write_entry", "read_entry"):
        setattr(index_cache, name, timed(f"{name}_s", getattr(index_cache, name)))
    for label in ("load", "reload"):
        tokenizer = AutoTokenizer.from_pretrained(folder)
        start = time.perf_counter()
        vocabulary = vocabulary_of_tokenizer(tokenizer)
        out[f"{label}_vocabulary_s"] = time.perf_counter() - start
        start = time.perf_counter()
        JsonSchemaIndex(vocabulary, schema)
        out[f"{label}_index_s"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", help="an embedded model's name")
    parser.add_argument("--out", type=Path, default=RESULTS / "index_cache", help="path stem for .json and .md")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase)))
        return
    from localjury._files import localjury_home

    folder = str(localjury_home() / "models" / args.model)
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "LOCALJURY_HOME": home}
        runs = {}
        for name in ("cold", "disk"):
            done = subprocess.run(
                [sys.executable, __file__, "--phase", folder], env=env, capture_output=True, text=True, check=True
            )
            runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
        size = sum(p.stat().st_size for p in (Path(home) / "index-cache").glob("*.idx"))
    figures = {"model": args.model, **provenance(__file__), "entry_mib": round(size / 2**20, 1), "runs": runs}
    text = markdown(figures)
    save(args.out, figures, text)
    print(text)


def markdown(figures: dict) -> str:
    """The three ways an engine load gets the index, and the cold build and disk read apart."""
    cold, disk = figures["runs"]["cold"], figures["runs"]["disk"]
    rows = [
        ("cold (nothing cached)", cold["load_vocabulary_s"], cold["load_index_s"]),
        ("new process, disk cache", disk["load_vocabulary_s"], disk["load_index_s"]),
        ("reload, process cache", disk["reload_vocabulary_s"], disk["reload_index_s"]),
    ]
    lines = [
        f"# The compiled index of the Aspect Critic schema: {figures['model']}",
        "",
        f"Command: `{figures['command']}`  ",
        f"CPU: {figures['cpu']}",
        "",
        f"Disk entry: {figures['entry_mib']:.0f} MiB.",
        "",
        *table(["load", "vocabulary s", "index s"], ([k, f"{v:.2f}", f"{i:.2f}"] for k, v, i in rows), "lrr"),
        "",
        f"Cold index: {cold['build_index_s']:.2f} s compiling, {cold['write_entry_s']:.2f} s writing the entry; "
        f"disk: {disk['read_entry_s']:.2f} s reading, checking and decoding it.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
