"""The Ray scaling benchmark runs end to end (a tiny run; the figures themselves are not
tested). Apart from tests/integration/benchmarks/performance/test_benchmarks.py because it
starts a local Ray cluster: tests/conftest.py runs the Ray modules on one pytest worker, one
after another."""

import json
import subprocess
import sys

import pytest

from tests import ROOT

SCRIPTS = ROOT / "benchmarks" / "performance"

# a local Ray cluster
pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.usefixtures("engines_loaded_once")]


def test_ray_scaling_benchmark_compares_one_and_two_replicas(smollm, tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    out = tmp_path / "ray"
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "ray_scaling.py"), "--records", "2", "--strictness", "1",
         "--max-tokens", "32", "--warm-up", "0", "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.with_suffix(".json").read_text())
    assert [r["config"] for r in report["rows"]] == ["local", "ray 1x1", "ray 2x1"]
    assert [r["replicas"] for r in report["rows"]] == [1, 1, 2]
    assert all(r["judgments"] == 2 and r["judgments_per_s"] > 0 for r in report["rows"])
    assert report["identical_results"] is True and report["speedup_2x1_over_1x1"] > 0
    assert report["shard_size"] == 1 and report["warm_up"] == 0  # 2 shards: one for each of the 2 replicas
    assert "Speed-up of 2 replicas over 1" in out.with_suffix(".md").read_text()
