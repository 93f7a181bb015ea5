"""How many samples adaptive strictness saves on a real judge, in one run.

For each strictness k, judges the same records twice with the same model: full sampling
(k samples for every record) and ``adaptive=True`` (k // 2 + 1 first, the rest only where
those disagree). Prints and saves samples drawn, the share saved, generation time and the
time ratio. Samples are seeded per (seed, prompt, sample index), so the adaptive run's
samples are the full run's first ones and the verdicts agree (the "same verdict" column
checks it; tests/unit/run/test_adaptive.py proves the rule on a deterministic engine). Up to
floating-point differences between batch shapes, which can flip a rare near-tie token.

    .venv/bin/python benchmarks/performance/adaptive.py --records 40 --strictness 3 5
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

from localjury import AspectCritic, __version__, evaluate
from localjury.records.readers import iter_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import DATED_ANSWERS, RESULTS, provenance, save, table


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--data", default=str(DATED_ANSWERS))
    parser.add_argument("--records", type=int, default=40)
    parser.add_argument("--strictness", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "adaptive"), help="path stem for .json and .md")
    args = parser.parse_args(argv)

    records = [r for r in iter_records(args.data)][: args.records]
    metric = AspectCritic("dated", "The response must include a specific date or year.")
    rows = []
    for k in args.strictness:
        runs = {}
        for adaptive in (False, True):
            result = evaluate(
                records, [metric], [args.model], strictness=k, adaptive=adaptive, seed=args.seed, use_cache=False
            )
            s = result.summary.models[0]
            runs[adaptive] = (result, s)
        (full, fs), (fast, a) = runs[False], runs[True]
        agree = sum(f.models[0].verdict == x.models[0].verdict for f, x in zip(full.results, fast.results, strict=True))
        rows.append(
            {
                "strictness": k,
                "records": len(records),
                "full_samples": fs.judgments,
                "adaptive_samples": a.judgments,
                "saved_share": round(1 - a.judgments / fs.judgments, 4),
                "full_seconds": fs.generate_seconds,
                "adaptive_seconds": a.generate_seconds,
                "time_ratio_adaptive_over_full": round(a.generate_seconds / fs.generate_seconds, 3),
                "verdict_agreement": round(agree / len(records), 4),
            }
        )
        print(json.dumps(rows[-1]))
    report = {
        "benchmark": "adaptive strictness",
        **provenance(__file__, argv),
        "model": args.model,
        "data": Path(args.data).name,
        "seed": args.seed,
        "localjury": __version__,
        "machine": f"{platform.machine()}, {platform.system()}",
        "rows": rows,
    }
    save(args.out, report, markdown(report))
    return report


def markdown(report: dict) -> str:
    """The figures as the committed Markdown: one row per strictness."""
    rows = report["rows"]
    records = rows[0]["records"] if rows else 0
    lines = [
        f"# Adaptive strictness — {report['model']}, {records} records of {report['data']}, seed {report['seed']}",
        "",
        *table(
            [
                "k",
                "samples (full)",
                "samples (adaptive)",
                "saved",
                "gen. s full",
                "gen. s adaptive",
                "time ratio",
                "same verdict",
            ],
            (
                [
                    r["strictness"],
                    r["full_samples"],
                    r["adaptive_samples"],
                    f"{r['saved_share']:.0%}",
                    f"{r['full_seconds']:.1f}",
                    f"{r['adaptive_seconds']:.1f}",
                    f"{r['time_ratio_adaptive_over_full']:.2f}",
                    f"{r['verdict_agreement']:.0%}",
                ]
                for r in rows
            ),
        ),
        "",
        f"Command: `{report['command']}`  ",
        f"CPU: {report['cpu']}",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
