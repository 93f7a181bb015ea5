"""Votes, probabilities and calibration, side by side, on committed bench outputs.

For each bench folder (``localjury bench --out``) and each judge in it (each model and the
jury), three ways to turn the same samples into a verdict, scored against the human labels:

- votes: the model's verdict is the majority of its k votes; the jury's score is the mean of
  the models' 0/1 scores, a pass above 0.5 (the default rules);
- probability: the graded score (mean ``p_pass``; the jury's the mean of its models') above 0.5
  (``--scoring probability``);
- calibrated: Platt scaling and a threshold fitted on the graded score, each record scored by a
  fit on the other folds (stratified 5-fold, ``localjury calibrate``'s held-out evaluation).

Cohen's κ with its 95% bootstrap CI for each, beside the majority baseline (κ 0). No model
runs: it reads ``predictions.jsonl``.

    python benchmarks/quality/judge_quality.py OUT_STEM BENCH_FOLDER [BENCH_FOLDER ...]

writes OUT_STEM.json and OUT_STEM.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from localjury.bench import stats
from localjury.votes.calibration import cross_validated

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import command, save, table


def judges(rows: list[dict[str, Any]]) -> dict[str, tuple[list[int | None], list[float | None]]]:
    """Each judge's vote-based predictions and graded scores, per record."""
    names = list(rows[0]["models"])
    out: dict[str, tuple[list[int | None], list[float | None]]] = {
        m: ([r["models"][m]["prediction"] for r in rows], [r["models"][m].get("graded") for r in rows]) for m in names
    }
    if "jury_prediction" in rows[0]:
        out["jury"] = ([r["jury_prediction"] for r in rows], [r.get("jury_graded") for r in rows])
    return out


def kappa(gold: list[int], pred: list[int | None]) -> dict[str, Any]:
    c = stats.classification(gold, pred, seed=0)
    return {k: c[k] for k in ("accuracy", "balanced_accuracy", "kappa", "kappa_ci", "decided")}


def one_set(folder: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    meta = json.loads((folder / "metrics.json").read_text())["benchmark"]
    gold = [r["gold"] for r in rows]
    out: dict[str, Any] = {"set": meta["format"], "records": len(rows), "strictness": meta["strictness"], "judges": {}}
    for name, (votes, graded) in judges(rows).items():
        usable = [i for i, g in enumerate(graded) if g is not None]
        prob = [None if g is None else int(g > 0.5) for g in graded]
        calibrated: list[int | None] = [None] * len(rows)
        try:
            _, held = cross_validated([float(graded[i]) for i in usable], [gold[i] for i in usable], folds=5, seed=0)
            for i, (c, t) in zip(usable, held, strict=True):
                calibrated[i] = int(c > t)
        except Exception as exc:  # too few of a label: say so in the table
            out.setdefault("notes", []).append(f"{name}: no calibration ({exc})")
        out["judges"][name] = {
            "votes": kappa(gold, votes),
            "probability": kappa(gold, prob),
            "calibrated": kappa(gold, calibrated),
            "auroc": stats.probabilistic(gold, graded, seed=0)["auroc"],
        }
    return out


def _k(f: dict[str, Any]) -> str:
    if f["kappa"] is None:
        return "-"
    ci = f["kappa_ci"]
    return f"{f['kappa']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def markdown(results: list[dict[str, Any]], command: str) -> str:
    """The figures as the committed Markdown: a row per set and judge, then the notes and the command."""
    rows = []
    for r in results:
        for name, j in r["judges"].items():
            cells = [f"{_k(j[m])} ({j[m]['accuracy']:.0%})" if j[m]["accuracy"] is not None else "-"
                     for m in ("votes", "probability", "calibrated")]  # fmt: skip
            auroc = "-" if j["auroc"] is None else f"{j['auroc']:.2f}"
            rows.append([r["set"], r["records"], name, *cells, auroc])
    lines = [
        "# Votes, probabilities and calibration against human labels",
        "",
        "Cohen's κ [95% bootstrap CI] of each way to decide, on the same samples; accuracy in brackets. "
        "Calibrated: held-out (stratified 5-fold). Majority baseline: κ 0.",
        "",
        *table(["set", "records", "judge", "votes", "probability", "calibrated (held out)", "AUROC"], rows),
    ]
    notes = [n for r in results for n in r.get("notes", [])]
    lines += [""] + [f"- {n}" for n in notes] if notes else []
    return "\n".join([*lines, "", f"Command: `{command}`", ""])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="path stem for .json and .md")
    parser.add_argument("folders", type=Path, nargs="+", help="bench output folders (localjury bench --out)")
    args = parser.parse_args(argv)
    results = [one_set(folder) for folder in args.folders]
    text = markdown(results, command(__file__, argv))
    save(args.out, results, text)  # the JSON stays a list, a set each: no model runs here, no CPU to state
    print(text)


if __name__ == "__main__":
    main()
