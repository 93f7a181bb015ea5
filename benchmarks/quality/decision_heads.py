"""Decision heads against prompting: what a linear head on the judge's own hidden states does
to agreement with human labels, and how fast decision mode judges, beside the same judge's
zero-shot votes on the same records.

    python benchmarks/quality/decision_heads.py [--sets SET,...] [--speed 20] [--curve 500]

The judge is Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M, llama.cpp). The records of each set are
those its bench run judged (k=3, seed 0: ``benchmarks/results/bench-qwen/SET``, 100 records, or
``bench-qwen-1.5b/SET``, 40 pairs), so the prompting baseline is that run's zero-shot votes on
exactly these records. For each set: the hidden state at the zero-shot prompt's last token, at
several blocks; per block, a head's kappa, accuracy and AUROC by 5-fold cross-validation
grouped by question or pair (:mod:`localjury.votes.heads`, C chosen inside the training folds),
and the same on all the blocks together (PCA or none chosen with C); on the pairwise sets, a
preference head per block and together (:mod:`localjury.votes.preference`: Bradley-Terry on the
pair's difference, cross-validated over the pairs); on the others, the bench run's jury stacked
from the labels beside its mean (``_more_ways.py``); the learning curve of the best block (heads
trained on 25 to 75 labels, judged on the records of the other groups, 20 draws); transfer (the
head of one set judged on another of its kind).
``--curve N``: N TruthfulQA answers more, heads by grouped cross-validation and the learning
curve up to 400 labels. Speed: judgments per second of decision mode (one prefill a record,
stopped after the head's block) against the same prefills through every block and k=3
generation under the schema, on the same ``--speed`` records, in one run.
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
from localjury.bench.decision_ways import read_states
from localjury.bench.formats import load
from localjury.bench.sampling import sample, unit
from localjury.engines import load_engine
from localjury.engines.base import GenerateCall, Sampling
from localjury.metrics.neutralise import Neutraliser
from localjury.models._tokenizer_files import tokenizer_markers
from localjury.models.registry import load_registry
from localjury.records.record import parse_record
from localjury.types import Pooling
from localjury.votes.heads import cross_validated, fit_head, grouped_folds

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, ROOT, provenance, save, table
from _more_ways import figures_of, jury_figures, preference_figures

DATA = ROOT.parent / "shared" / "data"
MODEL = "qwen2.5-coder-1.5b-instruct"
#: Each set: its file, its format and the bench run whose zero-shot votes are the baseline
#: (``bench-qwen``: the Qwen panel's runs; ``bench-qwen-1.5b``: the 1.5B alone, 40 pairs each).
SETS = {
    "truthfulqa": (DATA / "truthfulqa" / "finetune_truth.jsonl", "truthfulqa", "bench-qwen"),
    "halueval-general": (DATA / "halueval" / "halueval_general.jsonl", "halueval-general", "bench-qwen"),
    "halueval-qa": (DATA / "halueval" / "halueval_qa_dev500.jsonl", "halueval-qa", "bench-qwen"),
    "llmbar": (DATA / "llmbar" / "llmbar_natural.json", "llmbar", "bench-qwen"),
    "llmbar-adversarial": (DATA / "llmbar" / "llmbar_adversarial_neighbor.json", "llmbar", "bench-qwen-1.5b"),
    "mtbench": (DATA / "llmbar" / "processed_mtbench_human.json", "llmbar", "bench-qwen-1.5b"),
}
#: The criterion a head reads where the set's own metric is a composite with no single prompt
#: (HaluEval QA's is faithfulness: its baseline stays the composite's votes).
HEAD_CRITERION = {
    "halueval-qa": (
        "grounded=The response is supported by the retrieved contexts: each of its claims is stated in them."
    ),
}
#: Transfer is measured between sets of one kind: truthfulness and grounding; following instructions.
KIND = {name: "pairs" if fmt == "llmbar" else "facts" for name, (_, fmt, _) in SETS.items()}
#: Blocks read (the 1.5B has 28): every fourth, the middle ones, and the last.
LAYERS = [3, 7, 10, 14, 17, 21, 24, 27]
SEED = 0


def baseline(name: str) -> tuple[list[Any], dict[str, Any]]:
    """The records the set's bench run judged (for the pairwise sets, judged there as pairs in
    both orders: both responses of each pair, pointwise), and its zero-shot votes' figures there."""
    path, fmt, run = SETS[name]
    rows = [json.loads(x) for x in (RESULTS / run / name / "predictions.jsonl").read_text().splitlines()]
    gold = [r["gold"] for r in rows]
    pred = [r["models"][MODEL]["prediction"] for r in rows]
    c = stats.classification(gold, pred, seed=SEED)
    ci = list(c["kappa_ci"]) if c["kappa_ci"] is not None else None
    out = {"kappa": c["kappa"], "kappa_ci": ci, "accuracy": c["accuracy"]}
    items = load(path, fmt)
    if fmt == "llmbar":  # the pairwise judge's accuracy is its pair accuracy
        pairs = {r["record_id"] for r in rows}
        return [it for it in items if it.pair in pairs], {**out, "pair_accuracy": c["accuracy"]}
    by_id = {str(it.record["id"]): it for it in items}
    return [by_id[r["record_id"]] for r in rows], out


def length_auroc(items: list[Any], gold: list[int]) -> float:
    """How well the response's length alone ranks the labels (AUROC of the word count; 0.5 is
    no signal, far from it is an artifact a head can learn without reading the criterion)."""
    words = np.array([len(str(it.record.get("response", "")).split()) for it in items])
    labels = np.array(gold)
    return stats.auroc_of(words[labels == 1], words[labels == 0])


def pair_accuracy(pairs: list[str], gold: list[int], score: list[float]) -> float:
    """The share of pairs whose gold-1 response scores higher than its gold-0 one (a tie counts half)."""
    by: dict[str, dict[int, float]] = {}
    for pair, g, s in zip(pairs, gold, score, strict=True):
        by.setdefault(pair, {})[g] = s
    wins = [0.5 if d[1] == d[0] else float(d[1] > d[0]) for d in by.values() if set(d) == {0, 1}]
    return sum(wins) / len(wins)


def learning_curve(
    x: np.ndarray, gold: list[int], groups: list[str], sizes: list[int], reduce: bool = False
) -> dict[int, dict[str, float]]:
    """Kappa (mean and standard deviation over 20 draws) of a head trained on ``size`` labels
    (whole groups) and judged on every record of the other groups (``reduce``: PCA or none chosen
    with C, for several blocks' states together)."""
    from localjury.votes.heads import fit_logistic

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
            model, _ = fit_logistic(x[tr], y[tr], np.asarray(groups)[tr], SEED, reduce)
            p = model.predict_proba(x[te])[:, 1]
            ks.append(stats.classification(y[te].tolist(), [int(v >= 0.5) for v in p], seed=SEED)["kappa"])
        kept = [k for k in ks if k is not None]
        out[size] = {"kappa": float(np.mean(kept)), "sd": float(np.std(kept)), "draws": len(kept)}
    return out


def speed(engine: Any, judge: Any, items: list[Any], head_layer: int) -> dict[str, float]:
    """Judgments per second: decision mode against k=3 generation, the same prompts, each
    after an untimed warm-up call on another record (its reader's context, the constraint's index)."""
    neutralise = Neutraliser(tokenizer_markers(engine.spec.tokenizer_dir()))
    warm, *prompts = [engine.format_prompt(judge.messages(parse_record(it.record), neutralise)) for it in items]
    engine.hidden_states([warm], [head_layer])
    engine.generate(GenerateCall([warm], 3, Sampling(0.7, 1.0, 256, SEED), judge.json_schema()))
    started = time.perf_counter()
    engine.hidden_states(prompts, [head_layer])
    heads = time.perf_counter() - started
    started = time.perf_counter()  # the same prefills run through every block: what reading cost before it stopped
    engine.hidden_states(prompts, [head_layer, engine.block_count() - 1])
    full_depth = time.perf_counter() - started
    started = time.perf_counter()
    engine.generate(GenerateCall(prompts, 3, Sampling(0.7, 1.0, 256, SEED), judge.json_schema()))
    generate = time.perf_counter() - started
    return {
        "records": len(prompts),
        "decision_mode_per_s": len(prompts) / heads,
        "layer": head_layer,
        "blocks": engine.block_count(),
        "full_depth_per_s": len(prompts) / full_depth,
        "generate_k3_per_s": len(prompts) / generate,
        "ratio": generate / heads,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--speed", type=int, default=20, help="records of the speed comparison (0: none)")
    parser.add_argument("--curve", type=int, default=500, help="TruthfulQA records of the learning curve (0: none)")
    args = parser.parse_args(argv)
    spec = load_registry(None).get(MODEL).model_copy(update={"engine": "llamacpp"})
    engine = load_engine(spec)
    sets: dict[str, Any] = {}
    states: dict[str, tuple[np.ndarray, list[int], list[str]]] = {}
    try:
        for name in args.sets.split(","):
            items, zero = baseline(name)
            judge = resolve_metric(HEAD_CRITERION.get(name), SETS[name][1], 3)
            x, layers, seconds = cached_states(engine, judge, items, name)
            gold = [int(it.gold) for it in items]
            groups = [unit(it) for it in items]
            pairs = [str(it.pair) for it in items] if "pair_accuracy" in zero else None
            per_layer = per_layer_figures(x, layers, gold, groups, pairs)
            best = max((k for k in per_layer if isinstance(k, int)), key=lambda k: per_layer[k]["kappa"] or -1)
            states[name] = (x, gold, groups)
            print(f"{name}: {len(items)} records read in {seconds:.0f} s; best block {best}", flush=True)
            sets[name] = {
                "records": len(items),
                "groups": len(set(groups)),
                "length_auroc": length_auroc(items, gold),
                "prefill_seconds": seconds,
                "zero_shot_votes_k3": zero,
                "heads": {str(k): v for k, v in per_layer.items()},
                "best_layer": best,
                "learning_curve": learning_curve(x[:, layers.index(best)], gold, groups, [25, 50, 75]),
            }
            if pairs is not None:
                sets[name]["preference"] = preference_figures(x, layers, items, gold, SEED)
            else:
                head = cross_validated(x[:, layers.index(best)], gold, groups, folds=5, seed=SEED)
                sets[name]["jury"] = jury_figures(RESULTS / SETS[name][2] / name, items, gold, groups, head, SEED)
            if args.speed and name == args.sets.split(",")[0]:
                sets[name]["speed"] = speed(engine, judge, items[: args.speed + 1], best)
        curve = truthfulqa_curve(engine, args.curve) if args.curve else None
        transfer = {}
        for a in states:
            for b in states:
                if a != b and KIND[a] == KIND[b]:  # a's best block's head on b's states there (b's own prompt)
                    (xa, ga, gra), j = states[a], LAYERS.index(sets[a]["best_layer"])
                    head = fit_head(xa[:, j], ga, gra, LAYERS[j], _binding(), SEED)
                    transfer[f"{a} -> {b}"] = figures_of(
                        states[b][1], [head.probability(v) for v in states[b][0][:, j]]
                    )
    finally:
        engine.close()
    figures = {"benchmark": "decision_heads", **provenance(__file__, argv), "model": MODEL, "engine": "llamacpp",
               "sets": sets, "curve": curve, "transfer": transfer}  # fmt: skip
    save(RESULTS / "decision_heads", figures, markdown(figures))


def per_layer_figures(
    x: np.ndarray, layers: list[int], gold: list[int], groups: list[str], pairs: list[str] | None
) -> dict[int, dict[str, Any]]:
    """Each block's head by 5-fold cross-validation grouped by ``groups``; with ``pairs``, also
    its pair accuracy (the pair's higher probability wins)."""
    assert all(len({groups[i] for i in te} & {groups[i] for i in tr}) == 0
               for tr, te in grouped_folds(groups, gold, 5, SEED))  # fmt: skip
    out: dict[int | str, dict[str, Any]] = {}
    for j, layer in enumerate([*layers, "+".join(str(i) for i in layers)]):
        together = j == len(layers)  # all the blocks' states one after another, PCA chosen in the folds
        p = cross_validated(x.reshape(len(x), -1) if together else x[:, j], gold, groups, folds=5, seed=SEED,
                            reduce=together)  # fmt: skip
        out[layer] = figures_of(gold, p)
        if pairs is not None:
            out[layer]["pair_accuracy"] = pair_accuracy(pairs, gold, p)
    return out


def truthfulqa_curve(engine: Any, records: int) -> dict[str, Any]:
    """More labels: ``records`` TruthfulQA answers (whole questions, seed 1), each block's head
    by grouped cross-validation, and the learning curve of the best block up to 400 labels."""
    path, fmt, _ = SETS["truthfulqa"]
    items = sample(load(path, fmt), records, seed=1)
    x, layers, seconds = cached_states(engine, resolve_metric(None, fmt, 3), items, "truthfulqa-curve")
    gold = [int(it.gold) for it in items]
    groups = [unit(it) for it in items]
    per_layer = per_layer_figures(x, layers, gold, groups, None)
    best = max((k for k in per_layer if isinstance(k, int)), key=lambda k: per_layer[k]["kappa"] or -1)
    sizes = [n for n in (25, 50, 100, 200, 400) if n < len(items)]
    print(f"truthfulqa curve: {len(items)} records read in {seconds:.0f} s; best block {best}", flush=True)
    return {
        "records": len(items),
        "groups": len(set(groups)),
        "prefill_seconds": seconds,
        "heads": {str(k): v for k, v in per_layer.items()},
        "best_layer": best,
        "learning_curve": learning_curve(x[:, layers.index(best)], gold, groups, sizes),
    }


def cached_states(
    engine: Any, judge: Any, items: list[Any], name: str, layers: list[int] = LAYERS, pooling: Pooling = "last"
) -> tuple[np.ndarray, list[int], float]:
    """The states of a set's records at ``layers`` (where ``pooling`` says), and the seconds reading
    them took; kept in ``$TMPDIR`` by set, blocks, pooling and record ids, so that a rerun (another
    figure) reads none again."""
    import hashlib
    import tempfile

    ids = [it.record["id"] for it in items]
    held_as = [MODEL, name, layers, ids] if pooling == "last" else [MODEL, name, layers, pooling, ids]
    key = hashlib.sha256(json.dumps(held_as).encode()).hexdigest()
    path = Path(tempfile.gettempdir()) / f"localjury-heads-{key[:16]}.npz"
    if path.is_file():
        held = np.load(path)
        return held["x"], layers, float(held["seconds"])
    started = time.perf_counter()
    x, layers = read_states(engine, judge, [parse_record(it.record) for it in items], layers, pooling)
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


def _head(blocks: Any, kind: str = "head") -> str:
    """A row's name: ``head, block 7``, or ``head, blocks 3+7+27 together`` for the blocks' states
    one after another (PCA or the regularisation alone chosen in the folds)."""
    if "+" in str(blocks):
        return f"{kind}, blocks {blocks} together"
    return f"{kind}, block {blocks}"


def _curve(s: dict[str, Any]) -> str:
    return ", ".join(f"{n} labels: {v['kappa']:.2f} ± {v['sd']:.2f}" for n, v in s["learning_curve"].items())


def markdown(f: dict[str, Any]) -> str:
    lines = [
        "# Decision heads against prompting",
        "",
        f"{f['model']} on {f['engine']}; CPU: {f['cpu']}; command: `{f['command']}`.",
        "",
        "Cohen's kappa [95% bootstrap CI] on each set's records: those its bench run judged (`bench-qwen`: 100",
        "records; `bench-qwen-1.5b`: 40 pairs). Prompting: the judge's zero-shot majority of 3 votes. Heads:",
        "5-fold cross-validation, folds grouped by question or pair.",
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
            rows.append([_head(layer), _ci(h), f"{h['accuracy']:.2f}", f"{h['auroc']:.2f}"])
            rows[-1] += [f"{h['pair_accuracy']:.2f}"] if paired else []
        header = ["way of deciding", "kappa [95% CI]", "accuracy", "AUROC"] + (["pair accuracy"] if paired else [])
        lines += table(header, rows, "lrrr" + ("r" if paired else ""))
        auroc = s["length_auroc"]
        lines += ["", f"The response's length alone ranks the labels with AUROC {auroc:.2f} (0.5: no signal)."]
        if paired:
            lines += ["", "The pairwise judge's kappa and accuracy are of its preference; a head's, of each response."]
        if s.get("jury"):
            j = s["jury"]
            rows = [[f"{m} alone", _ci(f), f"{f['accuracy']:.2f}", f"{f['auroc']:.2f}"] for m, f in j["each"].items()]
            rows += [[way, _ci(j[key]), f"{j[key]['accuracy']:.2f}", f"{j[key]['auroc']:.2f}"]
                     for way, key in (("jury: the mean (a run's today)", "mean"), ("jury: stacked", "stacked"),
                                      ("jury: stacked, with the head", "stacked_with_head"))]  # fmt: skip
            lines += ["", "Jury (the bench run's verdict probabilities; stacked: a logistic regression on their "
                      "log-odds, learned by the same grouped 5-fold cross-validation):", ""]  # fmt: skip
            lines += table(["way of deciding", "kappa [95% CI]", "accuracy", "AUROC"], rows, "lrrr")
        if "preference" in s:
            pref = s["preference"]
            lines += ["", f"Preference heads ({pref['pairs']} pairs; kappa and accuracy of the preference, right in "
                      "both orders, 5-fold cross-validation over the pairs):", ""]  # fmt: skip
            lines += table(["way of deciding", "kappa [95% CI]", "pairs right", "AUROC"],
                           [[_head(k, "preference head"), _ci(h), f"{h['accuracy']:.2f}", f"{h['auroc']:.2f}"]
                            for k, h in pref["heads"].items()], "lrrr")  # fmt: skip
        lines += ["", f"Learning curve (block {s['best_layer']}, kappa of 20 draws): {_curve(s)}.", ""]
        if "speed" in s:
            sp = s["speed"]
            lines += [
                f"Speed on {sp['records']} records: decision mode {sp['decision_mode_per_s']:.2f} judgments/s, "
                f"k=3 generation {sp['generate_k3_per_s']:.2f} judgments/s: **{sp['ratio']:.1f}x**.",
                "",
            ]
            if "full_depth_per_s" in sp:
                lines += [
                    f"The prefill stops after block {sp['layer']} of {sp['blocks']}; run through every block, the "
                    f"same prefills give {sp['full_depth_per_s']:.2f} judgments/s "
                    f"(stopping there is {sp['decision_mode_per_s'] / sp['full_depth_per_s']:.1f}x as fast).",
                    "",
                ]
    c = f.get("curve")
    if c:
        lines += [f"## More labels: TruthfulQA, {c['records']} records ({c['groups']} questions)", ""]
        lines += table(["way of deciding", "kappa [95% CI]", "accuracy", "AUROC"],
                       [[_head(k), _ci(h), f"{h['accuracy']:.2f}", f"{h['auroc']:.2f}"]
                        for k, h in c["heads"].items()], "lrrr")  # fmt: skip
        lines += ["", f"Learning curve (block {c['best_layer']}, kappa of 20 draws, mean ± sd): {_curve(c)}.", ""]
    if f["transfer"]:
        lines += ["## Transfer (a head trained on one set, judged on another of its kind)", ""]
        lines += table(["trained -> judged", "kappa [95% CI]", "AUROC"],
                       [[k, _ci(v), f"{v['auroc']:.2f}"] for k, v in f["transfer"].items()], "lrr")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
