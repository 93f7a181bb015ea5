"""benchmarks/performance/decision_speed.py: each CPU's figures kept beside the others' (no model is run)."""

import sys

from tests import ROOT
from tests.unit.benchmarks.scripts import load

sys.path.insert(0, str(ROOT / "benchmarks" / "quality"))  # decision_heads, which the script imports
ds = load("performance/decision_speed.py")


def entry(ratio: float, command: str = "python benchmarks/performance/decision_speed.py") -> dict:
    median = {"decision_mode_per_s": 2.0, "full_depth_per_s": 0.8, "generate_k3_per_s": 2.0 / ratio, "ratio": ratio}
    rounds = [{**median, "ratio": ratio - 1}, median, {**median, "ratio": ratio + 2}]
    return {"cpu": "-", "command": command, "kernels": "repacked", "records": 20, "layer": 10, "blocks": 28,
            "median": median, "rounds": rounds}  # fmt: skip


def test_a_run_replaces_its_own_cpus_entry_and_keeps_the_others(tmp_path):
    held = tmp_path / "decision_speed.json"
    first = ds.merged(held, "AMD EPYC", entry(7.6))  # no file yet: this CPU alone
    assert list(first["by_cpu"]) == ["AMD EPYC"]
    held.write_text(__import__("json").dumps(first))
    second = ds.merged(held, "Intel Xeon", entry(9.1))
    assert list(second["by_cpu"]) == ["AMD EPYC", "Intel Xeon"]
    held.write_text(__import__("json").dumps(second))
    again = ds.merged(held, "AMD EPYC", entry(7.9))
    assert list(again["by_cpu"]) == ["AMD EPYC", "Intel Xeon"]
    assert again["by_cpu"]["AMD EPYC"]["median"]["ratio"] == 7.9
    assert again["by_cpu"]["Intel Xeon"]["median"]["ratio"] == 9.1


def test_the_page_has_a_row_a_cpu_with_its_medians_and_ratio():
    figures = {"model": "m", "engine": "llamacpp", "by_cpu": {"AMD EPYC": entry(7.6), "Intel Xeon": entry(9.14)}}
    page = ds.markdown(figures)
    assert "| AMD EPYC | 20 x 3 | 10 of 28 | 2.00 | 0.80 | 0.26 | **7.6x** | 6.6-9.6x |" in page
    assert "| Intel Xeon | 20 x 3 | 10 of 28 | 2.00 | 0.80 | 0.22 | **9.1x** | 8.1-11.1x |" in page
    assert "llama.cpp's kernels on Intel Xeon: repacked." in page
    assert page.count("`python benchmarks/performance/decision_speed.py`") == 1  # one command, said once
