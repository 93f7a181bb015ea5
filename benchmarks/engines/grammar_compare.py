"""Outlines' index against llama.cpp's own grammar, as the llamacpp engine's JSON constraint.

Issue 18: every output is constrained to the metric's JSON schema, either by Outlines' index
over the model's vocabulary (what the engine does) or by llama.cpp's grammar sampler (GBNF
from the same schema, ``llama_cpp.llama_grammar.json_schema_to_gbnf``). Both run inside the
same :class:`~localjury.engines.llamacpp.llamacpp.LlamaCppEngine`, on the same batches: the grammar
variant only swaps the object the engine calls ``guides`` (mask / advance / select) for one
llama.cpp grammar sampler per sequence (``llama_sampler_apply`` on a
``llama_token_data_array`` of that row's logits, ``llama_sampler_accept`` of the token drawn);
disallowed tokens get -inf and the engine's own ``sample()`` draws, so the two differ only in
how the mask is computed.

Per model, in one process: (1) exactness, both variants greedy (n=1) and sampled (the model's
temperature, n=k, same seed), compared token for token, every output validated against the
schema; (2) speed, after a warm-up call each, the variants alternate on the same prompts
(Outlines, grammar, Outlines, grammar, ...): the machine is shared, so alternating in one
process keeps the ratio fair where absolute figures drift.

    nice -n 5 .venv/bin/python benchmarks/engines/grammar_compare.py --records 8 --strictness 3
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table
from gguf_compare import CRITERION, _records  # a sibling: this folder is first on sys.path

VARIANTS = ("outlines", "grammar")


def child(model: str, records: int, k: int, max_tokens: int, seed: int, rounds: int, threads: int) -> dict:
    """Run both variants on one model in this process; return their figures."""
    import jsonschema
    import llama_cpp
    import numpy as np
    import torch
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from localjury.engines.base import GenerateCall, Sampling
    from localjury.engines.llamacpp import llamacpp
    from localjury.engines.llamacpp.llamacpp import LlamaCppEngine
    from localjury.metrics import AspectCritic
    from localjury.models.registry import load_registry

    token_data = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
    assert token_data.itemsize == ctypes.sizeof(llama_cpp.llama_token_data)

    apply_clock = [0.0]  # seconds inside llama_sampler_apply, of the grammar's mask time

    class GrammarRows:
        """One llama.cpp grammar sampler per row of a decoding batch, with the interface of
        :class:`~localjury.engines.constrain.schemas.GuidedRows`."""

        def __init__(self, template: Any, rows: int, n_vocab: int) -> None:
            # A clone copies the parsed grammar and its stacks: the GBNF is parsed once per schema.
            self.samplers = [llama_cpp.llama_sampler_clone(template) for _ in range(rows)]
            self.data = np.zeros(n_vocab, dtype=token_data)
            self.data["id"] = np.arange(n_vocab, dtype=np.intc)
            self.array = llama_cpp.llama_token_data_array()
            self.pointer = ctypes.cast(self.data.ctypes.data, llama_cpp.llama_token_data_p)

        def mask(self, logits: torch.Tensor) -> torch.Tensor:
            """Set every token the row's grammar rejects to -inf (one ``llama_sampler_apply`` a row)."""
            rows, vocab = logits.shape
            src = logits.numpy()
            allowed = np.empty((rows, vocab), dtype=bool)
            for row, sampler in enumerate(self.samplers):
                self.data["logit"] = src[row]
                # A sampler may move ``data`` or change ``size``: set all four fields every time.
                array = self.array
                array.data, array.size, array.selected, array.sorted = self.pointer, vocab, -1, False
                t = time.perf_counter()
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
                apply_clock[0] += time.perf_counter() - t
                assert array.size == vocab and not array.sorted
                np.not_equal(self.data["logit"], -np.inf, out=allowed[row])
            return logits.masked_fill(~torch.from_numpy(allowed), float("-inf"))

        def advance(self, tokens: list[int], ended: list[bool]) -> None:
            """Feed each row's grammar the token it just sampled (rows that ended are left alone)."""
            for sampler, token, end in zip(self.samplers, tokens, ended, strict=True):
                if not end:
                    llama_cpp.llama_sampler_accept(sampler, token)

        def select(self, keep: list[int]) -> None:
            """Keep only these rows, in this order; free the others' samplers."""
            kept = set(keep)
            for r, sampler in enumerate(self.samplers):
                if r not in kept:
                    llama_cpp.llama_sampler_free(sampler)
            self.samplers = [self.samplers[r] for r in keep]

        def __del__(self) -> None:
            for sampler in self.samplers:
                llama_cpp.llama_sampler_free(sampler)
            self.samplers = []

    class GrammarIndex:
        """The GBNF of one schema, parsed once into a template sampler; stands in for the
        engine's ``JsonSchemaIndex`` (its ``guides(rows)``)."""

        def __init__(self, engine: LlamaCppEngine, schema: dict) -> None:
            self.gbnf = json_schema_to_gbnf(json.dumps(schema))
            self.template = llama_cpp.llama_sampler_init_grammar(engine.vocab, self.gbnf.encode(), b"root")
            if not self.template:
                raise RuntimeError(f"llama.cpp rejected the grammar:\n{self.gbnf}")
            self.n_vocab = engine.n_vocab

        def guides(self, rows: int) -> GrammarRows:
            return GrammarRows(self.template, rows, self.n_vocab)

    class Timed:
        """Wraps guides; adds the seconds spent in mask and in advance/select to ``clock``."""

        def __init__(self, guides: Any, clock: dict) -> None:
            self.guides, self.clock = guides, clock

        def mask(self, logits: torch.Tensor) -> torch.Tensor:
            t = time.perf_counter()
            out = self.guides.mask(logits)
            self.clock["mask_s"] += time.perf_counter() - t
            self.clock["steps"] += 1
            self.clock["row_steps"] += logits.shape[0]
            return out

        def advance(self, tokens: list[int], ended: list[bool]) -> None:
            t = time.perf_counter()
            self.guides.advance(tokens, ended)
            self.clock["advance_s"] += time.perf_counter() - t

        def select(self, keep: list[int]) -> None:
            t = time.perf_counter()
            self.guides.select(keep)
            self.clock["advance_s"] += time.perf_counter() - t

    class Bench(LlamaCppEngine):
        """The llamacpp engine with a switchable constraint, timing it and keeping the tokens
        of every output (by prompt tokens) for a token-for-token comparison."""

        variant = "outlines"

        def __init__(self, spec: Any) -> None:
            super().__init__(spec)
            self.grammars: dict[str, GrammarIndex] = {}
            self.clock = dict.fromkeys(("mask_s", "advance_s", "steps", "row_steps"), 0.0)
            self.tokens: dict[tuple[int, ...], list[list[int]]] = {}

        def _index(self, schema: dict) -> Any:
            if self.variant == "outlines":
                return super()._index(schema)
            key = json.dumps(schema, sort_keys=True)
            if key not in self.grammars:
                self.grammars[key] = GrammarIndex(self, schema)
            return self.grammars[key]

        def _run_batch(self, rows, prefix, n, sampling, guides, rngs):  # type: ignore[no-untyped-def]
            out = super()._run_batch(rows, prefix, n, sampling, Timed(guides, self.clock), rngs)
            for r, ids in enumerate(rows):
                self.tokens[tuple(ids)] = [tokens for tokens, _ in out[r * n : (r + 1) * n]]
            return out

        def run(self, variant: str, prompts: list[str], n: int, sampling: Sampling) -> dict:
            """One timed generate call; return its figures and its outputs' tokens, per prompt."""
            self.variant = variant
            for key in self.clock:
                self.clock[key] = 0.0
            self.tokens = {}
            t = time.perf_counter()
            outputs = self.generate(GenerateCall(prompts, n=n, sampling=sampling, schema=schema))
            seconds = time.perf_counter() - t
            encoded = self.tokenizer(prompts, add_special_tokens=False)["input_ids"]
            c = self.clock
            return {
                "seconds": seconds,
                "judgments": sum(len(o) for o in outputs),
                "tokens": sum(x.n_tokens for o in outputs for x in o),
                "mask_s": c["mask_s"],
                "advance_s": c["advance_s"],
                "steps": int(c["steps"]),
                "row_steps": int(c["row_steps"]),
                "texts": [[x.text for x in o] for o in outputs],
                "ids": [self.tokens[tuple(e)] for e in encoded],
            }

    if threads:
        # The engine decodes with one thread per core; on a shared 2-core machine llama.cpp's
        # and torch's threads wait on each other at every op (measured here: llama.cpp 3x
        # slower with 2 threads than 1; a masked_fill over 4 x 49k logits 18 ms against 1 ms).
        llamacpp._threads = lambda: threads  # type: ignore[attr-defined]
        torch.set_num_threads(threads)
    base = load_registry().get(model)
    metric = AspectCritic("mentions_date", CRITERION)
    schema = metric.json_schema()
    spec = base.model_copy(update={"engine": "llamacpp", "max_tokens": max_tokens})
    engine = Bench(spec)
    n_vocab = engine.n_vocab
    prompts = [engine.format_prompt(metric.messages(r)) for r in _records(records)]
    sampled = Sampling(base.temperature, base.top_p, max_tokens, seed)
    greedy = Sampling(0.0, 1.0, max_tokens, seed)

    t = time.perf_counter()
    engine._index(schema)
    outlines_index_s = time.perf_counter() - t
    engine.variant = "grammar"
    t = time.perf_counter()
    gbnf = engine._index(schema).gbnf
    grammar_parse_s = time.perf_counter() - t

    for variant in VARIANTS:  # warm-up: first calls, context
        engine.run(variant, prompts[:2], k, sampled)
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for variant in VARIANTS:
            runs[variant].append(engine.run(variant, prompts, k, sampled))
            r = runs[variant][-1]
            print(f"{model} {variant}: {r['judgments'] / r['seconds']:.3f} judgments/s, "
                  f"mask {1000 * r['mask_s'] / r['steps']:.2f} ms/step", file=sys.stderr)  # fmt: skip
    greedy_runs = {v: engine.run(v, prompts, 1, greedy) for v in VARIANTS}

    def replay(variant: str, outputs: list[list[int]]) -> tuple[float, int]:
        """Feed ``outputs`` (all in one batch, one token of each per step) through the
        variant's guides on fixed logits; return the seconds in ``mask`` and the rows masked."""
        engine.variant = variant
        guides = engine._index(schema).guides(len(outputs))
        logits = torch.randn((len(outputs), engine.n_vocab), generator=torch.Generator().manual_seed(0))
        active, spent, rows = list(range(len(outputs))), 0.0, 0
        for step in range(max(len(o) for o in outputs)):
            t = time.perf_counter()
            guides.mask(logits[: len(active)])
            spent += time.perf_counter() - t
            rows += len(active)
            guides.advance([outputs[a][step] for a in active], [False] * len(active))
            keep = [r for r, a in enumerate(active) if len(outputs[a]) > step + 1]
            if len(keep) < len(active):
                guides.select(keep)
            active = [active[r] for r in keep]
            if not active:
                break
        return spent, rows

    # Mask cost alone, without the decode between steps: each variant replays its own first
    # round's outputs, alternating, three times.
    masks: dict[str, list[tuple[float, int]]] = {v: [] for v in VARIANTS}
    for _ in range(3):
        for v in VARIANTS:
            apply_clock[0] = 0.0
            masks[v].append(replay(v, [o for p in runs[v][0]["ids"] for o in p]))
    apply_share = apply_clock[0] / masks["grammar"][-1][0]

    def allowed(variant: str, prefix: str) -> set[int]:
        """The tokens the variant's mask lets through after ``prefix``."""
        engine.variant = variant
        guides = engine._index(schema).guides(1)
        ids = engine.tokenizer(prefix, add_special_tokens=False)["input_ids"]
        for t in ids:
            guides.advance([t], [False])
        return set(torch.isfinite(guides.mask(torch.zeros((1, engine.n_vocab))))[0].nonzero().flatten().tolist())

    def show(tokens: set[int]) -> list[str]:
        # The token's bytes, as llama.cpp's vocabulary holds them (a lone byte of UTF-8 shows).
        pieces = [engine.model.token_to_piece(t, True).rstrip(b"\0") for t in sorted(tokens)[:12]]
        return [repr(p)[1:].replace("|", "\\|") for p in pieces]

    # Where the two languages differ: the tokens one allows and the other does not, at a few states.
    differences = []
    for prefix in ("", '{"reason": "a', '{"reason": "a", "verdict": 1', '{"reason": "a", "verdict": 1}'):
        o, g = allowed("outlines", prefix), allowed("grammar", prefix)
        differences.append({
            "after": prefix, "outlines": len(o), "grammar": len(g),
            "only_outlines": len(o - g), "only_outlines_examples": show(o - g),
            "only_grammar": len(g - o), "only_grammar_examples": show(g - o),
        })  # fmt: skip
    engine.close()
    mask_only = {
        v: round(1e6 * sum(s for s, _ in ms) / sum(r for _, r in ms), 1) for v, ms in masks.items()
    }  # microseconds per row masked

    def validity(run: dict) -> dict:
        bad = []
        for texts in run["texts"]:
            for text in texts:
                try:
                    jsonschema.validate(json.loads(text), schema)
                except (ValueError, jsonschema.ValidationError) as exc:
                    bad.append({"text": text, "error": str(exc).splitlines()[0][:200]})
        return {"valid": sum(len(t) for t in run["texts"]) - len(bad), "invalid": bad}

    def agreement(a: dict, b: dict) -> dict:
        pairs = [(x, y) for ox, oy in zip(a["ids"], b["ids"], strict=True) for x, y in zip(ox, oy, strict=True)]
        divergences = []
        for x, y in pairs:
            if x == y:
                continue
            at = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
            divergences.append({
                "at_token": at,
                "common": engine_decode(x[:at]),
                "outlines_next": engine_decode(x[at : at + 3]),
                "grammar_next": engine_decode(y[at : at + 3]),
                "outlines": engine_decode(x),
                "grammar": engine_decode(y),
            })  # fmt: skip
        return {"outputs": len(pairs), "identical": len(pairs) - len(divergences), "divergences": divergences}

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(spec.tokenizer_dir(), local_files_only=True)

    def engine_decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, skip_special_tokens=False))

    def speed(variant: str) -> dict:
        rs = runs[variant]
        secs, judg = sum(r["seconds"] for r in rs), sum(r["judgments"] for r in rs)
        steps, row_steps = sum(r["steps"] for r in rs), sum(r["row_steps"] for r in rs)
        return {
            "judgments_per_s": round(judg / secs, 3),
            "judgments_per_s_each_round": [round(r["judgments"] / r["seconds"], 3) for r in rs],
            "output_tokens_per_s": round(sum(r["tokens"] for r in rs) / secs, 1),
            "mask_ms_per_step": round(1000 * sum(r["mask_s"] for r in rs) / steps, 3),
            "mask_us_per_row": round(1e6 * sum(r["mask_s"] for r in rs) / row_steps, 1),
            "advance_ms_per_step": round(1000 * sum(r["advance_s"] for r in rs) / steps, 3),
            "mask_share_of_time": round(sum(r["mask_s"] for r in rs) / secs, 3),
            "mean_rows_per_step": round(row_steps / steps, 1),
        }

    figures = {v: speed(v) for v in VARIANTS}
    o, g = figures["outlines"], figures["grammar"]
    return {
        "model": model,
        "n_vocab": n_vocab,
        "outlines_index_build_s": round(outlines_index_s, 2),
        "grammar_parse_s": round(grammar_parse_s, 3),
        "gbnf_chars": len(gbnf),
        "speed": figures,
        "ratio_grammar_over_outlines": {
            "judgments_per_s": round(g["judgments_per_s"] / o["judgments_per_s"], 3),
            "mask_ms_per_step": round(g["mask_ms_per_step"] / o["mask_ms_per_step"], 2),
            "mask_only_us_per_row": round(mask_only["grammar"] / mask_only["outlines"], 2),
        },
        "mask_only_us_per_row": mask_only,
        "grammar_mask_share_in_llama_sampler_apply": round(apply_share, 3),
        "threads": threads or "engine default",
        "agreement": {
            "greedy": agreement(greedy_runs["outlines"], greedy_runs["grammar"]),
            "sampled": agreement(runs["outlines"][0], runs["grammar"][0]),
            "sampled_rounds_repeat": {v: all(r["ids"] == runs[v][0]["ids"] for r in runs[v]) for v in VARIANTS},
        },
        "allowed_differences": differences,
        "validity": {
            f"{mode}_{v}": validity(run)
            for mode, by in (("greedy", greedy_runs), ("sampled", {v: runs[v][0] for v in VARIANTS}))
            for v, run in by.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2-135m-instruct,qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--records", type=int, default=8)
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2, help="timed calls of each variant, alternating")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (0: the engine's own, one per core)")
    parser.add_argument("--out", type=Path, default=RESULTS / "grammar_compare")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        figures = child(
            args.child, args.records, args.strictness, args.max_tokens, args.seed, args.rounds, args.threads
        )
        print(json.dumps(figures))
        return
    results: dict = {**provenance(__file__), "records": args.records, "strictness": args.strictness,
                     "max_tokens": args.max_tokens, "rounds": args.rounds, "threads": args.threads,
               "models": {}}  # fmt: skip
    for model in args.models.split(","):
        cmd = [sys.executable, __file__, "--child", model, "--records", str(args.records), "--strictness",
               str(args.strictness), "--max-tokens", str(args.max_tokens), "--seed", str(args.seed),
               "--rounds", str(args.rounds), "--threads", str(args.threads)]  # fmt: skip
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            results["models"][model] = {"error": f"exit {proc.returncode}"}
        else:
            results["models"][model] = json.loads(proc.stdout.strip().splitlines()[-1])
    text = markdown(results)
    save(args.out, results, text)
    print(text)


def markdown(results: dict) -> str:
    """The figures as the committed Markdown: per model, the speed of each variant, where they agree, where
    their masks differ."""
    lines = [f"# JSON constraint in the llamacpp engine: Outlines' index vs llama.cpp's grammar "
             f"({results['records']} records x strictness {results['strictness']}, max {results['max_tokens']} tokens)",
             "", f"Command: `{results['command']}`  ",
             f"CPU: {results['cpu']}  ",
             f"Same engine, same batches, same `sample()`; only the mask differs. Per model, one process: a "
             f"warm-up call each, then the variants alternate ({results['rounds']} timed calls each, Outlines "
             f"first). The machine has 2 cores shared with other work, so absolute figures drift; alternating "
             f"in one process keeps the ratio fair. Threads (llama.cpp, torch): {results['threads'] or 'one a core'} "
             f"(two on the contended cores ran 3x to 18x slower than one).", ""]  # fmt: skip
    for model, d in results["models"].items():
        if "error" in d:
            lines += [f"## {model}", "", f"error: {d['error']}", ""]
            continue
        lines += [f"## {model} (vocabulary {d['n_vocab']})", ""]
        lines += table(
            ["variant", "judgments/s", "per round", "output tokens/s", "mask ms/step", "mask us/row",
             "advance ms/step", "mask share of time", "rows/step"],
            ([v, s["judgments_per_s"], ", ".join(map(str, s["judgments_per_s_each_round"])), s["output_tokens_per_s"],
              s["mask_ms_per_step"], s["mask_us_per_row"], s["advance_ms_per_step"], f"{s['mask_share_of_time']:.1%}",
              s["mean_rows_per_step"]] for v, s in d["speed"].items()),
            "lrlrrrrrr",
        )  # fmt: skip
        r = d["ratio_grammar_over_outlines"]
        lines += ["", f"grammar/Outlines: judgments/s **{r['judgments_per_s']:.2f}**, mask time per step "
                      f"**{r['mask_ms_per_step']:.2f}**. One-off costs: Outlines index "
                      f"{d['outlines_index_build_s']} s, GBNF parse {d['grammar_parse_s']} s "
                      f"({d['gbnf_chars']} characters).",
                  "", f"Mask alone (each variant's outputs replayed through its guides, no decode, 3 alternating "
                  f"repeats): Outlines {d['mask_only_us_per_row']['outlines']} us/row, grammar "
                  f"{d['mask_only_us_per_row']['grammar']} us/row, grammar/Outlines "
                  f"**{r['mask_only_us_per_row']:.2f}** ({d['grammar_mask_share_in_llama_sampler_apply']:.0%} of the "
                  f"grammar's inside `llama_sampler_apply`, the rest copying logits in and out).", ""]  # fmt: skip
        for mode in ("greedy", "sampled"):
            a = d["agreement"][mode]
            lines.append(f"- {mode}: {a['identical']} of {a['outputs']} outputs identical token for token")
            for div in a["divergences"]:
                lines.append(f"  - at token {div['at_token']}: Outlines {div['outlines_next']!r}, grammar "
                             f"{div['grammar_next']!r} (after {div['common'][-60:]!r})")  # fmt: skip
        valid = ", ".join(f"{k} {v['valid']}/{v['valid'] + len(v['invalid'])}" for k, v in d["validity"].items())
        lines.append(f"- valid against the schema (jsonschema): {valid}")
        repeat = d["agreement"]["sampled_rounds_repeat"]
        lines += [
            f"- timed rounds reproduce their first round: {repeat}",
            "",
            "Where the constraints differ (tokens allowed by one mask only, after a prefix):",
            "",
            *table(
                ["after", "allowed: Outlines", "grammar", "Outlines only", "grammar only"],
                (
                    [
                        f"`{x['after']}`",
                        x["outlines"],
                        x["grammar"],
                        f"{x['only_outlines']}: {' '.join(x['only_outlines_examples'])}",
                        f"{x['only_grammar']}: {' '.join(x['only_grammar_examples'])}",
                    ]
                    for x in d["allowed_differences"]
                ),
                "lrrll",
            ),
            "",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
