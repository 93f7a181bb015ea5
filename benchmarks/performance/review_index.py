"""How fast `localjury review` opens a big results file, and how much memory it holds: its index
of offsets, against reading every result into memory (as `localjury show` does).

Writes a run's results of ``--rows`` rows (two models, three samples each with a reason of about
100 characters: about 1.5 KB a row) and its data set as JSONL, in a temporary folder; then, each in
a process of its own,

- ``review``: opens the review (the results indexed, the data set indexed by id), renders the
  queue's first page and one record's page through the app, as the browser asks for them;
- ``read whole``: every row read and validated into a list (`read_results`), the baseline;

and records that process's peak resident memory (``ru_maxrss``, from ``os.wait4``) and the
seconds it took to be ready (the imports not counted: each child times from after them).

    .venv/bin/python benchmarks/performance/review_index.py
    .venv/bin/python benchmarks/performance/review_index.py --rows 10000 100000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table

#: Opened in a child: the review and its first two pages, timed from after the imports.
REVIEW = """
import sys, time
from pathlib import Path
from starlette.testclient import TestClient
from localjury.review.app import create_app
from localjury.review.queue import Review
start = time.perf_counter()
review = Review(Path(sys.argv[1]), data=Path(sys.argv[2]), labels=Path(sys.argv[3]))
with TestClient(create_app(review, "t", 8123), base_url="http://127.0.0.1:8123") as client:
    assert client.get("/?token=t").status_code == 200
    assert client.get(f"/item/{len(review.index) // 2}").status_code == 200
print(round(time.perf_counter() - start, 2))
"""
#: The baseline in a child: every result read into memory.
WHOLE = """
import sys, time
from pathlib import Path
from localjury.results.record_result import read_results
start = time.perf_counter()
rows = list(read_results(Path(sys.argv[1])))
print(round(time.perf_counter() - start, 2))
"""
MODES = {"review": REVIEW, "read whole": WHOLE}


def result(i: int) -> dict[str, Any]:
    """A result row as a run writes it: two models, three samples with reasons and probabilities."""

    def model(name: str, votes: list[int]) -> dict[str, Any]:
        reasons = [
            f"Sample {j} of {name}: the response gives the year {1900 + i % 100}, so it meets it." for j in range(3)
        ]
        p = [0.9 if v else 0.2 for v in votes]
        return {"model": name, "votes": votes, "drawn": 3, "reasons": reasons, "abstentions": 0,
                "verdict": int(sum(votes) >= 2), "score": float(sum(votes) >= 2), "error": None, "p_pass": p,
                "confidence": sum(p) / 3, "calibrated": False, "invalid": [], "order_votes": None,
                "position_consistent": None, "scores": None, "expected": None, "scale_score": None,
                "evidence": None}  # fmt: skip

    models = [model("qwen2.5-coder-1.5b-instruct", [1, 1, 1]), model("smollm2-135m-instruct", [i % 2, 1, 0])]
    score = sum(m["score"] for m in models) / 2
    return {"record_id": f"r{i}", "metric": "dated", "score": score, "error": None,
            "confidence": sum(m["confidence"] for m in models) / 2, "models": models, "statements": None,
            "extracted_by": None, "position_consistency": None, "tool_calls": None, "rubric": None,
            "turns_cut": None}  # fmt: skip


def write(folder: Path, rows: int) -> tuple[Path, Path]:
    """The results and the data set of ``rows`` rows, written a block at a time."""
    results, data = folder / "results.jsonl", folder / "data.jsonl"
    with results.open("w") as r, data.open("w") as d:
        for start in range(0, rows, 10_000):
            block = range(start, min(start + 10_000, rows))
            r.write("".join(json.dumps(result(i)) + "\n" for i in block))
            d.write("".join(json.dumps({"id": f"r{i}", "user_input": f"When did {i} happen?",
                                        "response": f"In {1900 + i % 100}."}) + "\n" for i in block))  # fmt: skip
    return results, data


def measure(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a child: its peak RSS (MiB, its own: ``os.wait4``), its seconds, its exit."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        out.seek(0)
        err.seek(0)
        text = out.read().decode().strip()
        return {
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "seconds": float(text) if text else None,
            "exit": os.waitstatus_to_exitcode(status),
            "stderr": err.read()[-600:].decode(errors="replace"),
        }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000])
    parser.add_argument("--out", type=Path, default=RESULTS / "review_index")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.rows:
            folder = Path(tmp) / str(n)
            folder.mkdir()
            results, data = write(folder, n)
            size = results.stat().st_size / 2**20
            for mode, code in MODES.items():
                got = measure(code, str(results), str(data), str(folder / "labels.jsonl"))
                rows.append({"rows": n, "mode": mode, "file_mib": round(size, 1), **got})
                print(rows[-1], file=sys.stderr)
    figures = {**provenance(__file__, argv), "rows": rows}
    for n in args.rows:
        review, whole = (next(r for r in rows if r["rows"] == n and r["mode"] == m) for m in MODES)
        if review["seconds"] and whole["seconds"]:
            figures.setdefault("ratios", {})[str(n)] = {
                "seconds": round(review["seconds"] / whole["seconds"], 2),
                "peak_rss": round(review["peak_rss_mib"] / whole["peak_rss_mib"], 2),
            }
    lines = [
        f"# Opening a big results file in `localjury review` — CPU: {figures['cpu']}",
        "",
        "A run's results (two models, three samples with reasons each; about 1.5 KB a row) and its data set. "
        "`review`: the review opened (the results and the data set indexed) and its queue and one record's "
        "page rendered; `read whole`: every result read and validated into memory (`read_results`), the "
        "baseline. Each in a process of its own: peak RSS is its `ru_maxrss`; seconds from after the imports.",
        "",
        *table(
            ["rows", "mode", "results MiB", "peak RSS MiB", "seconds", "exit"],
            [[f"{r['rows']:,}", r["mode"], r["file_mib"], r["peak_rss_mib"], r["seconds"], r["exit"]] for r in rows],
            "lllrrr",
        ),
        "",
        *(
            f"{int(n):,} rows: review / read whole = {ratio['seconds']}x the seconds, "
            f"{ratio['peak_rss']}x the peak RSS."
            for n, ratio in figures.get("ratios", {}).items()
        ),
        "",
        f"Command: `{figures['command']}`",
    ]
    save(args.out, figures, "\n".join(lines))
    print("\n".join(lines))
    return figures


if __name__ == "__main__":
    main()
