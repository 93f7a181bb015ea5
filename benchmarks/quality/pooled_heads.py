"""Heads on the response's mean state against heads on the prompt's last token: what averaging
a block's output over the response's tokens does to a decision head's agreement with the labels.

    python benchmarks/quality/pooled_heads.py [--sets halueval-general,llmbar,truthfulqa]

The judge, records, prompts, blocks and folds are ``decision_heads.py``'s (Qwen2.5-Coder-1.5B,
GGUF Q4_K_M on llama.cpp; each set's records those its bench run judged; 5-fold cross-validation
grouped by question or pair, C chosen inside the training folds). This script reads each
record's states averaged over its response's tokens (``hidden_states(..., pooling="response")``)
at every block but the last (pooling there asks logits of every response token), and scores the
same heads on them: per block, and on all those blocks together (PCA or none chosen in the
folds); on the pairwise sets, the preference heads too. The last-token rows are
``decision_heads.json``'s, the same states read by the same code (the two readings agree to the
bit, checked on HaluEval). Writes benchmarks/results/pooled_heads.{json,md}, with the CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from localjury.bench._judge import resolve_metric
from localjury.bench.decision_ways import read_states
from localjury.bench.sampling import unit
from localjury.engines import load_engine
from localjury.models.registry import load_registry
from localjury.records.record import parse_record

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table
from _more_ways import preference_figures
from decision_heads import HEAD_CRITERION, MODEL, SEED, SETS, _ci, _head, baseline, per_layer_figures

#: decision_heads.py's blocks but the last.
LAYERS = [3, 7, 10, 14, 17, 21, 24]


def pooled(engine: Any, name: str) -> dict[str, Any]:
    """One set's heads on the response's mean states: per block and together, and the preference
    heads of a pairwise set."""
    items, zero = baseline(name)
    judge = resolve_metric(HEAD_CRITERION.get(name), SETS[name][1], 3)
    started = time.perf_counter()
    x, _ = read_states(engine, judge, [parse_record(it.record) for it in items], LAYERS, "response")
    seconds = time.perf_counter() - started
    gold = [int(it.gold) for it in items]
    groups = [unit(it) for it in items]
    pairs = [str(it.pair) for it in items] if "pair_accuracy" in zero else None
    out: dict[str, Any] = {
        "records": len(items),
        "groups": len(set(groups)),
        "prefill_seconds": seconds,
        "zero_shot_votes_k3": zero,
        "heads": {str(k): v for k, v in per_layer_figures(x, LAYERS, gold, groups, pairs).items()},
    }
    if pairs is not None:
        out["preference"] = preference_figures(x, LAYERS, items, gold, SEED)
    print(f"{name}: {len(items)} records pooled in {seconds:.0f} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="halueval-general,llmbar,truthfulqa")
    args = parser.parse_args(argv)
    last = json.loads((RESULTS / "decision_heads.json").read_text())
    spec = load_registry(None).get(MODEL).model_copy(update={"engine": "llamacpp"})
    engine = load_engine(spec)
    try:
        sets = {name: pooled(engine, name) for name in args.sets.split(",")}
    finally:
        engine.close()
    for name, s in sets.items():  # the last-token heads of the same records, for the side-by-side table
        s["last_token"] = {k: last["sets"][name][k] for k in ("heads", "preference") if k in last["sets"][name]}
    figures = {"benchmark": "pooled_heads", **provenance(__file__, argv), "model": MODEL, "engine": "llamacpp",
               "last_token_from": last["command"], "sets": sets}  # fmt: skip
    save(RESULTS / "pooled_heads", figures, markdown(figures))


def _best(heads: dict[str, Any], key: str = "kappa") -> tuple[str, dict[str, Any]]:
    return max(heads.items(), key=lambda kv: kv[1][key] if kv[1][key] is not None else -1)


def markdown(f: dict[str, Any]) -> str:
    lines = [
        "# Decision heads on the response's mean state",
        "",
        f"{f['model']} on {f['engine']}; CPU: {f['cpu']}; command: `{f['command']}`. Last-token rows:",
        f"`{f['last_token_from']}` (decision_heads.json), the same records and folds.",
        "",
        "Cohen's kappa [95% bootstrap CI], 5-fold cross-validation grouped by question or pair. A pooled",
        "head reads a block's output averaged over the response's tokens; a last-token head, at the",
        "prompt's last token.",
        "",
    ]
    body: list[str] = []
    summary = []
    for name, s in f["sets"].items():
        zero, old = s["zero_shot_votes_k3"], s["last_token"]
        body += [f"## {name} ({s['records']} records, {s['groups']} groups; prompting: kappa {_ci(zero)})", ""]
        rows = []
        for block, h in s["heads"].items():
            was = old["heads"].get(block.replace("+24", "+24+27") if "+" in block else block)
            rows.append([_head(block), _ci(was) if was else "-", _ci(h), f"{h['auroc']:.2f}"])
        body += table(["blocks", "last token", "response mean", "AUROC (mean)"], rows, "lrrr")
        key, best = _best(s["heads"])
        old_key, old_best = _best(old["heads"])
        summary.append([name, "yes/no head", _ci(zero), f"{_ci(old_best)} ({_head(old_key)})",
                        f"{_ci(best)} ({_head(key)})"])  # fmt: skip
        if "preference" in s:
            pref, old_pref = s["preference"]["heads"], old["preference"]["heads"]
            rows = []
            for block, h in pref.items():
                was = old_pref.get(block.replace("+24", "+24+27") if "+" in block else block)
                rows.append([_head(block, "preference head"), f"{was['accuracy']:.2f}" if was else "-",
                             f"{h['accuracy']:.2f}", _ci(h)])  # fmt: skip
            body += [
                "",
                f"Preference heads ({s['preference']['pairs']} pairs; share of pairs right in both orders):",
                "",
            ]
            body += table(["blocks", "last token", "response mean", "kappa (mean)"], rows, "lrrr")
            key, best = _best(pref, "accuracy")
            old_key, old_best = _best(old_pref, "accuracy")
            was = f"{old_best['accuracy']:.2f} ({_head(old_key, 'preference head')})"
            now = f"{best['accuracy']:.2f} ({_head(key, 'preference head')})"
            summary.append([name, "preference head, pairs right", f"{zero['pair_accuracy']:.2f}", was, now])
        body += [""]
    header = ["set", "way", "prompting (k=3)", "best last-token", "best response-mean"]
    lines += [*table(header, summary, "llrrr"), "", *body]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
