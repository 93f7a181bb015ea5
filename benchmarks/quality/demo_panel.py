"""Which embedded judges get the demo's obvious cases right: each candidate alone and as a
jury, on examples/demo.jsonl's two criteria, strictness 3, seed 0, in one run.

    python benchmarks/quality/demo_panel.py [--models a,b,...] [--juries a+b,...] [--verdict-first | --evidence]

Prints and saves (benchmarks/results/demo_panel.{json,md}) per judge and jury the verdicts
that match the expected ones (examples/demo_labels.jsonl: only the unambiguous cases), and
the time, with the CPU they were measured on.

The claim docs/getting-started.md makes of the default judge is checked here, not in the tests (sampled
verdicts round differently on other CPUs' kernels): it must get at least ``--min-right``
(default 12) of the 17 right, or this exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from localjury import AspectCritic, evaluate
from localjury.models.registry import DEFAULT_MODEL

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, ROOT, provenance, save, table

DATA = ROOT / "examples" / "demo.jsonl"
DATED = "The response must include a specific date or year."


def metrics(verdict_first: bool, evidence: bool = False) -> list[AspectCritic]:
    """The demo's two criteria; ``verdict_first`` asks for the verdict before the reason,
    ``evidence`` for quoted evidence first."""
    return [
        AspectCritic("mentions_date", DATED, verdict_first=verdict_first, evidence=evidence),
        AspectCritic.predefined("conciseness", verdict_first=verdict_first, evidence=evidence),
    ]


#: The verdict a judge must give: (record id, metric) -> 1 or 0. Borderline cases left out.
EXPECTED: dict[tuple[str, str], int] = {
    (row["id"], row["metric"]): row["verdict"]
    for row in map(json.loads, (ROOT / "examples" / "demo_labels.jsonl").read_text().splitlines())
}


def correct(result) -> tuple[int, list[str]]:
    right, wrong = 0, []
    for r in result.results:
        want = EXPECTED.get((r.record_id, r.metric))
        if want is None:
            continue
        got = None if r.score is None or r.score == 0.5 else int(r.score > 0.5)  # a split jury is not right
        if got == want:
            right += 1
        else:
            wrong.append(f"{r.record_id}/{r.metric}: {r.score}")
    return right, wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", default="smollm2-135m-instruct,gemma-3-270m,qwen2.5-coder-0.5b-instruct,qwen2.5-coder-1.5b-instruct"
    )
    parser.add_argument(
        "--juries", default="smollm2-135m-instruct+gemma-3-270m,qwen2.5-coder-0.5b-instruct+qwen2.5-coder-1.5b-instruct"
    )
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--verdict-first", action="store_true", help="ask for the verdict before the reason")
    parser.add_argument("--evidence", action="store_true", help="ask for quoted evidence first")
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/demo_panel[_evidence]")
    parser.add_argument(
        "--min-right", type=int, default=12, help=f"the least {DEFAULT_MODEL} alone must get right (exit 1 below)"
    )
    args = parser.parse_args()
    suffix = "_verdict_first" if args.verdict_first else "_evidence" if args.evidence else ""
    args.out = args.out or RESULTS / f"demo_panel{suffix}"
    about = provenance(__file__)
    print(f"CPU: {about['cpu']}")
    rows = []
    panels = [[m] for m in args.models.split(",")] + [j.split("+") for j in args.juries.split(",") if j]
    for panel in panels:
        started = time.perf_counter()
        result = evaluate(
            DATA, metrics(args.verdict_first, args.evidence), panel, strictness=args.strictness, seed=0, use_cache=False
        )
        seconds = time.perf_counter() - started
        right, wrong = correct(result)
        engines = ",".join(m.engine for m in result.summary.models)
        judgments = sum(m.judgments for m in result.summary.models)
        rows.append(
            {
                "panel": "+".join(panel),
                "engines": engines,
                "right": right,
                "of": len(EXPECTED),
                "wrong": wrong,
                "seconds": round(seconds, 1),
                "judgments": judgments,
            }
        )
        print(f"{rows[-1]['panel']:60s} {right}/{len(EXPECTED)} right, {seconds:.0f} s; wrong: {', '.join(wrong)}")
    figures = {
        "strictness": args.strictness,
        "verdict_first": args.verdict_first,
        "evidence": args.evidence,
        **about,
        "min_right": args.min_right,
        "rows": rows,
    }
    verdict = threshold(figures)
    if verdict is not None:
        print(verdict)
    save(args.out, figures, markdown(figures))
    default = default_row(rows)
    if default is not None and default["right"] < args.min_right:
        sys.exit(1)


def default_row(rows: list[dict]) -> dict | None:
    """The default judge's row, alone (None: it was not run)."""
    return next((r for r in rows if r["panel"] == DEFAULT_MODEL), None)


def threshold(figures: dict) -> str | None:
    """Whether the default judge alone got ``min_right`` right, in words (None: it was not run)."""
    default = default_row(figures["rows"])
    if default is None:
        return None
    met = "met" if default["right"] >= figures["min_right"] else "MISSED"
    return f"{DEFAULT_MODEL}: {default['right']}/{default['of']} right, threshold {figures['min_right']}: {met}"


def markdown(figures: dict) -> str:
    """The figures as the committed Markdown: a row per judge or jury."""
    how = ", verdict first)" if figures["verdict_first"] else ", quoted evidence first)" if figures["evidence"] else ")"
    verdict = threshold(figures)
    lines = [
        f"# Demo panel: expected verdicts on examples/demo.jsonl (strictness {figures['strictness']}, seed 0{how}",
        "",
        f"CPU: {figures['cpu']}" + (f"; {verdict}" if verdict else "") + "  ",
        f"Command: `{figures['command']}`",
        "",
        *table(
            ["judge or jury", "engines", "right", "seconds (load + judge)", "wrong"],
            (
                [r["panel"], r["engines"], f"{r['right']}/{r['of']}", r["seconds"], "; ".join(r["wrong"])]
                for r in figures["rows"]
            ),
        ),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
