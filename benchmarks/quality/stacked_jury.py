"""A jury that weighs its members, end to end: ``localjury align`` with two models on labeled records
compares a stacked jury with the jury's mean by grouped cross-validation, then held-out records are
judged with the profile, the stack (where align kept it) reported beside the mean.

The set's records are split by unit (a question, a pair: :func:`localjury.bench.sampling.unit`),
shuffled with ``--seed``: the first units' records up to ``--train`` are the labels, the next up to
``--test`` are held out; no question is on both sides. Two commands, each timed:

1. ``localjury align train.jsonl --metric NAME --criterion TEXT --models A,B -k K`` (each model's
   heads and calibration, then the jury's decision);
2. ``localjury run test.jsonl --profile profile.yaml`` (each record's score the mean of its models'
   scores; ``stacked`` beside it where the profile holds a stack).

On the held-out records, against the human labels: Cohen's kappa (95% bootstrap interval) of each
member's verdict, of the jury's mean (score above 0.5), and of the stacked jury's verdict where the
profile holds one (else the stack align would have fitted is not there to measure: the table says so).

    python benchmarks/quality/stacked_jury.py [--set halueval-general] [--train 200] [--test 100] [-k 1]
        [--models smollm2-135m-instruct,gemma-3-270m] [--seed 0]

Prints and saves benchmarks/results/stacked_jury.{json,md}, with the CPU and the command.
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

from localjury.bench import stats
from localjury.bench.formats import FORMATS, load
from localjury.bench.sampling import unit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, ROOT, provenance, save, table

DATA = ROOT.parent / "shared" / "data"
SETS = {
    "halueval-general": DATA / "halueval" / "halueval_general.jsonl",
    "truthfulqa": DATA / "truthfulqa" / "finetune_truth.jsonl",
}
MODELS = "smollm2-135m-instruct,gemma-3-270m"
_FIELDS = ("id", "user_input", "response", "retrieved_contexts", "reference")


def _split(items: list[Any], train: int, test: int, seed: int) -> tuple[list[Any], list[Any]]:
    """The labels and the held-out records: whole units, shuffled, no unit on both sides."""
    units: dict[str, list[Any]] = {}
    for it in items:
        units.setdefault(unit(it), []).append(it)
    order = list(units)
    random.Random(seed).shuffle(order)
    left: list[Any] = []
    right: list[Any] = []
    for u in order:
        side = left if len(left) < train else right if len(right) < test else None
        if side is None:
            break
        side.extend(units[u])
    return left, right


def _write(path: Path, items: list[Any], labeled: bool) -> None:
    rows = []
    for it in items:
        row = {k: it.record[k] for k in _FIELDS if it.record.get(k) not in (None, "", [])}
        row["id"] = it.id
        if labeled:
            row.update(gold=it.gold, pair=unit(it))
        rows.append(row)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _localjury(*args: str | Path) -> float:
    """Run a localjury command; its wall seconds."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "localjury.cli", *map(str, args)], check=True)
    return time.perf_counter() - started


def _kappa(gold: list[int], verdicts: list[int | None], seed: int) -> dict[str, Any]:
    c = stats.classification(gold, verdicts, seed=seed)
    ci = list(c["kappa_ci"]) if c["kappa_ci"] is not None else None
    return {"kappa": c["kappa"], "kappa_ci": ci, "accuracy": c["accuracy"],
            "decided": sum(v is not None for v in verdicts)}  # fmt: skip


def measure(args: argparse.Namespace) -> dict[str, Any]:
    fmt = args.set
    name, criterion = FORMATS[fmt].criterion  # type: ignore[misc]
    train, test = _split(load(SETS[fmt], fmt), args.train, args.test, args.seed)
    models = args.models.split(",")
    with tempfile.TemporaryDirectory(prefix="localjury-stacked-") as tmp:
        work = Path(tmp)
        _write(work / "train.jsonl", train, labeled=True)
        _write(work / "test.jsonl", test, labeled=False)
        common = ["--models", args.models, "--seed", str(args.seed), "-q"]
        align = _localjury("align", work / "train.jsonl", "--metric", name, "--criterion", criterion,
                           "-k", str(args.strictness), "-o", work / "profile.yaml", *common)  # fmt: skip
        run = _localjury("run", work / "test.jsonl", "--profile", work / "profile.yaml", "-o", work / "out.jsonl",
                         *common)  # fmt: skip
        profile = yaml.safe_load((work / "profile.yaml").read_text())
        results = {r["record_id"]: r for r in map(json.loads, (work / "out.jsonl").read_text().splitlines())}
    gold = [int(it.gold) for it in test]
    rows = [results[it.id] for it in test]
    verdicts: dict[str, list[int | None]] = {
        m: [next((j["verdict"] for j in r["models"] if j["model"] == m), None) for r in rows] for m in models
    }
    verdicts["jury mean"] = [None if r["score"] is None else int(r["score"] > 0.5) for r in rows]
    if any("stacked" in r for r in rows):
        verdicts["stacked jury"] = [(r.get("stacked") or {}).get("verdict") for r in rows]
    return {
        "set": fmt,
        "models": models,
        "strictness": args.strictness,
        "train": len(train),
        "test": len(test),
        "decisions": [{k: d[k] for k in ("model", "winner")} for d in profile.get("decisions", [])],
        "jury": profile.get("jury"),
        "held_out": {way: _kappa(gold, v, args.seed) for way, v in verdicts.items()},
        "seconds": {"align": round(align, 1), "run with the profile": round(run, 1)},
    }


def _ci(f: dict[str, Any]) -> str:
    if f.get("kappa") is None:
        return "-"
    ci = f.get("kappa_ci")
    return f"{f['kappa']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def markdown(f: dict[str, Any]) -> str:
    jury, s = f["jury"] or {}, f["seconds"]
    cv = [[w["way"], _ci(w), str(w["records"])] for w in jury.get("ways", [])]
    held = [[way, _ci(h), f"{h['accuracy']:.0%}" if h["accuracy"] is not None else "-", str(h["decided"])]
            for way, h in f["held_out"].items()]  # fmt: skip
    each = ", ".join(f"{d['model']} by {d['winner']}" for d in f["decisions"])
    lines = [
        f"# A jury that weighs its members: {f['set']}, end to end",
        "",
        f"{' + '.join(f['models'])}, k={f['strictness']}; CPU: {f['cpu']}; command: `{f['command']}`.",
        "",
        f"`localjury align` on {f['train']} labeled records took {s['align']:.0f} s. Each model decides {each}.",
        f"The jury's decision: **{jury.get('winner')}** ({jury.get('why')}).",
        "",
        *(table(["way (grouped cross-validation on the labels)", "κ", "records"], cv) if cv else []),
        "",
        f"On {f['test']} held-out records (`run --profile`, {s['run with the profile']:.0f} s):",
        "",
        *table(["held out", "κ", "accuracy", "decided"], held),
        "",
    ]
    if "stacked jury" not in f["held_out"]:
        lines += ["The profile kept the mean: no stacked verdicts to measure on the held-out records.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="halueval-general")
    parser.add_argument("--train", type=int, default=200, help="labeled records to align on")
    parser.add_argument("--test", type=int, default=100, help="held-out records to judge with the profile")
    parser.add_argument("--strictness", "-k", type=int, default=1)
    parser.add_argument("--models", default=MODELS, help="the jury, comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    figures = {"benchmark": "stacked_jury", **provenance(__file__, argv), **measure(args)}
    save(RESULTS / "stacked_jury", figures, markdown(figures))


if __name__ == "__main__":
    main()
