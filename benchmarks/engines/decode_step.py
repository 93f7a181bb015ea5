"""Where the llamacpp engine's time goes: llama.cpp's prefill of one sequence (48 and 512
tokens, logits for the last token only or for every token) against one decode step of 48
sequences (one token each, at a 450-token context, with and without their logits): the shape
of the engine's decode steps at strictness 3 with 16 prompts a batch.

    .venv/bin/python benchmarks/engines/decode_step.py [--model qwen2.5-coder-1.5b-instruct]

Prints the figures and writes them to benchmarks/results/decode_step.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import llama_cpp

from localjury.engines import load_engine
from localjury.engines.llamacpp.llamacpp import FIRST_SEQUENCE
from localjury.models.registry import load_registry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table

SEQUENCES, CONTEXT = 48, 450


def timed(run: Callable[[], object], reps: int = 3) -> float:
    """Mean seconds of ``reps`` calls after one warm-up call."""
    run()
    t = time.perf_counter()
    for _ in range(reps):
        run()
    return (time.perf_counter() - t) / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--out", type=Path, default=RESULTS / "decode_step")
    args = parser.parse_args()
    engine = load_engine(load_registry().get(args.model), "llamacpp")
    ids = engine.tokenizer("The quick brown fox jumps over the lazy dog. " * 80)["input_ids"]
    engine._context(FIRST_SEQUENCE + SEQUENCES + 2, 1024)
    rows = []

    def prefill(n: int, all_logits: bool) -> None:
        llama_cpp.llama_memory_clear(engine.memory, True)
        engine._decode([(t, p, FIRST_SEQUENCE, all_logits or p == n - 1) for p, t in enumerate(ids[:n])])

    for n in (SEQUENCES, 512):
        for all_logits in (False, True):
            seconds = timed(lambda n=n, all_logits=all_logits: prefill(n, all_logits), 2)
            rows.append({"what": f"prefill of one sequence, {n} tokens", "logits": "all" if all_logits else "last",
                         "tokens": n, "seconds": round(seconds, 3), "tokens_per_s": round(n / seconds, 1)})  # fmt: skip

    llama_cpp.llama_memory_clear(engine.memory, True)
    engine._decode([(t, p, FIRST_SEQUENCE, False) for p, t in enumerate(ids[:CONTEXT])])
    for j in range(1, SEQUENCES):
        llama_cpp.llama_memory_seq_cp(engine.memory, FIRST_SEQUENCE, FIRST_SEQUENCE + j, -1, -1)

    def step(logits: bool) -> None:
        engine._decode([(ids[0], CONTEXT, FIRST_SEQUENCE + j, logits) for j in range(SEQUENCES)])
        for j in range(SEQUENCES):
            llama_cpp.llama_memory_seq_rm(engine.memory, FIRST_SEQUENCE + j, CONTEXT, -1)

    for logits in (True, False):
        seconds = timed(lambda logits=logits: step(logits))
        rows.append({"what": f"decode step, {SEQUENCES} sequences x 1 token at context {CONTEXT}",
                     "logits": "all" if logits else "none", "tokens": SEQUENCES, "seconds": round(seconds, 3),
                     "tokens_per_s": round(SEQUENCES / seconds, 1)})  # fmt: skip
    engine.close()
    result = {"model": args.model, **provenance(__file__), "rows": rows}
    text = markdown(result)
    save(args.out, result, text)
    print(text)


def markdown(result: dict) -> str:
    """The figures as the committed Markdown: a row per prefill or decode step timed."""
    lines = [
        f"# llama.cpp prefill against decode steps: {result['model']}",
        "",
        f"Command: `{result['command']}`  ",
        f"CPU: {result['cpu']}",
        "",
        *table(
            ["what", "logits", "seconds", "tokens/s"],
            ([r["what"], r["logits"], r["seconds"], r["tokens_per_s"]] for r in result["rows"]),
            "llrr",
        ),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
