"""Proof that a refactoring of the run core moved nothing: a fixed set of runs, saved.

Runs a jury, a composite (faithfulness), adaptive strictness, prompt-overflow truncation and
a sharded run (Ray, when the ``ray`` extra is installed), once with a scripted engine (no
model, seconds) and once with the real embedded SmolLM2 on the transformers engine, plus a
``localjury bench`` run. Each run's results file, summary and manifest are written under
``OUT/<run>/`` with what differs from one run to the next taken out (timings, dates, the
temporary paths, versions of the packages, the hashes of files holding timings), so that two
checkouts can be compared byte for byte::

    PYTHONPATH=src python benchmarks/tools/identity.py /tmp/before          # on the old code
    PYTHONPATH=src python benchmarks/tools/identity.py /tmp/after           # on the new code
    diff -r /tmp/before /tmp/after

``--scripted-only`` skips the real model runs, ``--no-ray`` the sharded ones, ``--only`` names
the runs to do.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from localjury import AspectCritic, Faithfulness, evaluate
from localjury.engines.base import Completion, GenerateCall, render_plain
from localjury.models.registry import ModelSpec

#: Fields that hold timings, dates, versions or machine-specific paths.
VOLATILE = {
    "load_seconds",
    "generate_seconds",
    "judgments_per_second",
    "output_tokens_per_second",
    "started_at",
    "seconds",
    "created_at",
    "python",
    "platform",
    "packages",
    "localjury_version",
    "command",
    "summary",  # the manifest's record of the summary file: its hash covers the timings
}

DATED = AspectCritic("dated", "The response must include a specific date or year.")
POLITE = AspectCritic("polite", "The response is polite.", strictness=3)
CTX = [
    "The Berlin Wall fell on 9 November 1989, when East German authorities opened the border.",
    "Hamlet is a tragedy written by William Shakespeare around 1600.",
]
RECORDS: list[dict[str, Any]] = [
    {"id": "wall", "user_input": "When did the Berlin Wall fall?", "response": "On 9 November 1989.",
     "retrieved_contexts": CTX[:1]},
    {"id": "hamlet", "user_input": "Who wrote Hamlet?", "response": "William Shakespeare, around 1600.",
     "retrieved_contexts": CTX[1:]},
    {"id": "moon", "user_input": "When did people first walk on the Moon?", "response": "Some time ago.",
     "retrieved_contexts": ["Apollo 11 landed on the Moon in July 1969. " * 40]},
    {"id": "tea", "user_input": "How do I make tea?", "response": "Boil water and steep the leaves."},
    {"id": "bad", "user_input": "A record without a response."},
]  # fmt: skip


def digest(*parts: Any) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16)


def respond(model: str, prompt: str, j: int) -> str:
    """Deterministic per (model, prompt, sample), like a seeded engine."""
    if "Break the answer" in prompt:
        n = digest(prompt) % 3
        return json.dumps({"statements": [f"Statement {i} of the answer." for i in range(n)]})
    if "<statements>" in prompt:
        count = len(re.findall(r'<item index="\d+">', prompt.rsplit("<statements>", 1)[1]))
        verdicts = [
            {"statement": f"s{i}", "reason": "r", "verdict": digest(model, prompt, j, i) % 2} for i in range(count)
        ]
        return json.dumps({"verdicts": verdicts})
    h = digest(model, prompt, j)
    return "not json" if h % 7 == 0 else json.dumps({"reason": "because", "verdict": h % 2})


class Scripted:
    """The scripted engine of tests/fakes.py, self-contained so Ray replicas can load it."""

    name = "scripted"

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    def format_prompt(self, messages: Any) -> str:
        return render_plain(messages)

    def count_tokens(self, prompts: list[str]) -> list[int]:
        return [len(p.split()) for p in prompts]

    def generate(self, call: GenerateCall) -> list[list[Completion]]:
        out = []
        sampling = call.sampling
        for p in call.prompts:
            texts = [respond(self.spec.name, f"{p}|{sampling.seed}|{sampling.temperature}", sampling.first_sample + j)
                     for j in range(call.n)]  # fmt: skip
            out.append([Completion(text=t, n_tokens=len(t) // 4, finished=True) for t in texts])
        return out

    def close(self) -> None:
        pass


def scripted_spec(name: str) -> ModelSpec:
    return ModelSpec(name=name, path=f"/nonexistent/{name}", temperature=0.7, context_length=1100)


def strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def save(result: Any, work: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(work.iterdir()):
        text = f.read_text()
        if f.suffix == ".jsonl":
            (dest / f.name).write_text(text)  # results: byte for byte
        else:
            (dest / f.name).write_text(json.dumps(strip(json.loads(text)), indent=1, sort_keys=True) + "\n")


def runs(real: bool) -> dict[str, dict[str, Any]]:
    a, b = scripted_spec("judge-a"), scripted_spec("judge-b")
    fake = {"engine_factory": Scripted, "use_cache": False}
    out: dict[str, dict[str, Any]] = {
        "scripted-jury": dict(metrics=[DATED, POLITE], models=[a, b], seed=3, **fake),
        "scripted-composite": dict(metrics=[Faithfulness(), DATED], models=[a, b], extractor="judge-b", **fake),
        "scripted-adaptive": dict(metrics=[DATED, Faithfulness(strictness=5)], models=[a, b], strictness=5,
                                  adaptive=True, **fake),
        "scripted-truncate": dict(metrics=[DATED, Faithfulness()], models=[a], on_overflow="truncate",
                                  chunk_size=2, tie_break="pass", **fake),
        "scripted-overflow": dict(metrics=[DATED], models=[a], max_tokens=800, **fake),
    }  # fmt: skip
    if real:
        smol = {"models": ["smollm2-135m-instruct"], "engine": "transformers", "use_cache": False, "max_tokens": 96}
        out |= {
            "smollm-jury": dict(metrics=[DATED, POLITE], seed=5, strictness=3, **smol),
            "smollm-composite": dict(metrics=[Faithfulness()], **smol),
            "smollm-adaptive": dict(metrics=[DATED], strictness=3, adaptive=True, seed=7, **smol),
        }
    return out


def sharded(real: bool) -> dict[str, dict[str, Any]]:
    from localjury import RayCluster

    cluster = RayCluster(replicas=2, cpus_per_replica=1, shard_size=2)
    a, b = scripted_spec("judge-a"), scripted_spec("judge-b")
    out: dict[str, dict[str, Any]] = {
        "scripted-sharded": dict(metrics=[DATED, Faithfulness()], models=[a, b], strictness=3, adaptive=True,
                                 engine_factory=Scripted, use_cache=False, cluster=cluster),
    }  # fmt: skip
    if real:
        out["smollm-sharded"] = dict(
            metrics=[DATED],
            models=["smollm2-135m-instruct"],
            engine="transformers",
            strictness=3,
            seed=11,
            max_tokens=96,
            use_cache=False,
            cluster=cluster,
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--scripted-only", action="store_true")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--only", nargs="+", metavar="RUN", help="only these runs (e.g. smollm-bench)")
    args = parser.parse_args(argv)
    real = not args.scripted_only
    work_root = Path(tempfile.gettempdir()) / "localjury-identity-work"
    shutil.rmtree(work_root, ignore_errors=True)
    data = work_root / "data.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    todo = runs(real)
    ray = None
    wanted = set(args.only or [*todo, "scripted-sharded", "smollm-sharded", "smollm-bench"])
    todo = {k: v for k, v in todo.items() if k in wanted}
    if not args.no_ray and wanted & {"scripted-sharded", "smollm-sharded"}:
        try:
            import ray
        except ImportError:
            print("ray not installed: no sharded runs", file=sys.stderr)
        else:
            ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
            todo |= {k: v for k, v in sharded(real).items() if k in wanted}
    try:
        for name, settings in todo.items():
            work = work_root / name
            work.mkdir()
            metrics = settings.pop("metrics")
            models = settings.pop("models")
            result = evaluate(data, metrics, models, out=work / "results.jsonl", **settings)
            save(result, work, args.out / name)
            print(f"{name}: {sum(1 for _ in result.iter_results())} results", file=sys.stderr)
        if real and "smollm-bench" in wanted:
            bench(work_root, args.out / "smollm-bench")
    finally:
        if ray is not None:
            ray.shutdown()


def bench(work_root: Path, dest: Path) -> None:
    from localjury.bench.run import run_bench

    labeled = work_root / "labeled.jsonl"
    rows = [
        {"id": r["id"], "user_input": r["user_input"], "response": r["response"], "gold": i % 2}
        for i, r in enumerate(RECORDS[:4])
    ]
    labeled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = work_root / "bench"
    metric = "dated=The response must include a specific date or year."
    run_bench(labeled, "jsonl", ["smollm2-135m-instruct"], out, metric=metric, strictness=3, use_cache=False)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(out / "predictions.jsonl", dest / "predictions.jsonl")
    metrics = json.loads((out / "metrics.json").read_text())
    (dest / "metrics.json").write_text(json.dumps(strip(metrics), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
