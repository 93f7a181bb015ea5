"""More labels where the heads lost to prompting: HaluEval general, the bench run's 100 records
and more of the set, to show what a user's larger label set does to a decision head.

    python benchmarks/quality/more_labels.py [--records 600] [--poolings response,last]

The judge, prompt, blocks and folds are ``pooled_heads.py``'s (Qwen2.5-Coder-1.5B, GGUF Q4_K_M
on llama.cpp; the zero-shot prompt; 5-fold cross-validation grouped by the user's question, C and
PCA chosen inside the training folds). The records: the 100 that ``bench-qwen/halueval-general``
judged, then records drawn from the rest of the set (seed 1) up to ``--records``. Each record's
states are read at blocks 3 to 24, averaged over its response's tokens (the way that won on the
100 records) and, with ``--poolings response,last``, at the prompt's last token too (one more
prefill of every record). Per way: kappa [95% bootstrap CI], accuracy and AUROC over every record, and the
same out-of-fold probabilities on the bench run's 100 records alone, beside the judge's zero-shot
votes (k=3) there. Then the learning curve of the best way (heads trained on 50 to 400 labels,
judged on the records of the other groups, 20 draws) and what the response's length alone does.
Writes benchmarks/results/more_labels.{json,md}, with the CPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from localjury.bench._judge import resolve_metric
from localjury.bench.formats import load
from localjury.bench.sampling import sample, unit
from localjury.engines import load_engine
from localjury.models.registry import load_registry
from localjury.types import Pooling
from localjury.votes.heads import cross_validated

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table
from _more_ways import figures_of
from decision_heads import MODEL, SEED, SETS, _ci, _head, baseline, cached_states, learning_curve, length_auroc
from pooled_heads import LAYERS

NAME = "halueval-general"
POOLINGS: dict[Pooling, str] = {"last": "last token", "response": "response mean"}


def records(total: int) -> tuple[list[Any], int, dict[str, Any]]:
    """The bench run's records first, then others of the set drawn with seed 1 up to ``total``;
    how many are the bench run's; and its zero-shot votes' figures on them."""
    bench, zero = baseline(NAME)
    path, fmt, _ = SETS[NAME]
    taken = {str(it.record["id"]) for it in bench}
    rest = [it for it in load(path, fmt) if str(it.record["id"]) not in taken]
    return bench + sample(rest, max(total - len(bench), 0), seed=1), len(bench), zero


def ways(states: dict[str, np.ndarray], gold: list[int], groups: list[str], first: int) -> dict[str, Any]:
    """Each pooling's head per block and on all blocks together: out-of-fold probabilities' figures
    over every record and over the first ``first`` (the bench run's)."""
    out: dict[str, Any] = {}
    for pooling, x in states.items():
        for j, blocks in enumerate([*LAYERS, "+".join(str(i) for i in LAYERS)]):
            together = j == len(LAYERS)
            xs = x.reshape(len(x), -1) if together else x[:, j]
            p = cross_validated(xs, gold, groups, folds=5, seed=SEED, reduce=together)
            out[f"{pooling}:{blocks}"] = {
                "pooling": pooling,
                "blocks": str(blocks),
                "all": figures_of(gold, p, SEED),
                "bench": figures_of(gold[:first], p[:first], SEED),
            }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=600, help="records in all, the bench run's 100 among them")
    parser.add_argument("--poolings", default="response", help="response, last, or both (comma-separated)")
    args = parser.parse_args(argv)
    poolings = [p for p in POOLINGS if p in args.poolings.split(",")]
    items, first, zero = records(args.records)
    judge = resolve_metric(None, SETS[NAME][1], 3)
    spec = load_registry(None).get(MODEL).model_copy(update={"engine": "llamacpp"})
    engine = load_engine(spec)
    try:
        read = {p: cached_states(engine, judge, items, f"{NAME}-more", LAYERS, p) for p in poolings}
    finally:
        engine.close()
    gold = [int(it.gold) for it in items]
    groups = [unit(it) for it in items]
    found = ways({p: x for p, (x, _, _) in read.items()}, gold, groups, first)
    best = max(found, key=lambda k: found[k]["all"]["kappa"] or -1)
    x = read[found[best]["pooling"]][0]
    together = "+" in found[best]["blocks"]
    xs = x.reshape(len(x), -1) if together else x[:, LAYERS.index(int(found[best]["blocks"]))]
    figures = {
        "benchmark": "more_labels",
        **provenance(__file__, argv),
        "model": MODEL,
        "engine": "llamacpp",
        "set": NAME,
        "records": len(items),
        "bench_records": first,
        "groups": len(set(groups)),
        "positives": sum(gold),
        "prefill_seconds": {p: s for p, (_, _, s) in read.items()},
        "zero_shot_votes_k3": zero,
        "length_auroc": length_auroc(items, gold),
        "ways": found,
        "best": best,
        "learning_curve": learning_curve(xs, gold, groups, [50, 100, 200, 400], reduce=together),
    }
    save(RESULTS / "more_labels", figures, markdown(figures))


def markdown(f: dict[str, Any]) -> str:
    n, first = f["records"], f["bench_records"]
    lines = [
        f"# More labels: {f['set']}, {n} records",
        "",
        f"{f['model']} on {f['engine']}; CPU: {f['cpu']}; command: `{f['command']}`.",
        "",
        f"{n} records ({f['groups']} questions, {f['positives']} labeled 1), the first {first} those",
        f"`bench-qwen/{f['set']}` judged. Heads: 5-fold cross-validation grouped by question; the",
        f"'{first} of the bench run' columns are the same out-of-fold probabilities on those records only.",
        "",
    ]
    zero = f["zero_shot_votes_k3"]
    rows = [["zero-shot votes (k=3)", "-", "-", "-", _ci(zero), f"{zero['accuracy']:.2f}"]]
    for w in f["ways"].values():
        a, b = w["all"], w["bench"]
        name = _head(w["blocks"]) + f", {POOLINGS[w['pooling']]}"
        rows.append([name, _ci(a), f"{a['accuracy']:.2f}", f"{a['auroc']:.2f}", _ci(b), f"{b['accuracy']:.2f}"])
    header = ["way of deciding", f"kappa, {n}", f"accuracy, {n}", f"AUROC, {n}",
              f"kappa, {first} of the bench run", f"accuracy, {first}"]  # fmt: skip
    lines += table(header, rows, "lrrrrr")
    seconds = ", ".join(f"{POOLINGS[p]} {s:.0f} s" for p, s in f["prefill_seconds"].items())
    best = f["ways"][f["best"]]
    lines += [
        "",
        f"The response's length alone ranks the labels with AUROC {f['length_auroc']:.2f} (0.5: no signal).",
        f"Reading the states took {seconds}.",
        "",
        f"Learning curve ({_head(best['blocks'])}, {POOLINGS[best['pooling']]}; kappa of 20 draws, mean ± sd): "
        + ", ".join(f"{k} labels: {v['kappa']:.2f} ± {v['sd']:.2f}" for k, v in f["learning_curve"].items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
