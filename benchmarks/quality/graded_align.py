"""`localjury align --rubric` end to end on STS-B: a graded profile built from scored pairs through
the CLI, then held-out pairs judged with it, against the prompted rubric on the same held-out pairs.

The rubric is ``rubric_stsb.py``'s (6 levels: how close the response's meaning is to the
reference's; sentence 1 the reference, sentence 2 the response), written to a rubric file; the
judge Qwen2.5-Coder-1.5B (its models.yaml entry: engine auto, llama.cpp on a CPU). The pairs are
drawn from STS-B dev with ``--seed``: the first ``--train`` are the labels (``score``: the human
mean on 1..6), the next ``--test`` are held out. Three commands, each timed:

1. ``localjury align train.jsonl --rubric same_meaning --rubrics rubric.yaml -k K`` (the model
   grades the labels, then its graded heads are scored by grouped cross-validation; the profile
   keeps one only where its Spearman interval clears the prompted rubric's rho);
2. ``localjury run test.jsonl --profile profile.yaml`` (the profile's way: its head where it
   kept one);
3. ``localjury run test.jsonl --rubrics rubric.yaml -k K`` (the prompted rubric).

On the held-out pairs, each way's scale score (and the prompted rubric's expected score) against
the human scores: Spearman's rho and the quadratically weighted kappa, with 95% bootstrap
intervals (:func:`localjury.bench.scales.scale_agreement`); and the two runs' judgments per second.

    python benchmarks/quality/graded_align.py [--train 200] [--test 100] [--strictness 3] [--seed 0]

Prints and saves benchmarks/results/graded_align.{json,md}, with the CPU and the command.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from rubric_stsb import RUBRIC, obtain

from localjury.bench.scales import scale_agreement

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table

MODEL = "qwen2.5-coder-1.5b-instruct"
#: The engine models.yaml gives it: auto, which is llama.cpp on a CPU (its GGUF).
ENGINE = "auto"
#: What each way is measured by, against the human scores rounded to the scale.
STATS = ("spearman", "quadratic_kappa")


def _write(path: Path, pairs: list[dict[str, Any]]) -> None:
    rows = [{"id": p["id"], "reference": p["sentence1"], "response": p["sentence2"], "score": p["score"] + 1}
            for p in pairs]  # fmt: skip
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _localjury(*args: str | Path) -> float:
    """Run a localjury command; its wall seconds."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "localjury.cli", *map(str, args)], check=True)
    return time.perf_counter() - started


def _scores(results: Path, field: str = "scale_score") -> dict[str, float | None]:
    """Each record's model scale score (or ``expected``: the mean of its expected scores) in a results file."""
    out: dict[str, float | None] = {}
    for line in results.read_text().splitlines():
        row = json.loads(line)
        (model,) = row["models"]
        value = model.get(field)
        if field == "expected":
            known = [v for v in value or [] if v is not None]
            value = sum(known) / len(known) if known else None
        out[row["record_id"]] = value
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rows = [json.loads(line) for line in obtain().read_text().splitlines()]
    order = list(range(len(rows)))
    random.Random(args.seed).shuffle(order)
    train, test = [rows[i] for i in order[: args.train]], [rows[i] for i in order[args.train : args.train + args.test]]
    with tempfile.TemporaryDirectory(prefix="localjury-graded-align-") as tmp:
        work = Path(tmp)
        rubric = {"rubrics": [{"name": RUBRIC.name, "version": 1, "criterion": RUBRIC.criterion,
                               "levels": list(RUBRIC.levels), "needs_reference": True}]}  # fmt: skip
        (work / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
        _write(work / "train.jsonl", train)
        _write(work / "test.jsonl", test)
        common = ["--models", MODEL, "--seed", str(args.seed), "-q"]
        align = _localjury("align", work / "train.jsonl", "--rubric", RUBRIC.name, "--rubrics", work / "rubric.yaml",
                           "-k", str(args.strictness), "-o", work / "profile.yaml", *common)  # fmt: skip
        headed = _localjury("run", work / "test.jsonl", "--profile", work / "profile.yaml", "-o", work / "head.jsonl",
                            *common)  # fmt: skip
        prompted = _localjury("run", work / "test.jsonl", "--rubrics", work / "rubric.yaml", "-k", str(args.strictness),
                              "-o", work / "prompted.jsonl", *common)  # fmt: skip
        profile = yaml.safe_load((work / "profile.yaml").read_text())
        ways = {
            "profile": _scores(work / "head.jsonl"),
            "prompted score": _scores(work / "prompted.jsonl"),
            "prompted expected score": _scores(work / "prompted.jsonl", "expected"),
        }
    gold = [int(p["score"] + 0.5) + 1 for p in test]
    (decision,) = profile["decisions"]
    heads = [{k: h[k] for k in ("layer", "more_layers", "pooling", "c") if k in h} for h in profile.get("heads", [])]
    held_out = {name: scale_agreement(gold, [got.get(p["id"]) for p in test], seed=args.seed)
                for name, got in ways.items()}  # fmt: skip
    seconds = {"align": align, "run with the profile": headed, "run prompted": prompted}
    return {
        "model": MODEL,
        "engine": ENGINE,
        "strictness": args.strictness,
        "train": len(train),
        "test": len(test),
        "decision": decision,
        "head": heads[0] if heads else None,
        "held_out": held_out,
        "seconds": {name: round(value, 1) for name, value in seconds.items()},
    }


def _ci(f: dict[str, Any], name: str) -> str:
    value, ci = f.get(name), f.get(f"{name}_ci")
    if value is None:
        return "-"
    return f"{value:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def markdown(f: dict[str, Any]) -> str:
    d, s = f["decision"], f["seconds"]
    train = [[w["way"], _ci(w, "spearman"), _ci(w, "kappa")] for w in d["ways"]]
    test = [[name, *(_ci(h, k) for k in STATS)] for name, h in f["held_out"].items()]
    speed = f["test"] / s["run with the profile"], f["test"] / s["run prompted"]
    lines = [
        "# A graded profile from scored records: STS-B, end to end",
        "",
        f"{f['model']} on {f['engine']}, k={f['strictness']}; CPU: {f['cpu']}; command: `{f['command']}`.",
        "",
        f"`localjury align --rubric` on {f['train']} STS-B dev pairs scored by people (1..6) took {s['align']:.0f} s.",
        f"Its decision: **{d['winner']}** ({d['why']}).",
        "",
        *table(["way (grouped cross-validation on the labels)", "Spearman", "quadratic κ"], train),
        "",
        f"On {f['test']} held-out pairs: `run --profile` ({s['run with the profile']:.0f} s, "
        f"{speed[0]:.2f} judgments/s) against the prompted rubric ({s['run prompted']:.0f} s, "
        f"{speed[1]:.2f} judgments/s): {speed[0] / speed[1]:.1f}x the speed.",
        "",
        *table(["held out", "Spearman", "quadratic κ"], test),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=200, help="scored pairs to align on")
    parser.add_argument("--test", type=int, default=100, help="held-out pairs to judge both ways")
    parser.add_argument("--strictness", "-k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    figures = {"benchmark": "graded_align", **provenance(__file__, argv), **measure(args)}
    save(RESULTS / "graded_align", figures, markdown(figures))


if __name__ == "__main__":
    main()
