"""Memory and speed of a run over a large dataset, with an instant fake engine.

What it measures is localjury itself — reading, prompting, the judgment store, voting and
writing — not a model: the engine answers every prompt at once. Each size runs in a fresh
process, which reports its peak RSS (ru_maxrss) before and after the run; memory is bounded
when the peak does not grow with the number of records.

    .venv/bin/python benchmarks/performance/scale.py --records 10000 100000
    .venv/bin/python benchmarks/performance/scale.py --records 10000 100000 --replicas 2   # sharded on a local Ray
    .venv/bin/python benchmarks/performance/scale.py --records 20000 100000 --pad 2000 --source jsonl datasets

With ``--source datasets`` the same records are saved with Hugging Face ``datasets``'
``save_to_disk`` and the run reads that folder (memory-mapped Arrow, a batch at a time);
``--pad N`` adds N characters to every response, so that the data outweighs the process.

With ``--replicas N`` the run is sharded over N one-core replicas on a local Ray: what it
measures is the sharded path's own cost (the driver's dry pass over the store, pickling, Ray's
object store, committing shards). The peak RSS is the driver's; shards waiting in Ray's object
store (shared memory, spilled to disk when full) and the replicas are not in it.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from localjury import AspectCritic, evaluate
from localjury.engines.base import Completion, render_plain
from localjury.models.registry import ModelSpec

class InstantEngine:
    name = "instant"
    def __init__(self, spec):
        self.spec = spec
    def format_prompt(self, messages):
        return render_plain(messages)
    def count_tokens(self, prompts):
        return [len(p) // 4 for p in prompts]
    def generate(self, call):
        text = '{"reason": "It names a year.", "verdict": 1}'
        return [[Completion(text, 12, True) for _ in range(call.n)] for _ in call.prompts]
    def close(self):
        pass

data, work, chunk, replicas = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cluster = None
if replicas:  # a local Ray, started before the clock (the engine class travels by value from __main__)
    import ray
    from localjury import RayCluster
    ray.init(num_cpus=replicas, include_dashboard=False, logging_level="ERROR")
    cluster = RayCluster(replicas=replicas, cpus_per_replica=1)
peaks = {"RssAnon": 0, "RssFile": 0}

def sample():  # what the peak RSS is made of: memory of our own, or pages of mapped files
    while True:
        for line in open("/proc/self/status"):
            key = line.split(":")[0]
            if key in peaks:
                peaks[key] = max(peaks[key], int(line.split()[1]))
        time.sleep(0.05)

import threading
threading.Thread(target=sample, daemon=True).start()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
result = evaluate(
    data, [AspectCritic("dated", "The response must include a specific date or year.")],
    [ModelSpec(name="instant", path=str(work / "no-weights"))], strictness=3, chunk_size=chunk,
    cache=work / "store.sqlite", out=work / "results.jsonl", engine_factory=InstantEngine, cluster=cluster,
)
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
lines = sum(1 for _ in (work / "results.jsonl").open())
print(json.dumps({"seconds": seconds, "rss_before_kib": before, "rss_peak_kib": peak, "result_lines": lines,
                  "anon_peak_kib": peaks["RssAnon"], "file_peak_kib": peaks["RssFile"],
                  "mean_score": result.summary.metrics[0].mean_score}))
"""


def make_data(path: Path, n: int, pad: int = 0) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            response = f"In {1900 + i % 120}." + (" " + "x" * pad if pad else "")
            rec = {"id": f"r{i}", "user_input": f"When did event {i} happen?", "response": response}
            fh.write(json.dumps(rec) + "\n")


SAVE = r"""
import json, sys
from pathlib import Path
import datasets

jsonl, folder = Path(sys.argv[1]), Path(sys.argv[2])

def rows():
    with jsonl.open(encoding="utf-8") as fh:
        yield from (json.loads(line) for line in fh)

datasets.disable_progress_bars()
datasets.Dataset.from_generator(rows, cache_dir=str(folder.parent / "hf-cache")).save_to_disk(folder)
"""


def save_as_dataset(jsonl: Path, folder: Path) -> None:
    """The JSONL records as a ``save_to_disk`` folder, made in a process of its own: a child
    process inherits its parent's peak RSS (ru_maxrss survives fork and exec), so the process
    that measures must not be the one that built the dataset, nor its parent."""
    subprocess.run([sys.executable, "-c", SAVE, str(jsonl), str(folder)], check=True, capture_output=True)


def size_mib(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return round(sum(p.stat().st_size for p in files) / 2**20, 1)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--chunk-size", type=int, default=1024)
    parser.add_argument("--replicas", type=int, default=0, help="shard over this many replicas on a local Ray")
    parser.add_argument("--pad", type=int, default=0, help="characters added to every response")
    parser.add_argument("--source", nargs="+", default=["jsonl"], choices=["jsonl", "datasets"])
    parser.add_argument("--out", default=None, help="path stem for .json and .md (default results/scale[-ray])")
    args = parser.parse_args(argv)
    if args.out is None:
        name = "scale-ray" if args.replicas else "scale-datasets" if "datasets" in args.source else "scale"
        args.out = str(RESULTS / name)
    rows = []
    # With --replicas, each size runs in one process first (the baseline) and then sharded.
    for n, source in ((n, source) for n in args.records for source in args.source):
        for replicas in [0, args.replicas] if args.replicas else [0]:
            with tempfile.TemporaryDirectory(prefix="localjury-scale-") as tmp:
                work = Path(tmp)
                data = work / "data.jsonl"
                make_data(data, n, args.pad)
                if source == "datasets":
                    save_as_dataset(data, work / "data")
                    data.unlink()
                    data = work / "data"
                t = time.perf_counter()
                proc = subprocess.run(
                    [sys.executable, "-c", CHILD, str(data), str(work), str(args.chunk_size), str(replicas)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                wall = time.perf_counter() - t
                child = json.loads(proc.stdout.strip().splitlines()[-1])
                assert child["result_lines"] == n, child
                row = {
                    "records": n,
                    "run": f"ray, {replicas} replicas" if replicas else "one process",
                    "source": "save_to_disk folder" if source == "datasets" else "JSONL file",
                    "data_mib": size_mib(data),
                    "seconds": round(child["seconds"], 1),
                    "records_per_s": round(n / child["seconds"], 1),
                    "rss_after_imports_mib": round(child["rss_before_kib"] / 1024, 1),
                    "rss_peak_mib": round(child["rss_peak_kib"] / 1024, 1),
                    "anon_peak_mib": round(child["anon_peak_kib"] / 1024, 1),
                    "file_peak_mib": round(child["file_peak_kib"] / 1024, 1),
                    "process_wall_s": round(wall, 1),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    report = {
        "benchmark": "scale (instant fake engine, strictness 3, one criterion)",
        **provenance(__file__, argv),
        "pad": args.pad,
        "chunk_size": args.chunk_size,
        "replicas": args.replicas or None,
        "machine": f"{platform.machine()}, {platform.system()}, {resource.getpagesize()} B pages",
        "rows": rows,
    }
    save(args.out, report, markdown(report))
    return report


def markdown(report: dict) -> str:
    """The figures as the committed Markdown: one row per size (and source, and run)."""
    pad, replicas = report["pad"], report["replicas"]
    lines = [
        f"# Scale — instant fake engine, strictness 3, chunk size {report['chunk_size']}"
        + (f", responses padded by {pad} characters" if pad else "")
        + (f", sharded over {replicas} replicas on a local Ray (driver RSS)" if replicas else ""),
        "",
        *table(
            [
                "records",
                "run",
                "source",
                "data MiB",
                "seconds",
                "records/s",
                "RSS after imports MiB",
                "peak RSS MiB",
                "of it, own (anon) MiB",
                "of it, mapped files MiB",
            ],
            (
                [
                    r["records"],
                    r["run"],
                    r["source"],
                    r["data_mib"],
                    r["seconds"],
                    r["records_per_s"],
                    r["rss_after_imports_mib"],
                    r["rss_peak_mib"],
                    r["anon_peak_mib"],
                    r["file_peak_mib"],
                ]
                for r in report["rows"]
            ),
        ),
        "",
        f"Command: `{report['command']}`  ",
        f"CPU: {report['cpu']}",
        "",
        "Peak RSS counts the pages of memory-mapped files the process touched (a `save_to_disk` folder's Arrow "
        "files): the kernel drops them under memory pressure, as it does a file's page cache. The last two "
        "columns split the peak, sampled every 50 ms from /proc/self/status: memory of the process's own "
        "(RssAnon) and pages of mapped files (RssFile).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
