"""Where a generate call of the transformers engine spends its time, against this machine's floor.

Loads a judge on the transformers engine through localjury's own API (``load_engine`` and
``generate``, as a run does), Aspect Critic prompts over benchmarks/data, ``--strictness``
samples each, and times one real generate call with the model's forward wrapped:

- the machine: CPU model and flags (AMX or not), torch's matmul rate in fp32 and bf16 on the
  engine's thread count (``gguf_compare.floor``);
- the floor: the FLOPs the call needs (2 a weight for each token through the model: the
  prompt tokens the engine computes, the shared prefix once, and every output token; the
  151k-wide lm_head only where logits are taken), so the judgments/s the matmul rate allows,
  and the share of it reached;
- a decode step: the time inside the model's forward and outside it (the schema mask, the
  verdict reading, sampling, the guides, the batch bookkeeping), each part timed;
- memory: peak RSS against the weights' bytes plus the engine's KV budget.

``--profile`` also runs torch.profiler over a few decode steps and lists the ops that take the
time, with their input shapes and dtypes.

    .venv/bin/python benchmarks/engines/decode_profile.py [--model qwen2.5-coder-1.5b-instruct] [--dtype bfloat16] \\
        [--records 32] [--strictness 3] [--profile] [--label after]

Writes benchmarks/results/decode_profile.{json,md}; runs with different labels are kept side by
side in them (the same label is replaced).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, command, cpu_facts, save, table
from gguf_compare import CRITERION, _hf_folder, _records, floor  # a sibling: this folder is first on sys.path


def best_floor(times: int = 3, best: dict | None = None) -> dict:
    """``gguf_compare.floor`` taken ``times`` times, the best of each figure: other work on the
    machine only ever lowers a measured rate, so the best is the nearest to what it can do."""
    out = dict(best or {})
    for _ in range(times):
        for key, value in floor().items():
            out[key] = max(out.get(key, value), value)
    return out


def _folder_dtype(folder: Path) -> str:
    """The dtype the folder's safetensors hold (from their headers)."""
    import struct

    dtypes = set()
    for path in folder.glob("*.safetensors"):
        with path.open("rb") as fh:
            header = json.loads(fh.read(struct.unpack("<Q", fh.read(8))[0]))
        dtypes |= {v["dtype"] for k, v in header.items() if k != "__metadata__"}
    return ",".join(sorted(dtypes))


class ForwardClock:
    """Timestamps of every forward call of a model: (start, end, rows, query tokens)."""

    def __init__(self, model: Any) -> None:
        self.calls: list[tuple[float, float, int, int]] = []
        self._start = 0.0
        self._handles = [
            model.register_forward_pre_hook(self._pre, with_kwargs=True),
            model.register_forward_hook(self._post, with_kwargs=True),
        ]

    def _pre(self, _module: Any, _args: Any, _kwargs: Any) -> None:
        self._start = time.perf_counter()

    def _post(self, _module: Any, _args: Any, kwargs: Any, _out: Any) -> None:
        ids = kwargs["input_ids"]
        self.calls.append((self._start, time.perf_counter(), int(ids.shape[0]), int(ids.shape[1])))

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class PartClock:
    """Seconds spent in named functions of the engine's modules, by wrapping them in place."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        original = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - t
                self.calls[label] += 1

        setattr(owner, attr, timed)
        self._undo.append((owner, attr, original))

    def remove(self) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)


def decode_steps(calls: list[tuple[float, float, int, int]]) -> dict:
    """Split a call's forwards into prefill and decode steps; a decode step runs from one
    one-token forward's start to the next one's, so its time outside the forward is the mask,
    sampling and bookkeeping between them."""
    steps = inside = outside = 0.0
    row_steps = 0
    prefill = 0.0
    for (start, end, rows, q_len), nxt in zip(calls, [*calls[1:], None], strict=True):
        if q_len != 1:
            prefill += end - start
            continue
        if nxt is None or nxt[3] != 1:
            continue  # a batch's last step: what follows is the next batch's set-up
        steps += 1
        row_steps += rows
        inside += end - start
        outside += nxt[0] - end
    return {
        "decode_steps": int(steps),
        "mean_rows_per_step": round(row_steps / steps, 1) if steps else 0,
        "row_steps": row_steps,
        "forward_s": round(inside, 3),
        "outside_s": round(outside, 3),
        "step_ms": round(1000 * (inside + outside) / steps, 1) if steps else None,
        "forward_ms": round(1000 * inside / steps, 1) if steps else None,
        "outside_ms": round(1000 * outside / steps, 1) if steps else None,
        "outside_share": round(outside / (inside + outside), 4) if steps else None,
        "prefill_forward_s": round(prefill, 3),
    }


def model_sizes(model: Any) -> dict:
    """Parameters (tied ones once), the embedding's, whether the lm_head is tied, and bytes."""
    params = list(model.parameters())  # deduplicated: a tied lm_head counts once
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    tied = head is not None and head.weight.data_ptr() == embedding.data_ptr()
    return {
        "params": sum(p.numel() for p in params),
        "embedding_params": embedding.numel(),
        "lm_head_params": head.weight.numel() if head is not None else 0,
        "tied_lm_head": tied,
        "weight_bytes": sum(p.numel() * p.element_size() for p in params),
        "dtype": str(next(iter(params)).dtype).removeprefix("torch."),
    }


def call_flops(sizes: dict, prompt_tokens: int, output_tokens: int, row_steps: int) -> float:
    """FLOPs of a call's matmuls: every token through the transformer's weights (2 a weight),
    the lm_head for each output token only (the engine keeps the last position's logits)."""
    body = sizes["params"] - sizes["embedding_params"] - (0 if sizes["tied_lm_head"] else sizes["lm_head_params"])
    head = sizes["lm_head_params"]
    return 2.0 * body * (prompt_tokens + output_tokens) + 2.0 * head * row_steps


def profile_ops(engine: Any, prompts: list[str], n: int, sampling: Any, schema: dict, top: int = 25) -> list[dict]:
    """torch.profiler over one short generate: the ops with the most self CPU time, with the
    shapes and dtypes they ran on."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from localjury.engines.base import GenerateCall

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        engine.generate(GenerateCall(prompts, n=n, sampling=sampling, schema=schema))
    rows = []
    total = sum(e.self_cpu_time_total for e in prof.key_averages())
    for event in sorted(
        prof.key_averages(group_by_input_shape=True), key=lambda e: e.self_cpu_time_total, reverse=True
    )[:top]:
        dtypes = []
        for raw in prof.events():
            if raw.key == event.key and str(raw.input_shapes) == str(event.input_shapes):
                dtypes = getattr(raw, "input_dtypes", None) or []
                break
        rows.append(
            {
                "op": event.key,
                "self_ms": round(event.self_cpu_time_total / 1000, 1),
                "share": round(event.self_cpu_time_total / total, 4),
                "calls": event.count,
                "shapes": str(event.input_shapes)[:120],
                "dtypes": ",".join(str(d) for d in dtypes if d)[:60],
            }
        )
    del torch
    return rows


def run(args: argparse.Namespace) -> dict:
    import torch
    from transformers import DynamicCache

    from localjury.engines import _local as _sampling
    from localjury.engines import load_engine
    from localjury.engines.base import GenerateCall, Sampling
    from localjury.engines.constrain.schemas import GuidedRows
    from localjury.engines.transformers import transformers as tf_engine
    from localjury.metrics import AspectCritic
    from localjury.models.registry import ModelSpec, load_registry

    load_average = [round(os.getloadavg()[0], 1)]
    machine = {**cpu_facts(), **best_floor()}
    print(f"machine: {machine}", file=sys.stderr)
    base = load_registry().get(args.model)
    folder = args.path or _hf_folder(base)
    update: dict[str, Any] = {"engine": "transformers", "path": str(folder), "embedded": None}
    if args.dtype:
        update["dtype"] = args.dtype
    if args.max_tokens:
        update["max_tokens"] = args.max_tokens
    if args.batch_size:
        update["batch_size"] = args.batch_size
    spec = ModelSpec(**{**base.model_dump(), **update})
    started = time.perf_counter()
    engine = load_engine(spec)
    load_s = time.perf_counter() - started
    rss_after_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    metric = AspectCritic("mentions_date", CRITERION)
    schema = metric.json_schema()
    prompts = [engine.format_prompt(metric.messages(r)) for r in _records(args.records)]
    sampling = Sampling(spec.temperature, spec.top_p, spec.max_tokens, args.seed)
    # Warm-up: the index, the first calls.
    engine.generate(GenerateCall(prompts[:2], n=args.strictness, sampling=sampling, schema=schema))

    forwards = ForwardClock(engine.model)
    parts = PartClock()
    parts.wrap(GuidedRows, "mask", "mask (schema + verdict reading)")
    parts.wrap(GuidedRows, "advance", "guides advance")
    parts.wrap(GuidedRows, "select", "guides select")
    parts.wrap(DynamicCache, "batch_select_indices", "KV cache rows dropped")
    sampler = getattr(_sampling, "Sampler", None)
    if sampler is not None:
        parts.wrap(sampler, "__call__", "sampling")
    else:  # localjury before issue 28: a function imported by the engine
        parts.wrap(tf_engine, "sample", "sampling")
    t = time.perf_counter()
    outputs = engine.generate(GenerateCall(prompts, n=args.strictness, sampling=sampling, schema=schema))
    seconds = time.perf_counter() - t
    forwards.remove()
    parts.remove()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    load_average.append(round(os.getloadavg()[0], 1))
    machine.update(best_floor(2, machine))  # again after the call: the machine may have been busier before

    samples = [c for o in outputs for c in o]
    output_tokens = sum(c.n_tokens for c in samples)
    valid = sum(metric.parse(c.text, finished=c.finished).vote is not None for c in samples)
    usage = engine.last_usage
    assert usage is not None
    prompt_computed = usage.prompt_tokens - usage.reused_tokens
    steps = decode_steps(forwards.calls)
    sizes = model_sizes(engine.model)
    # Row-steps that took logits: every forward's last position (prefill and decode alike).
    logit_rows = sum(rows for _s, _e, rows, _q in forwards.calls)
    flops = call_flops(sizes, prompt_computed, output_tokens, logit_rows)
    rate = machine[f"matmul_gflops_{'bfloat16' if sizes['dtype'] == 'bfloat16' else 'float32'}"]
    floor_s = flops / (rate * 1e9)
    n_steps = max(steps["decode_steps"], 1)
    # A decode step reads every weight once and every row's KV cache once, whatever the rows:
    # at few rows the step is bound by memory, not by the matmul rate.
    context = sum(engine.count_tokens(prompts)) / len(prompts) + output_tokens / len(samples) / 2
    rows = steps["mean_rows_per_step"]
    step_floor = {
        "rows": rows,
        "compute_ms": round(1000 * 2 * sizes["params"] * rows / (rate * 1e9), 1),
        "memory_ms": round(
            1000
            * (sizes["weight_bytes"] + rows * context * engine._kv_bytes_per_token)
            / (machine["memory_gb_per_s"] * 1e9),
            1,
        ),
    }
    result = {
        "model": args.model,
        "folder": str(folder),
        "folder_dtype": _folder_dtype(Path(folder)),
        "dtype": sizes["dtype"],
        "command": command(__file__),
        "records": args.records,
        "strictness": args.strictness,
        "max_tokens": spec.max_tokens,
        "batch_size": spec.batch_size,
        "decode_rows_max": spec.batch_size * args.strictness,
        "machine": machine,
        "load_s": round(load_s, 2),
        "seconds": round(seconds, 2),
        "judgments": len(samples),
        "judgments_per_s": round(len(samples) / seconds, 3),
        "valid": round(valid / len(samples), 3),
        "mean_output_tokens": round(output_tokens / len(samples), 1),
        "prompt_tokens_computed": prompt_computed,
        "gflop_per_judgment": round(flops / len(samples) / 1e9, 1),
        "floor_rate_gflops": rate,
        "floor_judgments_per_s": round(len(samples) / floor_s, 3),
        "share_of_floor": round(floor_s / seconds, 4),
        "forward_share_of_call": round((steps["forward_s"] + steps["prefill_forward_s"]) / seconds, 4),
        "decode_forward_gflops": round(
            sum(2.0 * sizes["params"] * rows for _s, _e, rows, q in forwards.calls if q == 1)
            / max(sum(e - s for s, e, _r, q in forwards.calls if q == 1), 1e-9)
            / 1e9,
            1,
        ),
        **steps,
        "step_floor": step_floor,
        "outside_parts_ms_per_step": {k: round(1000 * v / n_steps, 2) for k, v in parts.seconds.items()},
        "sizes": sizes,
        "kv_budget_bytes": tf_engine.KV_BUDGET_BYTES,
        "rss_after_load_bytes": rss_after_load,
        "peak_rss_bytes": peak_rss,
        "rss_target_bytes": int(1.5 * sizes["weight_bytes"] + tf_engine.KV_BUDGET_BYTES),
        "torch": torch.__version__,
        "load_average_1min": load_average,
        "threads": torch.get_num_threads(),
    }
    result["votes"] = [[metric.parse(c.text, finished=c.finished).vote for c in o] for o in outputs]
    if args.profile:
        short = Sampling(spec.temperature, spec.top_p, 24, args.seed)  # the profiler slows every op down
        result["profile"] = profile_ops(engine, prompts[:8], args.strictness, short, schema)
    engine.close()
    return result


def markdown(results: dict) -> str:
    """The runs side by side, a table of figures each (and the profiled ops where there are)."""
    lines = [
        "# The transformers engine's decode step against the machine's floor",
        "",
        "Share of the floor: the call's matmul FLOPs at torch's bf16 (or fp32) matmul rate on this machine, over",
        "the call's time. Outside forward: the time between one decode step's forward and the next (schema mask,",
        "verdict reading, sampling, guides, KV rows dropped), over the whole step. A decode step reads every weight",
        "once whatever its rows: below the rows where the matmul time passes the weight-reading time, no engine",
        "reaches the matmul rate (see the step floor line). Other work ran on this shared machine during these runs:",
        "compare runs side by side, and the floor is the best of five measurements around each run.",
        "",
    ]
    for label, r in results["runs"].items():
        m = r["machine"]
        amx = ", ".join(m["amx"]) if m["amx"] else "no AMX"
        lines += [
            f"## {label}: {r['model']} {r['dtype']}, {r['records']} records x strictness {r['strictness']}, "
            f"batch_size {r['batch_size']}, max {r['max_tokens']} tokens",
            "",
            f"Command: `{r['command']}`  ",
            f"CPU: {m['model_name']} ({amx}; avx512_bf16 {m['avx512_bf16']}), torch {r['torch']} on "
            f"{r['threads']} threads: matmul {m['matmul_gflops_float32']} GFLOP/s fp32, "
            f"{m['matmul_gflops_bfloat16']} bf16; memory copy {m['memory_gb_per_s']} GB/s",
            "",
            *table(["figure", "value"], _figure_rows(r), "lr"),
            "",
        ]
        if r.get("profile"):
            lines += ["torch.profiler, 8 prompts x strictness, 24 tokens, ops by self CPU time:", ""]
            lines += table(
                ["op", "self ms", "share", "calls", "dtypes", "shapes"],
                (
                    [p["op"], p["self_ms"], f"{p['share']:.1%}", p["calls"], p["dtypes"], p["shapes"]]
                    for p in r["profile"]
                ),
                "lrrrll",
            )
            lines.append("")
    return "\n".join(lines) + "\n"


def _figure_rows(r: dict) -> list[list[str]]:
    """One run's figures, a (figure, value) row each."""
    gib = 1 << 30
    parts = "; ".join(f"{k} {v} ms" for k, v in r["outside_parts_ms_per_step"].items())
    step = r["step_floor"]
    return [
        ["judgments/s", f"**{r['judgments_per_s']}** ({r['judgments']} in {r['seconds']} s, {r['valid']:.0%} valid, "
                        f"{r['mean_output_tokens']} output tokens each)"],
        [f"floor at {r['floor_rate_gflops']} GFLOP/s ({r['gflop_per_judgment']} GFLOP a judgment)",
         f"{r['floor_judgments_per_s']} judgments/s"],
        ["share of the floor", f"**{r['share_of_floor']:.0%}**"],
        ["decode steps, mean rows", f"{r['decode_steps']}, {r['mean_rows_per_step']}"],
        ["a decode step: inside forward / outside", f"{r['forward_ms']} / {r['outside_ms']} ms"],
        ["share of a step outside forward", f"**{r['outside_share']:.1%}**"],
        ["outside forward, per step", parts],
        ["decode forward rate (2 x params x rows)", f"{r['decode_forward_gflops']} GFLOP/s"],
        [f"a step's floor at {step['rows']} rows: matmuls / reading weights + KV",
         f"{step['compute_ms']} / {step['memory_ms']} ms"],
        [f"forwards' share of the call (prefill {r['prefill_forward_s']} s)", f"{r['forward_share_of_call']:.0%}"],
        [f"weights ({r['sizes']['params'] / 1e9:.2f} B params)", f"{r['sizes']['weight_bytes'] / gib:.2f} GiB"],
        ["peak RSS (after load)",
         f"**{r['peak_rss_bytes'] / gib:.2f} GiB** ({r['rss_after_load_bytes'] / gib:.2f})"],
        [f"target: 1.5 x weights + KV budget {r['kv_budget_bytes'] / gib:.0f} GiB",
         f"{r['rss_target_bytes'] / gib:.2f} GiB"],
        [f"load (folder in {r.get('folder_dtype', '?')})", f"{r['load_s']} s"],
        [f"the machine's load average (1 min) before / after the call ({r['threads']} cores)",
         " / ".join(str(x) for x in r.get("load_average_1min", ["?"]))],
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--path", type=Path, default=None, help="the Hugging Face folder (default: the pulled one)")
    parser.add_argument("--dtype", default=None, help="float32 or bfloat16 (default: the models.yaml entry's)")
    parser.add_argument("--records", type=int, default=32)
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=None, help="prompts a batch (default: the entry's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="also run torch.profiler over 8 prompts")
    parser.add_argument("--label", default=None, help="the run's name in the results (default: model and dtype)")
    parser.add_argument("--out", type=Path, default=RESULTS / "decode_profile")
    args = parser.parse_args()
    result = run(args)
    label = args.label or f"{result['model']} {result['dtype']}"
    path = args.out.with_suffix(".json")
    results = json.loads(path.read_text()) if path.is_file() else {"runs": {}}
    results["runs"][label] = result
    text = markdown(results)
    save(args.out, results, text)
    print(text)


if __name__ == "__main__":
    main()
