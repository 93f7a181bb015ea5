"""The length-only baseline ``localjury align`` puts beside each decision head, on the sets of the
decision-heads benchmark: where the record's length alone explains a head, align warns.

    python benchmarks/quality/length_baseline.py

For each set, on the records the decision-heads benchmark read (``baseline``: those its bench
run judged): the length-only head (:func:`localjury.bench.decision_ways.surface_way`: a head on
the response's length in words and characters and the input's in words, the same grouped
5-fold cross-validation), then align's rule (:func:`localjury.bench.decision_ways.decide`) with
the set's zero-shot votes as the prompting way and its best head from
``benchmarks/results/decision_heads.json``. No model is loaded: a run takes seconds.
Writes benchmarks/results/length_baseline.{json,md}, with the CPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from decision_heads import SEED, SETS, _ci, baseline

from localjury.bench.decision_ways import decide, surface_way, way_name
from localjury.bench.sampling import unit
from localjury.votes.decision_report import DecisionWay

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table


def main(argv: list[str] | None = None) -> None:
    heads = json.loads((RESULTS / "decision_heads.json").read_text())
    sets: dict[str, Any] = {}
    for name, measured in heads["sets"].items():
        if name not in SETS:
            continue
        items, zero = baseline(name)
        gold = [int(it.gold) for it in items]
        surface = surface_way(items, gold, [unit(it) for it in items], folds=5, seed=SEED)
        ways = [
            DecisionWay(way=way_name([int(i) for i in blocks.split("+")]), kappa=h["kappa"], kappa_ci=h["kappa_ci"],
                        records=len(items))
            for blocks, h in measured["heads"].items()
        ]  # fmt: skip
        head = max(ways, key=lambda w: w.kappa if w.kappa is not None else float("-inf"))
        votes = DecisionWay(way="zero-shot votes", kappa=zero["kappa"], kappa_ci=zero["kappa_ci"], records=len(items))
        report = decide("judge", [votes], ways, surface)
        sets[name] = {
            "records": len(items),
            "length_only": surface.model_dump(),
            "zero_shot_votes": votes.model_dump(),
            "best_head": head.model_dump(),
            "winner": report.winner,
            "warning": report.artifact,
        }
        print(f"{name}: length only kappa {surface.kappa:.2f}, warning: {report.artifact}", flush=True)
    figures = {"benchmark": "length_baseline", **provenance(__file__, argv), "model": heads["model"], "sets": sets}
    save(RESULTS / "length_baseline", figures, markdown(figures))


def markdown(f: dict[str, Any]) -> str:
    rows = [
        (name, s["records"], _ci(s["zero_shot_votes"]), _ci(s["best_head"]), _ci(s["length_only"]),
         f"{s['length_only']['auroc']:.2f}", "yes" if s["warning"] else "no")
        for name, s in f["sets"].items()
    ]  # fmt: skip
    header = ["set", "records", "zero-shot votes", "best head", "length only", "length AUROC", "warned"]
    lines = [
        "# The length-only baseline beside the decision heads",
        "",
        f"{f['model']}'s heads (benchmarks/results/decision_heads.json) against a head on the records' lengths "
        "alone, same grouped folds; kappa with its 95% interval. `align` warns where length could explain the "
        "head: the length-only kappa reaches the head's lower end, or its own lower end clears the zero-shot votes.",
        "",
        *table(header, rows, "lrrrrrl"),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
