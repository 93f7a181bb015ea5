"""The throughput benchmark runs end to end (a tiny run; the figures themselves are not tested)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_throughput_benchmark_writes_json_and_markdown(smollm, tmp_path):
    out = tmp_path / "tp"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "throughput.py"),
        "--records",
        "2",
        "--strictness",
        "2",
        "--max-tokens",
        "96",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.with_suffix(".json").read_text())
    assert [m["mode"] for m in result["modes"]] == ["a_naive_loop", "b_batched_constrained", "c_batched_unconstrained"]
    assert all(m["judgments"] == 4 and m["judgments_per_s"] > 0 for m in result["modes"])
    assert result["ratio_b_over_a"] > 0 and "b/a" in out.with_suffix(".md").read_text()
