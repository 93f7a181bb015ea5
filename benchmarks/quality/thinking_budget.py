"""What a thinking budget does to the default judge's agreement with human labels and to its
speed: Qwen2.5-Coder-1.5B (llama.cpp) with budgets 0 (no thinking block), 128 and 512 tokens,
k=3, seed 0, on HaluEval general, TruthfulQA and the demo's labelled cases, in one run.

    python benchmarks/quality/thinking_budget.py [--budgets 0,128,512] [--limit 40] [--sets SET,...]

Runs ``localjury bench`` per (set, budget) into benchmarks/results/thinking_budget/SET-BUDGET/
and the demo's two criteria through ``evaluate`` into demo-BUDGET.json (what is already there is
read, not run again), then writes benchmarks/results/thinking_budget.{json,md}: Cohen's κ with its 95%
bootstrap CI, accuracy, AUROC of the graded score, abstained samples, the mean words of
thinking, and seconds per judgment (k samples), with the CPU. The 1.5B is not a reasoning model:
this measures whether a budget helps a judge that was never trained to think, not what a
Qwen3 or an R1 distill does with one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from localjury import AspectCritic, evaluate
from localjury.bench.run import run_bench
from localjury.bench.stats import bootstrap_ci, kappas

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, ROOT, provenance, save, table

DATA = ROOT.parent / "shared" / "data"
OUT = RESULTS / "thinking_budget"
MODEL = "qwen2.5-coder-1.5b-instruct"
SETS = {
    "halueval-general": DATA / "halueval" / "halueval_general.jsonl",
    "truthfulqa": DATA / "truthfulqa" / "TruthfulQA.csv",
}
DEMO = ROOT / "examples" / "demo.jsonl"
#: The demo's unambiguous cases: (record id, metric) -> the verdict a judge must give.
EXPECTED: dict[tuple[str, str], int] = {
    (row["id"], row["metric"]): row["verdict"]
    for row in map(json.loads, (ROOT / "examples" / "demo_labels.jsonl").read_text().splitlines())
}


def bench_set(name: str, budget: int, limit: int) -> dict[str, Any]:
    """The judge's figures on one public set at one budget (its bench folder read if there)."""
    folder = OUT / f"{name}-{budget}"
    timing = folder / "seconds.json"
    if not (folder / "metrics.json").is_file():
        started = time.perf_counter()
        run_bench(SETS[name], name, [MODEL], folder, strictness=3, limit=limit, sample_seed=0, seed=0, thinking=budget)
        seconds = time.perf_counter() - started
        save(timing.with_suffix(""), {"seconds": seconds}, f"{name}, budget {budget}: {seconds:.0f} s")
    metrics = json.loads((folder / "metrics.json").read_text())
    rows = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    judge = metrics["judges"][MODEL]
    cells = [r["models"][MODEL] for r in rows]
    decided = [(r["gold"], c["prediction"]) for r, c in zip(rows, cells, strict=True) if c["prediction"] is not None]
    votes = [v for c in cells for v in c.get("votes") or []]
    thoughts = [t for c in cells for t in c.get("thinking") or [] if t is not None]
    seconds = json.loads(timing.read_text())["seconds"]
    return {
        "kappa": judge["kappa"],
        # From the predictions, so that every folder's interval is computed the same way.
        "kappa_ci": bootstrap_ci([g for g, _ in decided], [p for _, p in decided], kappas, seed=0),
        "accuracy": judge["accuracy"],
        "auroc": (judge.get("graded") or {}).get("auroc"),
        "abstained": sum(v is None for v in votes),
        "samples": len(votes),
        "thinking_words": sum(len(t.split()) for t in thoughts) / len(thoughts) if thoughts else 0.0,
        "seconds_per_judgment": seconds / len(rows),
    }


def demo(budget: int) -> dict[str, Any]:
    """The demo's labelled cases at one budget: how many the judge gets right (read if there)."""
    saved = OUT / f"demo-{budget}.json"
    if saved.is_file():
        return json.loads(saved.read_text())
    data = [json.loads(line) for line in DEMO.read_text().splitlines()]
    metrics = [
        AspectCritic("mentions_date", "The response must include a specific date or year."),
        AspectCritic.predefined("conciseness"),
    ]
    started = time.perf_counter()
    result = evaluate(data, metrics, [MODEL], strictness=3, seed=0, thinking=budget, use_cache=False)
    seconds = time.perf_counter() - started
    right = sum(
        r.score is not None and r.score != 0.5 and int(r.score > 0.5) == EXPECTED[(r.record_id, r.metric)]
        for r in result.results
        if (r.record_id, r.metric) in EXPECTED
    )
    votes = [v for r in result.results for m in r.models for v in m.votes]
    thoughts = [t for r in result.results for m in r.models for t in m.thinking or [] if t is not None]
    figures = {
        "right": right,
        "labelled": len(EXPECTED),
        "abstained": sum(v is None for v in votes),
        "samples": len(votes),
        "thinking_words": sum(len(t.split()) for t in thoughts) / len(thoughts) if thoughts else 0.0,
        "seconds_per_judgment": seconds / len(result.results),
    }
    save(saved.with_suffix(""), figures, f"demo, budget {budget}: {right}/{len(EXPECTED)} right")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="0,128,512")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--sets", default="halueval-general,truthfulqa,demo")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    report: dict[str, Any] = {**provenance(__file__), "model": MODEL, "limit": args.limit, "strictness": 3, "sets": {}}
    print(f"CPU: {report['cpu']}", flush=True)
    for name in args.sets.split(","):
        for budget in budgets:
            figures = demo(budget) if name == "demo" else bench_set(name, budget, args.limit)
            report["sets"].setdefault(name, {})[str(budget)] = figures
            print(name, budget, figures, flush=True)
    text = markdown(report)
    save(OUT, report, text)
    print(text)


def _kappa(f: dict[str, Any]) -> str:
    ci = f["kappa_ci"]
    return "-" if f["kappa"] is None else f"{f['kappa']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def markdown(report: dict[str, Any]) -> str:
    public = [(n, b, f) for n, per in report["sets"].items() if n != "demo" for b, f in per.items()]
    lines = [
        "# A thinking budget for the default judge",
        "",
        f"{report['model']} (llama.cpp), {report['limit']} records per public set, k=3, seed 0; the budget is the",
        "tokens each sample may think in a `<think>` block before its answer (0: no block). The 1.5B is not a",
        f"reasoning model. CPU: {report['cpu']}. Command: `{report['command']}`.",
        "",
        *table(
            ["set", "budget", "κ [95% CI]", "accuracy", "AUROC", "abstained", "thinking (words)", "s / judgment"],
            (
                [
                    n,
                    b,
                    _kappa(f),
                    f"{f['accuracy']:.0%}",
                    "-" if f["auroc"] is None else f"{f['auroc']:.2f}",
                    f"{f['abstained']}/{f['samples']}",
                    f"{f['thinking_words']:.0f}",
                    f"{f['seconds_per_judgment']:.1f}",
                ]
                for n, b, f in public
            ),
        ),
    ]
    if "demo" in report["sets"]:
        lines += [
            "",
            "The demo's labelled cases (examples/demo_labels.jsonl), both criteria:",
            "",
            *table(
                ["budget", "right", "abstained", "thinking (words)", "s / judgment"],
                (
                    [
                        b,
                        f"{f['right']}/{f['labelled']}",
                        f"{f['abstained']}/{f['samples']}",
                        f"{f['thinking_words']:.0f}",
                        f"{f['seconds_per_judgment']:.1f}",
                    ]
                    for b, f in report["sets"]["demo"].items()
                ),
            ),
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
