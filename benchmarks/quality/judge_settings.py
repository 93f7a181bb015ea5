"""How each way of asking the judge agrees with human labels, on the public sets: zero-shot,
quoted evidence (``--evidence``) and label-aligned examples (``--aligned``), for Qwen2.5-Coder
0.5B, 1.5B and their jury, 100 records per set, k=3, seed 0, in one run on one machine.

    python benchmarks/quality/judge_settings.py [--sets halueval-general,...] [--limit 100] [--read-reasons]

Runs ``localjury bench`` once per (set, setting) into benchmarks/results/judge_settings/SET-SETTING/
(a folder already there is read, not run again), then writes benchmarks/results/judge_settings.{json,md}:
per set, judge and setting, Cohen's κ with its 95% bootstrap CI, accuracy, AUROC of the graded
score, and how many samples abstained. Aligned judges come from the zero-shot run's bench (its
``--aligned 5``: each record shown 4 labeled records of the other folds, never itself or its pair);
"both" from the evidence run's, each example quoting as the zero-shot samples that voted its gold
label did (see :mod:`localjury.bench.align`).

``--read-reasons``: how often a reason contradicts its own verdict. The 1.5B reads each sample's
reason greedily and says whether it concludes that the criterion is met (a reader of the same
size as the judge: an estimate, its own misreadings included); a contradiction is a reading
other than the sample's vote.
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
from localjury.metrics.aligned import GOLD_REASONS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, ROOT, provenance, save, table

DATA = ROOT.parent / "shared" / "data"
OUT = RESULTS / "judge_settings"
MODELS = ["qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"]
READER = "qwen2.5-coder-1.5b-instruct"
SETS = {
    "halueval-general": DATA / "halueval" / "halueval_general.jsonl",
    "truthfulqa": DATA / "truthfulqa" / "TruthfulQA.csv",
    "halueval-qa": DATA / "halueval" / "halueval_qa_dev500.jsonl",
}
#: setting -> run_bench options; "aligned" is read from the zero-shot run's folder, "both" from the evidence run's.
SETTINGS: dict[str, dict[str, Any]] = {"zero-shot": {}, "evidence": {"evidence": True}}
#: Sets whose metric is a criterion (aligned examples need one; HaluEval QA's is a composite).
CRITERION_SETS = {"halueval-general", "truthfulqa"}
SHORT = {"qwen2.5-coder-0.5b-instruct": "0.5B", "qwen2.5-coder-1.5b-instruct": "1.5B", "jury": "jury"}


def run(name: str, setting: str, limit: int) -> Path:
    folder = OUT / f"{name}-{setting}"
    if (folder / "metrics.json").is_file():
        return folder
    options = dict(SETTINGS[setting])
    if name in CRITERION_SETS:
        options["aligned"] = 5
    started = time.perf_counter()
    run_bench(SETS[name], name, MODELS, folder, strictness=3, limit=limit, sample_seed=0, seed=0, **options)
    print(f"{name} {setting}: {time.perf_counter() - started:.0f} s", flush=True)
    return folder


def figures(folder: Path) -> dict[str, dict[str, Any]]:
    """Each judge's figures in a bench folder, keyed "MODEL" / "MODEL (aligned)" / "jury"."""
    metrics = json.loads((folder / "metrics.json").read_text())
    rows = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    out = {}
    for name, j in metrics["judges"].items():
        model = name.removesuffix(" (aligned)")
        samples = [s for r in rows for s in (r["models"].get(name, {}).get("votes") or [])]
        out[name] = {
            "kappa": j["kappa"],
            "kappa_ci": j["kappa_ci"],
            "accuracy": j["accuracy"],
            "decided": j["decided"],
            "auroc": (j.get("graded") or {}).get("auroc"),
            # per sample (a composite's votes are per statement: none here)
            "abstained": sum(v is None for v in samples) if model != "jury" and samples else None,
            "samples": len(samples) if model != "jury" and samples else None,
        }
    return out


def read_reasons(folder: Path, judge: str = READER) -> dict[str, Any] | None:
    """The reader's verdict on each of a judge's reasons (the 1.5B's, or its aligned row's),
    against the sample's own vote. A reason that is word for word a demonstration's stock
    reason (:data:`~localjury.metrics.aligned.GOLD_REASONS`: an aligned judge copies them) is
    checked by its words, not read: the 1.5B misreads "A reviewer labeled this response: it
    meets the criterion." as not concluding that it does."""
    metrics = json.loads((folder / "metrics.json").read_text())
    criterion = metrics["benchmark"]["metric"]["description"]
    rows = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    samples, stock, stock_wrong = [], 0, 0
    for r in rows:
        m = r["models"].get(judge) or {}
        for j, (vote, reason) in enumerate(zip(m.get("votes") or [], m.get("reasons") or [], strict=False)):
            if vote is None or not reason:
                continue
            if reason in GOLD_REASONS.values():
                stock += 1
                stock_wrong += reason != GOLD_REASONS[vote]
            else:
                samples.append({"id": f"{r['record_id']}#{j}", "response": reason, "vote": vote})
    if not samples and not stock:
        return None
    contradicting, read = stock_wrong, stock
    if samples:
        reader = AspectCritic(
            "concludes_met",
            f"The explanation concludes that the judged response meets this criterion: {criterion}",
        )
        result = evaluate(samples, [reader], [READER], temperature=0.0, seed=0)
        readings = {r.record_id: r.score for r in result.results}
        judged = [s for s in samples if readings.get(s["id"]) in (0.0, 1.0)]
        read += len(judged)
        contradicting += sum(int(readings[s["id"]]) != s["vote"] for s in judged)
    return {"samples": len(samples) + stock, "read": read, "contradicting": contradicting, "stock": stock}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--read-reasons", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {**provenance(__file__), "limit": args.limit, "strictness": 3, "seed": 0, "sets": {}}
    print(f"CPU: {report['cpu']}", flush=True)
    for name in args.sets.split(","):
        per_set: dict[str, Any] = {}
        for setting in SETTINGS:
            folder = run(name, setting, args.limit)
            aligned = "aligned" if setting == "zero-shot" else "both"
            for judge, f in figures(folder).items():
                key = aligned if judge.endswith(" (aligned)") else setting
                per_set.setdefault(key, {})[SHORT.get(judge.removesuffix(" (aligned)"), judge)] = f
            if args.read_reasons and name in CRITERION_SETS:
                per_set.setdefault("contradictions", {})[setting] = read_reasons(folder)
                per_set["contradictions"][aligned] = read_reasons(folder, READER + " (aligned)")
        report["sets"][name] = per_set
    text = markdown(report)
    save(OUT, report, text)
    print(text)


def _kappa(f: dict[str, Any]) -> str:
    if f["kappa"] is None:
        return "-"
    ci = f["kappa_ci"]
    return f"{f['kappa']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Ways of asking the judge, against human labels",
        "",
        f"Qwen2.5-Coder 0.5B and 1.5B (llama.cpp) and their jury; {report['limit']} records per set, k=3, seed 0. "
        f"CPU: {report['cpu']}. Command: `{report['command']}`.",
        "",
        *table(
            ["set", "setting", "judge", "κ [95% CI]", "accuracy", "AUROC", "abstained"],
            (
                [
                    name,
                    setting,
                    judge,
                    _kappa(f),
                    f"{f['accuracy']:.0%}",
                    "-" if f["auroc"] is None else f"{f['auroc']:.2f}",
                    "-" if f["abstained"] is None else f"{f['abstained']}/{f['samples']}",
                ]
                for name, per_set in report["sets"].items()
                for setting in ("zero-shot", "evidence", "aligned", "both")
                for judge, f in (per_set.get(setting) or {}).items()
            ),
        ),
    ]
    reads = [(n, s, c) for n, p in report["sets"].items() for s, c in (p.get("contradictions") or {}).items() if c]
    if reads:
        lines += [
            "",
            "Reasons that contradict their own verdict (the 1.5B's samples, as the 1.5B reads them greedily; a",
            "reason that is word for word a demonstration's stock reason, which aligned judges copy, is checked by",
            "its words):",
            "",
            *table(
                ["set", "setting", "read", "stock reasons", "contradicting"],
                (
                    [
                        n,
                        s,
                        f"{c['read']}/{c['samples']}",
                        c.get("stock", 0),
                        f"{c['contradicting']} ({c['contradicting'] / c['read']:.0%})",
                    ]
                    for n, s, c in reads
                ),
            ),
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
