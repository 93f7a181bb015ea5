"""The Ray scaling benchmark runs end to end (a tiny run; the figures themselves are not
tested). Apart from tests/integration/benchmarks/performance/test_benchmarks.py because it
starts a local Ray cluster: tests/conftest.py runs the Ray modules on one pytest worker, one
after another. In this process (the script's ``main`` with the arguments a user types): its
local run shares the imports and the module's load of SmolLM2; the replicas are Ray's
processes either way. On the llama.cpp engine (SmolLM2's GGUF), the default judge's engine: its
replicas are tested here (identical results over 1 and 2 replicas), the transformers and vLLM
engines' in tests/system/run/cluster/test_real_models.py; the benchmark's code is the same for
every engine."""

import json

import pytest

from tests.unit.benchmarks.scripts import load

# a local Ray cluster (tests/conftest.py: ``local_ray``, which the script joins)
pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.usefixtures("engines_loaded_once", "local_ray")]


def test_ray_scaling_benchmark_compares_one_and_two_replicas(smollm, tmp_path, monkeypatch):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")  # what the script sets, undone after the test
    out = tmp_path / "ray"
    load("performance/ray_scaling.py").main(
        ["--records", "2", "--strictness", "1", "--max-tokens", "32", "--warm-up", "0", "--engine", "llamacpp",
         "--out", str(out)]
    )  # fmt: skip
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["engine"] == "llamacpp" and [r["config"] for r in report["rows"]] == ["local", "ray 1x1", "ray 2x1"]
    assert [r["replicas"] for r in report["rows"]] == [1, 1, 2]
    assert all(r["judgments"] == 2 and r["judgments_per_s"] > 0 for r in report["rows"])
    assert report["identical_results"] is True and report["speedup_2x1_over_1x1"] > 0
    assert report["shard_size"] == 1 and report["warm_up"] == 0  # 2 shards: one for each of the 2 replicas
    assert "Speed-up of 2 replicas over 1" in out.with_suffix(".md").read_text()
