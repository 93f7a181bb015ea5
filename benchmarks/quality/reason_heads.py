"""Heads after the reason against heads on the prompt and against the verdict the judge writes:
what reading the judge's state where, having written its reason, it is about to write its
verdict does to a decision head's agreement with the labels.

    python benchmarks/quality/reason_heads.py [--sets halueval-general,truthfulqa]

The judge, records, prompts, blocks and folds are ``decision_heads.py``'s (Qwen2.5-Coder-1.5B,
GGUF Q4_K_M on llama.cpp; each set's records those its bench run judged; 5-fold cross-validation
grouped by question, C chosen inside the training folds). For each record, the judge writes one
greedy answer to the zero-shot prompt under the criterion's schema (its token budget in
models.yaml), and the states are read at the end of the prompt followed by that answer up to its
verdict (``BatchEngine.states_after_reason``, what ``align`` and a run with such a head do). The
same heads are scored on them: per block, and on all the blocks together (PCA or none chosen
in the folds). Beside them: the verdict that greedy answer wrote (the judge prompted,
k=1), the bench run's k=3 votes, and the last-token and response-mean heads of
``decision_heads.json`` and ``pooled_heads.json`` (the same records and folds). Writes
benchmarks/results/reason_heads.{json,md}, with the CPU.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from localjury.bench import stats
from localjury.bench._judge import resolve_metric
from localjury.bench.decision_ways import zero_shot_prompts
from localjury.bench.sampling import unit
from localjury.engines import load_engine
from localjury.engines.base import GenerateCall
from localjury.models.registry import load_registry
from localjury.records.record import parse_record
from localjury.types import Sampling

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table
from decision_heads import HEAD_CRITERION, LAYERS, MODEL, SEED, SETS, _ci, _head, baseline, per_layer_figures


def after_reason(engine: Any, name: str) -> dict[str, Any]:
    """One set's heads on the states after the judge's greedy reason, per block and together, and
    the verdicts that reason was followed by."""
    items, zero = baseline(name)
    judge = resolve_metric(HEAD_CRITERION.get(name), SETS[name][1], 3)
    records = [parse_record(it.record) for it in items]
    sampling = Sampling(0.0, 1.0, engine.spec.max_tokens, SEED)
    call = GenerateCall(zero_shot_prompts(engine, judge, records), 1, sampling, judge.json_schema())
    held = Path(tempfile.gettempdir()) / f"localjury-reason-heads-{name}-{engine.spec.max_tokens}.pkl"
    if held.is_file():  # a rerun (another figure) writes and reads nothing again
        answers, x, seconds = pickle.loads(held.read_bytes())
    else:
        started = time.perf_counter()
        answers, x = engine.states_after_reason(call, LAYERS)
        seconds = time.perf_counter() - started
        held.write_bytes(pickle.dumps((answers, x, seconds)))
    gold = [int(it.gold) for it in items]
    groups = [unit(it) for it in items]
    written = [judge.parse(a.text, finished=a.finished).vote for a in answers]
    # an answer with no verdict counts as a fail, as a run's abstention does not pass
    kappa = {
        **stats.classification(gold, [v or 0 for v in written], seed=SEED),
        "decided": sum(v is not None for v in written),
    }
    out: dict[str, Any] = {
        "records": len(items),
        "groups": len(set(groups)),
        "seconds": seconds,
        "answer_tokens": sum(a.n_tokens for a in answers),
        "no_verdict": sum(v is None for v in written),
        "zero_shot_votes_k3": zero,
        "written_verdict_k1": kappa,
        "heads": {str(k): v for k, v in per_layer_figures(x, LAYERS, gold, groups, None).items()},
    }
    print(f"{name}: {len(items)} answers written and read in {seconds:.0f} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="halueval-general,truthfulqa")
    args = parser.parse_args(argv)
    last = json.loads((RESULTS / "decision_heads.json").read_text())
    pooled = json.loads((RESULTS / "pooled_heads.json").read_text())
    spec = load_registry(None).get(MODEL).model_copy(update={"engine": "llamacpp"})
    engine = load_engine(spec)
    try:
        sets = {name: after_reason(engine, name) for name in args.sets.split(",")}
    finally:
        engine.close()
    for name, s in sets.items():  # the other readings' heads on the same records, for the side-by-side table
        s["last_token"] = last["sets"][name]["heads"]
        s["response_mean"] = pooled["sets"][name]["heads"] if name in pooled["sets"] else None
    figures = {"benchmark": "reason_heads", **provenance(__file__, argv), "model": MODEL, "engine": "llamacpp",
               "budget": spec.max_tokens, "sets": sets}  # fmt: skip
    save(RESULTS / "reason_heads", figures, markdown(figures))


def _best(heads: dict[str, Any] | None) -> str:
    if not heads:
        return "-"
    key, best = max(heads.items(), key=lambda kv: kv[1]["kappa"] if kv[1]["kappa"] is not None else -1)
    return f"{_ci(best)} ({_head(key)})"


def markdown(f: dict[str, Any]) -> str:
    lines = [
        "# Decision heads after the reason",
        "",
        f"{f['model']} on {f['engine']}; CPU: {f['cpu']}; command: `{f['command']}`.",
        "",
        "Cohen's kappa [95% bootstrap CI], 5-fold cross-validation grouped by question. A head after the",
        "reason reads the state where the judge, having written its reason (one greedy answer, at most",
        f"{f['budget']} tokens), is about to write its verdict. The written verdict is the one that answer",
        "then wrote. The last-token and response-mean heads are decision_heads.json's and pooled_heads.json's.",
        "",
    ]
    summary, body = [], []
    for name, s in f["sets"].items():
        w = s["written_verdict_k1"]
        summary.append([name, _ci(s["zero_shot_votes_k3"]), _ci(w), _best(s["last_token"]),
                        _best(s["response_mean"]), _best(s["heads"])])  # fmt: skip
        body += [
            f"## {name} ({s['records']} records, {s['groups']} groups)",
            "",
            f"{s['answer_tokens']:,} answer tokens written; answers with no verdict: {s['no_verdict']}.",
            "",
        ]
        rows = [[_head(block), _ci(s["last_token"][block]), _ci(h), f"{h['auroc']:.2f}"]
                for block, h in s["heads"].items()]  # fmt: skip
        body += [*table(["blocks", "last token", "after the reason", "AUROC (after)"], rows, "lrrr"), ""]
    header = ["set", "prompting (k=3)", "written verdict (k=1)", "best last-token", "best response-mean",
              "best after the reason"]  # fmt: skip
    lines += [*table(header, summary, "lrrrrr"), "", *body]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
