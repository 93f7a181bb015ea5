"""Decision heads against prompting: what a linear head on the judge's own hidden states does
to agreement with human labels, and how fast decision mode judges, beside the same judge's
zero-shot votes on the same records.

    python benchmarks/quality/decision_heads.py [--sets SET,...] [--speed 20]

The judge is Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M, llama.cpp). The records of each set are
the 100 that ``benchmarks/results/bench-qwen/SET`` judged (k=3, seed 0), so the prompting
baseline is that run's zero-shot votes on exactly these records. For each set: the hidden state
at the zero-shot prompt's last token, at several blocks; per block, a head's kappa, accuracy
and AUROC by 5-fold cross-validation grouped by question or pair (:mod:`localjury.votes.heads`,
C chosen inside the training folds); the learning curve of the best block (heads trained on 25
and 50 labels, judged on the records of the other groups, 20 draws); and transfer (the head of
one set judged on the other). Speed: judgments per second of decision mode (one prefill a
record) against k=3 generation under the schema, on the same ``--speed`` records, in one run.
Writes benchmarks/results/decision_heads.{json,md}, with the CPU.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from localjury.bench import stats
from localjury.bench._judge import resolve_metric
from localjury.bench.align import unit
from localjury.bench.decision_ways import read_states
from localjury.bench.formats import load
from localjury.engines import load_engine
from localjury.engines.base import GenerateCall, Sampling
from localjury.models.registry import load_registry
from localjury.records.neutralise import Neutraliser, tokenizer_markers
from localjury.records.record import parse_record
from localjury.votes.heads import cross_validated, fit_head, grouped_folds

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, ROOT, provenance, save, table

DATA = ROOT.parent / "shared" / "data"
MODEL = "qwen2.5-coder-1.5b-instruct"
SETS = {
    "truthfulqa": DATA / "truthfulqa" / "finetune_truth.jsonl",
    "halueval-general": DATA / "halueval" / "halueval_general.jsonl",
    "llmbar": DATA / "llmbar" / "llmbar_natural.json",
}
#: Blocks read (the 1.5B has 28): every fourth, the middle ones, and the last.
LAYERS = [3, 7, 10, 14, 17, 21, 24, 27]
SEED = 0


def figures_of(gold: list[int], p: list[float]) -> dict[str, Any]:
    c = stats.classification(gold, [int(x >= 0.5) for x in p], seed=SEED)
    return {
        "kappa": c["kappa"],
        "kappa_ci": list(c["kappa_ci"]) if c["kappa_ci"] is not None else None,
        "accuracy": c["accuracy"],
        "auroc": stats.probabilistic(gold, p, seed=SEED)["auroc"],
    }


def baseline(name: str) -> tuple[list[Any], dict[str, Any]]:
    """The records bench-qwen judged on this set (for LLMBar, judged there as pairs in both
    orders: both responses of each pair, pointwise), and its zero-shot votes' figures there."""
    rows = [json.loads(x) for x in (RESULTS / "bench-qwen" / name / "predictions.jsonl").read_text().splitlines()]
    gold = [r["gold"] for r in rows]
    pred = [r["models"][MODEL]["prediction"] for r in rows]
    c = stats.classification(gold, pred, seed=SEED)
    ci = list(c["kappa_ci"]) if c["kappa_ci"] is not None else None
    out = {"kappa": c["kappa"], "kappa_ci": ci, "accuracy": c["accuracy"]}
    items = load(SETS[name], name)
    if name == "llmbar":  # the pairwise judge's accuracy is its pair accuracy
        pairs = {r["record_id"] for r in rows}
        return [it for it in items if it.pair in pairs], {**out, "pair_accuracy": c["accuracy"]}
    by_id = {str(it.record["id"]): it for it in items}
    return [by_id[r["record_id"]] for r in rows], out


def pair_accuracy(pairs: list[str], gold: list[int], score: list[float]) -> float:
    """The share of pairs whose gold-1 response scores higher than its gold-0 one (a tie counts half)."""
    by: dict[str, dict[int, float]] = {}
    for pair, g, s in zip(pairs, gold, score, strict=True):
        by.setdefault(pair, {})[g] = s
    wins = [0.5 if d[1] == d[0] else float(d[1] > d[0]) for d in by.values() if set(d) == {0, 1}]
    return sum(wins) / len(wins)


def learning_curve(x: np.ndarray, gold: list[int], groups: list[str], sizes: list[int]) -> dict[int, float]:
    """Mean kappa over 20 draws of a head trained on ``size`` labels (whole groups) and judged on
    every record of the other groups."""
    from localjury.votes.heads import _fit

    out = {}
    units = sorted(set(groups))
    for size in sizes:
        ks = []
        for draw in range(20):
            rng = random.Random(draw)
            order = units[:]
            rng.shuffle(order)
            train_units, n = set(), 0
            for u in order:
                if n >= size:
                    break
                train_units.add(u)
                n += groups.count(u)
            tr = [i for i, g in enumerate(groups) if g in train_units]
            te = [i for i, g in enumerate(groups) if g not in train_units]
            y = np.asarray(gold)
            if len(set(y[tr])) < 2:
                continue
            model, _ = _fit(x[tr], y[tr], np.asarray(groups)[tr], SEED)
            p = model.predict_proba(x[te])[:, 1]
            ks.append(stats.classification(y[te].tolist(), [int(v >= 0.5) for v in p], seed=SEED)["kappa"])
        out[size] = float(np.mean([k for k in ks if k is not None]))
    return out


def speed(engine: Any, judge: Any, items: list[Any], head_layer: int) -> dict[str, float]:
    """Judgments per second: decision mode against k=3 generation, the same prompts."""
    neutralise = Neutraliser(tokenizer_markers(engine.spec.tokenizer_dir()))
    prompts = [engine.format_prompt(judge.messages(parse_record(it.record), neutralise)) for it in items]
    started = time.perf_counter()
    engine.hidden_states(prompts, [head_layer])
    heads = time.perf_counter() - started
    started = time.perf_counter()
    engine.generate(GenerateCall(prompts, 3, Sampling(0.7, 1.0, 256, SEED), judge.json_schema()))
    generate = time.perf_counter() - started
    return {
        "records": len(items),
        "decision_mode_per_s": len(items) / heads,
        "generate_k3_per_s": len(items) / generate,
        "ratio": generate / heads,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--speed", type=int, default=20, help="records of the speed comparison (0: none)")
    args = parser.parse_args(argv)
    spec = load_registry(None).get(MODEL).model_copy(update={"engine": "llamacpp"})
    engine = load_engine(spec)
    sets: dict[str, Any] = {}
    states: dict[str, tuple[np.ndarray, list[int], list[str]]] = {}
    try:
        for name in args.sets.split(","):
            items, zero = baseline(name)
            judge = resolve_metric(None, name, 3)
            x, layers, seconds = cached_states(engine, judge, items, name)
            gold = [int(it.gold) for it in items]
            groups = [unit(it) for it in items]
            assert all(len({groups[i] for i in te} & {groups[i] for i in tr}) == 0
                       for tr, te in grouped_folds(groups, gold, 5, SEED))  # fmt: skip
            per_layer = {}
            for j, layer in enumerate(layers):
                p = cross_validated(x[:, j], gold, groups, folds=5, seed=SEED)
                per_layer[layer] = figures_of(gold, p)
                if "pair_accuracy" in zero:  # the pair's higher head probability wins
                    per_layer[layer]["pair_accuracy"] = pair_accuracy([str(it.pair) for it in items], gold, p)
            best = max(per_layer, key=lambda k: per_layer[k]["kappa"] or -1)
            states[name] = (x, gold, groups)
            print(f"{name}: {len(items)} records read in {seconds:.0f} s; best block {best}", flush=True)
            sets[name] = {
                "records": len(items),
                "groups": len(set(groups)),
                "prefill_seconds": seconds,
                "zero_shot_votes_k3": zero,
                "heads": {str(k): v for k, v in per_layer.items()},
                "best_layer": best,
                "learning_curve": learning_curve(x[:, layers.index(best)], gold, groups, [25, 50, 75]),
            }
            if args.speed and name == args.sets.split(",")[0]:
                sets[name]["speed"] = speed(engine, judge, items[: args.speed], best)
        transfer = {}
        for a in states:
            for b in states:
                if a != b:  # the head of a's best block, on b's states at that block (each set's own prompt)
                    (xa, ga, gra), j = states[a], LAYERS.index(sets[a]["best_layer"])
                    head = fit_head(xa[:, j], ga, gra, LAYERS[j], _binding(), SEED)
                    transfer[f"{a} -> {b}"] = figures_of(
                        states[b][1], [head.probability(v) for v in states[b][0][:, j]]
                    )
    finally:
        engine.close()
    figures = {"benchmark": "decision_heads", **provenance(__file__, argv), "model": MODEL, "engine": "llamacpp",
               "sets": sets, "transfer": transfer}  # fmt: skip
    save(RESULTS / "decision_heads", figures, markdown(figures))


def cached_states(engine: Any, judge: Any, items: list[Any], name: str) -> tuple[np.ndarray, list[int], float]:
    """The states of a set's records at LAYERS, and the seconds reading them took; kept in
    ``$TMPDIR`` by set and record ids, so that a rerun (another figure) reads none again."""
    import hashlib
    import tempfile

    key = hashlib.sha256(json.dumps([MODEL, name, LAYERS, [it.record["id"] for it in items]]).encode()).hexdigest()
    path = Path(tempfile.gettempdir()) / f"localjury-heads-{key[:16]}.npz"
    if path.is_file():
        held = np.load(path)
        return held["x"], LAYERS, float(held["seconds"])
    started = time.perf_counter()
    x, layers = read_states(engine, judge, items, LAYERS)
    seconds = time.perf_counter() - started
    np.savez(path, x=x, seconds=seconds)
    return x, layers, seconds


def _binding() -> Any:
    from localjury.votes.heads import HeadBinding

    return HeadBinding(model=MODEL, weights_sha256="-", engine="llamacpp", prompt_format="-", criterion="-")


def _ci(f: dict[str, Any]) -> str:
    k, ci = f["kappa"], f.get("kappa_ci")
    if k is None:
        return "-"
    return f"{k:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def markdown(f: dict[str, Any]) -> str:
    lines = [
        "# Decision heads against prompting",
        "",
        f"{f['model']} on {f['engine']}; CPU: {f['cpu']}; command: `{f['command']}`.",
        "",
        "Cohen's kappa [95% bootstrap CI] on each set's 100 records (those `bench-qwen` judged). Prompting: the",
        "judge's zero-shot majority of 3 votes. Heads: 5-fold cross-validation, folds grouped by question or pair.",
        "",
    ]
    for name, s in f["sets"].items():
        lines += [f"## {name} ({s['records']} records, {s['groups']} groups)", ""]
        zero = s["zero_shot_votes_k3"]
        paired = "pair_accuracy" in zero
        first = "zero-shot, pairwise, both orders (k=3)" if paired else "zero-shot votes (k=3)"
        rows = [
            [first, _ci(zero), f"{zero['accuracy']:.2f}", "-"] + ([f"{zero['pair_accuracy']:.2f}"] if paired else [])
        ]
        for layer, h in s["heads"].items():
            rows.append([f"head, block {layer}", _ci(h), f"{h['accuracy']:.2f}", f"{h['auroc']:.2f}"])
            rows[-1] += [f"{h['pair_accuracy']:.2f}"] if paired else []
        header = ["way of deciding", "kappa [95% CI]", "accuracy", "AUROC"] + (["pair accuracy"] if paired else [])
        lines += table(header, rows, "lrrr" + ("r" if paired else ""))
        if paired:
            lines += ["", "The pairwise judge's kappa and accuracy are of its preference; a head's, of each response."]
        curve = ", ".join(f"{n} labels: {k:.2f}" for n, k in s["learning_curve"].items())
        lines += ["", f"Learning curve (block {s['best_layer']}, mean kappa of 20 draws): {curve}.", ""]
        if "speed" in s:
            sp = s["speed"]
            lines += [
                f"Speed on {sp['records']} records: decision mode {sp['decision_mode_per_s']:.2f} judgments/s, "
                f"k=3 generation {sp['generate_k3_per_s']:.2f} judgments/s: **{sp['ratio']:.1f}x**.",
                "",
            ]
    if f["transfer"]:
        lines += ["## Transfer (a head trained on one set, judged on the other)", ""]
        lines += table(["trained -> judged", "kappa [95% CI]", "AUROC"],
                       [[k, _ci(v), f"{v['auroc']:.2f}"] for k, v in f["transfer"].items()], "lrr")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
