"""Reasons held to the record: how often the default judge's reasons cite a number or a quotation
the record does not hold, and what abstaining on those samples does to its agreement with labels.

    python benchmarks/quality/grounded_reasons.py [--sets demo,halueval-general,truthfulqa] [--strictness 3]

The default judge (Qwen2.5-Coder-1.5B, GGUF on llama.cpp), strictness 3, seed 0, judges each set
once; its samples are then read under both of the run's ``ungrounded`` policies (``flag``: the
vote stands; ``abstain``: the sample abstains), from the same judgment store, so the two differ
only by the policy. Sets: the demo's two criteria on examples/demo.jsonl, scored against its 17
unambiguous verdicts (examples/demo_labels.jsonl), and the records the bench runs of HaluEval
general and TruthfulQA judged (``decision_heads.py``'s), each with its own criterion.

Per set and policy: the samples whose reason cites what the record lacks, the verdicts right (the
demo) or Cohen's kappa with its 95% bootstrap CI on the decided records beside the majority
baseline (kappa 0), and the abstentions; every flagged sample's citations and reason are saved for
reading. Writes benchmarks/results/grounded_reasons.{json,md}, with the CPU.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from localjury import AspectCritic, evaluate
from localjury.bench import stats
from localjury.bench._judge import resolve_metric
from localjury.models.registry import DEFAULT_MODEL, load_registry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, ROOT, provenance, save, table
from decision_heads import SETS, baseline
from demo_panel import EXPECTED, metrics

POLICIES = ("flag", "abstain")
SEED = 0


def judged(name: str, k: int) -> tuple[list[dict[str, Any]], list[Any], dict[tuple[str, str], int]]:
    """A set's records, its metrics and its gold verdicts by (record id, metric)."""
    if name == "demo":
        import json

        rows = [json.loads(x) for x in (ROOT / "examples" / "demo.jsonl").read_text().splitlines()]
        return rows, metrics(False), EXPECTED
    items, _ = baseline(name)
    metric = resolve_metric(None, SETS[name][1], k)
    assert isinstance(metric, AspectCritic), metric  # a criterion judged on its own: what is held to the record
    return [it.record for it in items], [metric], {(str(it.record["id"]), metric.name): int(it.gold) for it in items}


def one_set(name: str, k: int, store: Path) -> dict[str, Any]:
    """One set's figures under both policies, and its flagged samples."""
    records, asked, gold = judged(name, k)
    spec = load_registry(None).get(DEFAULT_MODEL).model_copy(update={"engine": "llamacpp"})
    out: dict[str, Any] = {"records": len(records), "labels": len(gold)}
    verdicts: dict[str, dict[tuple[str, str], int | None]] = {}
    for policy in POLICIES:
        started = time.perf_counter()
        run = evaluate(records, asked, [spec], strictness=k, seed=SEED, cache=store, ungrounded=policy)
        seconds = time.perf_counter() - started
        results = [r for r in run.iter_results() if (r.record_id, r.metric) in gold]
        verdicts[policy] = {(r.record_id, r.metric): r.models[0].verdict for r in results}
        keys = list(gold)
        truth = [gold[key] for key in keys]
        pred = [verdicts[policy].get(key) for key in keys]
        figures = stats.classification(truth, pred, seed=SEED)
        model = run.summary.models[0]
        out[policy] = {
            "seconds": round(seconds, 1),
            "samples": model.judgments,
            "ungrounded": model.ungrounded,
            "abstentions": model.abstentions,
            "no_verdict": sum(p is None for p in pred),
            "right": sum(p == t for p, t in zip(pred, truth, strict=True)),
            "kappa": figures["kappa"],
            "kappa_ci": list(figures["kappa_ci"]) if figures["kappa_ci"] is not None else None,
            "accuracy_abstain_as_wrong": figures["accuracy_abstain_as_wrong"],
        }
        if policy == "flag":
            out["flagged"] = [
                {
                    "record": r.record_id,
                    "metric": r.metric,
                    "gold": gold[(r.record_id, r.metric)],
                    "vote": vote,
                    "cited": cited,
                    "reason": reason,
                }
                for r in results
                for vote, reason, cited in zip(
                    r.models[0].votes, r.models[0].reasons, r.models[0].ungrounded or [], strict=False
                )
                if cited
            ]
        print(f"{name} ({policy}): {out[policy]}", flush=True)
    changed = [key for key in gold if verdicts["flag"].get(key) != verdicts["abstain"].get(key)]
    out["majority_baseline"] = stats.majority_baseline(list(gold.values()))
    out["verdicts_changed"] = len(changed)
    out["changed_to_gold"] = sum(verdicts["abstain"].get(key) == gold[key] for key in changed)
    out["changed_from_gold"] = sum(verdicts["flag"].get(key) == gold[key] for key in changed)
    return out


def _kappa(f: dict[str, Any]) -> str:
    if f["kappa"] is None:
        return "-"
    lo, hi = f["kappa_ci"] or (None, None)
    return f"{f['kappa']:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None else "")


def markdown(figures: dict[str, Any]) -> str:
    lines = [
        "# Reasons held to the record",
        "",
        f"{figures['model']} on llama.cpp, strictness {figures['strictness']}, seed {SEED}; CPU: {figures['cpu']}; "
        f"command: `{figures['command']}`.",
        "",
        "A sample is flagged when its reason cites a number (two digits or more) or a quotation that",
        "neither the record nor the criterion holds. Under `flag` its vote stands; under `abstain` it",
        "abstains. Kappa: Cohen's, with its 95% bootstrap CI, on the records with a verdict (the majority",
        "baseline is 0); right: verdicts equal to the label, a missing verdict counted wrong.",
        "",
    ]
    rows = []
    for name, f in figures["sets"].items():
        for policy in POLICIES:
            p = f[policy]
            share = p["ungrounded"] / p["samples"] if p["samples"] else 0.0
            rows.append([name, policy, f"{p['ungrounded']} of {p['samples']} ({share:.0%})", p["abstentions"],
                         p["no_verdict"], f"{p['right']}/{f['labels']}", _kappa(p)])  # fmt: skip
    header = ["set", "policy", "flagged samples", "abstentions", "no verdict", "right", "kappa"]
    lines += table(header, rows, "llrrrrr")
    lines += ["", "Verdicts that abstaining changed (of the labeled ones):", ""]
    lines += table(
        ["set", "changed", "now equal to the label", "were equal to the label"],
        [[n, f["verdicts_changed"], f["changed_to_gold"], f["changed_from_gold"]] for n, f in figures["sets"].items()],
        "lrrr",
    )
    for name, f in figures["sets"].items():
        lines += ["", f"## {name}: the first flagged samples", ""]
        shown = [[x["record"], x["metric"], x["gold"], x["vote"], ", ".join(x["cited"]), (x["reason"] or "")[:140]]
                 for x in f["flagged"][:10]]  # fmt: skip
        lines += table(["record", "metric", "label", "vote", "cited", "reason"], shown) if shown else ["(none)"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="demo,halueval-general,truthfulqa")
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "grounded_reasons")
    args = parser.parse_args(argv)
    store = Path(tempfile.gettempdir()) / "localjury-grounded-reasons.sqlite"  # a rerun generates nothing again
    sets = {name: one_set(name, args.strictness, store) for name in args.sets.split(",")}
    figures = {"benchmark": "grounded_reasons", **provenance(__file__, argv), "model": DEFAULT_MODEL,
               "strictness": args.strictness, "sets": sets}  # fmt: skip
    for path in save(args.out, figures, markdown(figures)):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
