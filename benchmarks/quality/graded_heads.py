"""Graded heads against a rubric's expected score: STS-B's human similarity scores read from the
judge's hidden states by a ridge regression (:mod:`localjury.votes.graded`).

The judge is the one ``rubric_stsb.py`` prompts (Qwen2.5-Coder-1.5B on llama.cpp) and the prompt
its 6-level rubric, sentence 1 as the reference and sentence 2 as the response; the state is the
prompt's last token at each block of ``decision_heads.py``'s eight, and a graded head per block
(and one on all eight together) predicts the human mean on levels 1..6 by 5-fold cross-validation
(each pair its own group). The pairs are ``rubric_stsb.py``'s 100 (whose expected score is the
prompted baseline: Spearman 0.49 there) and more drawn beside them, so that each head is scored on
all of them and, side by side with the baseline, on those 100 alone (out-of-fold predictions).

    python benchmarks/quality/graded_heads.py [--pairs 300] [--seed 0]

Prints and saves benchmarks/results/graded_heads.{json,md}, with the CPU and the command; the
states are cached in the temporary folder (a run after the first reads none).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rubric_stsb import RUBRIC, obtain

from localjury.bench.decision_ways import read_states
from localjury.bench.scales import scale_agreement
from localjury.engines import load_engine
from localjury.models.registry import load_registry
from localjury.records.record import Record
from localjury.votes.graded import cross_validated_graded

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table

MODEL = "qwen2.5-coder-1.5b-instruct"
LAYERS = [3, 7, 10, 14, 17, 21, 24, 27]
#: rubric_stsb.py's sample: its seed and size, and the figure its expected score gave there.
BASELINE_PAIRS, BASELINE = 100, RESULTS / "rubric_stsb.json"
#: What each score is measured by, against the rounded human means.
STATS = ("spearman", "quadratic_kappa")


def chosen(rows: int, pairs: int, seed: int) -> tuple[list[int], list[int]]:
    """The pairs: rubric_stsb.py's 100 (as it draws them), then others drawn beside them."""
    first = sorted(random.Random(seed).sample(range(rows), BASELINE_PAIRS))
    rest = [i for i in range(rows) if i not in set(first)]
    more = sorted(random.Random(seed + 1).sample(rest, max(0, pairs - BASELINE_PAIRS)))
    return first, more


def states(records: list[Record], seed: int) -> tuple[np.ndarray, float]:
    """Each record's states at LAYERS (cached in the temporary folder by model, layers and ids)."""
    key = hashlib.sha256(json.dumps([MODEL, LAYERS, [r.id for r in records], seed]).encode()).hexdigest()
    path = Path(tempfile.gettempdir()) / f"localjury-graded-{key[:16]}.npz"
    if path.is_file():
        held = np.load(path)
        return held["x"], float(held["seconds"])
    spec = load_registry(None).get(MODEL).model_copy(update={"engine": "llamacpp"})
    engine = load_engine(spec)
    try:
        started = time.perf_counter()
        x, _ = read_states(engine, RUBRIC, records, LAYERS)  # type: ignore[arg-type]  # a Rubric renders as a judge
        seconds = time.perf_counter() - started
    finally:
        engine.close()
    np.savez(path, x=x, seconds=seconds)
    return x, seconds


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rows = [json.loads(line) for line in obtain().read_text().splitlines()]
    first, more = chosen(len(rows), args.pairs, args.seed)
    pairs = [rows[i] for i in (*first, *more)]
    records = [Record(id=p["id"], reference=p["sentence1"], response=p["sentence2"]) for p in pairs]
    x, seconds = states(records, args.seed)
    target = [p["score"] + 1 for p in pairs]  # the human mean on levels 1..6
    gold = [int(p["score"] + 0.5) + 1 for p in pairs]  # rounded, as rubric_stsb.py scores it
    groups = [p["id"] for p in pairs]
    heads: dict[str, Any] = {}
    for j, layer in enumerate([*LAYERS, "+".join(str(i) for i in LAYERS)]):
        xs = x.reshape(len(x), -1) if j == len(LAYERS) else x[:, j]
        predicted = cross_validated_graded(xs, target, groups, folds=5, seed=args.seed)
        heads[str(layer)] = {
            "all": scale_agreement(gold, predicted, seed=args.seed),
            "baseline_pairs": scale_agreement(gold[:BASELINE_PAIRS], predicted[:BASELINE_PAIRS], seed=args.seed),
        }
    base = json.loads(BASELINE.read_text())
    return {
        "model": MODEL,
        "engine": "llamacpp",
        "pairs": len(pairs),
        "prefill_seconds": round(seconds, 1),
        "heads": heads,
        "prompted_expected": {
            "source": f"{BASELINE.name}: {base['command']} ({base['cpu']})",
            **base["ways"]["expected"],
        },
    }


def _ci(f: dict[str, Any], name: str) -> str:
    value, ci = f.get(name), f.get(f"{name}_ci")
    if value is None:
        return "-"
    return f"{value:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def markdown(f: dict[str, Any]) -> str:
    rows = [
        ["prompted, expected score (k=3)", "-", "-", *(_ci(f["prompted_expected"], k) for k in STATS)],
    ]
    for layer, h in f["heads"].items():
        name = f"head, blocks {layer} together" if "+" in layer else f"head, block {layer}"
        rows.append([name, *(_ci(h[part], k) for part in ("all", "baseline_pairs") for k in STATS)])
    header = ["score", f"Spearman, {f['pairs']} pairs", f"quadratic κ, {f['pairs']}", "Spearman, the 100",
              "quadratic κ, the 100"]  # fmt: skip
    lines = [
        "# Graded heads against the rubric's expected score: STS-B",
        "",
        f"{f['model']} on {f['engine']}; CPU: {f['cpu']}; command: `{f['command']}`.",
        "",
        f"{f['pairs']} pairs of STS-B dev, the first 100 those `rubric_stsb.py` judged; human means on levels",
        "1..6. Heads: a ridge regression on one block's state (or all eight together) at the rubric prompt's",
        f"last token, 5-fold cross-validation; {f['prefill_seconds']:.0f} s to read every state. The prompted",
        f"row is {f['prompted_expected']['source']}.",
        "",
        *table(header, rows),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=300, help="STS-B pairs, rubric_stsb.py's 100 among them")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    figures = {"benchmark": "graded_heads", **provenance(__file__, argv), **measure(args)}
    save(RESULTS / "graded_heads", figures, markdown(figures))


if __name__ == "__main__":
    main()
