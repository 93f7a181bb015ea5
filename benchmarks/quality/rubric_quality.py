"""Rubric scores read as preferences on MT-Bench's human pairs: sampled vs expected vs majority.

Each response of N pairs (a seeded sample of ``processed_mtbench_human.json`` from the LLMBar
data, MIT) is graded alone with the predefined ``helpfulness_rubric`` (1-5) through
``localjury.evaluate``; per pair the response with the higher score is the preferred one, and
that is compared with the humans' choice three ways, from the same samples:

- sampled: the mean of the model's k sampled scores;
- expected: the mean of its k expected scores (the levels weighted by their probabilities);
- majority: the median of its k sampled scores.

Equal scores are a tie, counted half right (``bench.scales.preference_accuracy``); the 95%
bootstrap interval is over the decided pairs' credit (1, 0.5 or 0). Also the share of samples
whose score parsed and the mean seconds per judgment (generation only).

    python benchmarks/quality/rubric_quality.py [--pairs 40] [--model NAME] [--engine NAME] [--strictness 3] [--seed 0]

Prints and saves benchmarks/results/rubric_quality.{json,md}, with the CPU and the command.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from localjury import evaluate
from localjury.bench.formats import load_llmbar_pairs
from localjury.bench.scales import preference_accuracy
from localjury.bench.stats import bootstrap_ci
from localjury.metrics import predefined_rubric
from localjury.models.registry import DEFAULT_MODEL
from localjury.results.record_result import ModelJudgment

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, ROOT, provenance, save, table

DATA = ROOT.parent / "shared" / "data" / "llmbar" / "processed_mtbench_human.json"
RUBRIC = "helpfulness_rubric"
#: How a model's k samples become one score, by name.
WAYS = ("sampled", "expected", "majority")


def _mean(values: list[Any]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def scores(judgment: ModelJudgment) -> dict[str, float | None]:
    """One response's score each way from one model's samples (None: no sample scored)."""
    sampled = [s for s in judgment.scores or [] if s is not None]
    return {
        "sampled": _mean(sampled),
        "expected": _mean(judgment.expected or []),
        "majority": float(statistics.median(sampled)) if sampled else None,
    }


def credit(gold: int, a: float | None, b: float | None) -> float | None:
    """A pair's credit as ``preference_accuracy`` counts it: 1 when the higher score is the
    humans' choice (gold 1: response_a), 0.5 for a tie, 0 otherwise; None when undecided."""
    if a is None or b is None:
        return None
    return 0.5 if a == b else float((a > b) == (gold == 1))


def _mean_along(_gold: np.ndarray, pred: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(pred, dtype=float).mean(axis=axis)


def compare(gold: list[int], a: list[float | None], b: list[float | None]) -> dict[str, Any]:
    """``preference_accuracy`` of one way's scores, with a 95% bootstrap interval of its accuracy."""
    out = preference_accuracy(gold, a, b)
    pairs = [(g, c) for g, x, y in zip(gold, a, b, strict=True) if (c := credit(g, x, y)) is not None]
    out["accuracy_ci"] = bootstrap_ci([g for g, _ in pairs], [c for _, c in pairs], _mean_along) if pairs else None
    return out


def sample_pairs(n: int, seed: int) -> list[Any]:
    """N pairs of the MT-Bench human set, a seeded sample in file order."""
    items = load_llmbar_pairs(DATA)
    chosen = sorted(random.Random(seed).sample(range(len(items)), min(n, len(items))))
    return [items[i] for i in chosen]


def judge(items: list[Any], model: str, engine: str | None, strictness: int, seed: int) -> tuple[dict[str, Any], Any]:
    """Grade both responses of each pair; the scores by record id, and the run's summary."""
    records = []
    for item in items:
        r = item.record
        for side in ("a", "b"):
            response = r[f"response_{side}"]
            records.append({"id": f"{r['id']}-{side}", "user_input": r["user_input"], "response": response})
    rubric = predefined_rubric(RUBRIC, strictness=strictness)
    result = evaluate(records, [rubric], [model], engine=engine, strictness=strictness, seed=seed, use_cache=False)
    by_id = {r.record_id: r for r in result.results}
    return by_id, result.summary


def measure(args: argparse.Namespace) -> dict[str, Any]:
    items = sample_pairs(args.pairs, args.seed)
    started = time.perf_counter()
    by_id, summary = judge(items, args.model, args.engine, args.strictness, args.seed)
    wall = time.perf_counter() - started
    gold = [item.gold for item in items]
    per = {side: [scores(by_id[f"{i.record['id']}-{side}"].models[0]) for i in items] for side in ("a", "b")}
    ways = {w: compare(gold, [s[w] for s in per["a"]], [s[w] for s in per["b"]]) for w in WAYS}
    samples = [s for r in by_id.values() for m in r.models for s in (m.scores or [])]
    model = summary.models[0]
    errors = [f"{r.record_id}: {r.error}" for r in by_id.values() if r.error]
    return {
        "data": str(DATA.relative_to(ROOT.parent)),
        "rubric": RUBRIC,
        "model": args.model,
        "engine": model.engine,
        "strictness": args.strictness,
        "seed": args.seed,
        "pairs": len(items),
        "humans_prefer_a": sum(gold),
        "samples": len(samples),
        "parsed": sum(s is not None for s in samples) / len(samples) if samples else None,
        "generate_seconds": round(model.generate_seconds, 1),
        "seconds_per_judgment": round(model.generate_seconds / model.judgments, 2) if model.judgments else None,
        "wall_seconds": round(wall, 1),
        "errors": errors,
        "ways": ways,
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _interval(ci: list[float] | None) -> str:
    return f" [{ci[0]:.1%}, {ci[1]:.1%}]" if ci else ""


def markdown(f: dict[str, Any]) -> str:
    """The figures as the committed Markdown: a row per way of scoring a response."""
    lines = [
        f"# Rubric scores as preferences: MT-Bench human pairs, {f['rubric']} (1-5)",
        "",
        f"Judge {f['model']} ({f['engine']}), k={f['strictness']}, seed {f['seed']}; {f['pairs']} pairs "
        f"(humans prefer response_a in {f['humans_prefer_a']}), each response graded alone. "
        f"CPU: {f['cpu']}.",
        "",
        f"Command: `{f['command']}`",
        "",
        *table(
            ["score per response", "decided", "ties", "accuracy, ties half [95% CI]", "ties wrong"],
            (
                [
                    way,
                    f"{w['decided']}/{w['pairs']}",
                    w["ties"],
                    _pct(w["accuracy"]) + _interval(w["accuracy_ci"]),
                    _pct(w["accuracy_ties_wrong"]),
                ]
                for way, w in f["ways"].items()
            ),
        ),
    ]
    lines += [
        "",
        f"Samples whose score parsed: {_pct(f['parsed'])} of {f['samples']}; "
        f"{f['seconds_per_judgment']} s per judgment ({f['generate_seconds']} s of generation, "
        f"{f['wall_seconds']} s with the load).",
        "",
        "sampled: mean of the k sampled scores; expected: mean of the k expected scores; "
        "majority: median of the k sampled scores. Chance: 50%.",
    ]
    lines += [f"- error: {e}" for e in f["errors"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40, help="pairs sampled from the set (default 40)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument(
        "--engine", default=None, help="run the judge on this engine (default: its models.yaml entry's, auto)"
    )
    parser.add_argument("--strictness", type=int, default=3, help="samples per response (k)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pair sample and of the sampling")
    parser.add_argument("--out", type=Path, default=RESULTS / "rubric_quality")
    args = parser.parse_args()
    figures = provenance(__file__)
    print(f"CPU: {figures['cpu']}")
    figures.update(measure(args))
    text = markdown(figures)
    save(args.out, figures, text)
    print(text)


if __name__ == "__main__":
    main()
