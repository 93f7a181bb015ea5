"""benchmarks/_figures.py: what every benchmark's figure set says and how it is written, and
that every script writes through it."""

import json

import pytest

from tests import ROOT
from tests.unit.benchmarks.scripts import load

figures = load("_figures.py")
#: The folders of scripts that write figure sets (tools/ write none).
GROUPS = ("performance", "engines", "quality")


def test_a_table_has_its_header_a_rule_and_a_line_a_row_numbers_right_aligned():
    lines = figures.table(["mode", "judgments/s", "note"], [["a", 1.5, ""], ["b", 2, "x"]], "lr")
    assert lines == [
        "| mode | judgments/s | note |",
        "|---|---:|---|",
        "| a | 1.5 |  |",
        "| b | 2 | x |",
    ]
    assert figures.table(["a"], []) == ["| a |", "|---|"]
    with pytest.raises(ValueError, match=r"align 'lr' names 2 columns; the header has 1"):
        figures.table(["a"], [], "lr")


def test_save_writes_the_figures_as_indented_json_and_the_markdown_in_utf8(tmp_path):
    stem = tmp_path / "new" / "folder" / "scale-ray"
    paths = figures.save(stem, {"kappa": "κ", "rows": [1]}, "# κ\n\n| a |\n\n\n")
    assert paths == (stem.with_suffix(".json"), stem.with_suffix(".md"))
    assert json.loads(paths[0].read_text()) == {"kappa": "κ", "rows": [1]}
    assert paths[0].read_text().startswith('{\n  "kappa"') and paths[0].read_text().endswith("}\n")
    assert paths[1].read_text(encoding="utf-8") == "# κ\n\n| a |\n"


def test_the_command_names_the_script_from_the_repository_root_its_arguments_quoted():
    script = ROOT / "benchmarks" / "performance" / "scale.py"
    assert figures.command(script, ["--records", "300"]) == "python benchmarks/performance/scale.py --records 300"
    assert figures.command(str(script), ["--label", "after, bf16"]).endswith("scale.py --label 'after, bf16'")


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        (
            {"Model name": "AMD EPYC 9R14 96-Core Processor", "CPU family": "25", "Model": "17",
             "Flags": "fpu avx2 avx512f avx512_bf16 avx512_vnni"},
            "AMD EPYC 9R14 96-Core Processor (family 25, model 17), 2 CPUs, no AMX, avx512_bf16",
        ),
        (
            {"Model name": "Intel(R) Xeon(R) Processor", "CPU family": "6", "Model": "143",
             "Flags": "avx512_bf16 amx_tile amx_bf16 amx_int8"},
            "Intel(R) Xeon(R) Processor (family 6, model 143), 2 CPUs, AMX, avx512_bf16",
        ),
        ({"Model name": "Neoverse-V2", "Model": "0", "Flags": ""}, "Neoverse-V2 (model 0), 2 CPUs, no AMX"),
    ],
)  # fmt: skip
def test_the_cpu_line_names_the_model_its_family_and_whether_it_has_amx(monkeypatch, fields, line):
    monkeypatch.setattr(figures, "_lscpu", lambda: fields)
    monkeypatch.setattr(figures.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert figures.cpu() == line
    assert figures.cpu_facts()["amx"] == sorted(f for f in fields["Flags"].split() if f.startswith("amx"))


def test_without_lscpu_the_cpu_is_still_named(monkeypatch):
    def missing(*_args, **_kwargs):
        raise FileNotFoundError("lscpu")

    monkeypatch.setattr(figures.subprocess, "run", missing)
    assert figures._lscpu() == {}
    assert figures.cpu_facts()["model_name"] and "AMX" in figures.cpu()


SCRIPTS = sorted(p for g in GROUPS for p in (ROOT / "benchmarks" / g).glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS, ids=str)
def test_every_script_writes_its_figures_through_the_shared_module(script):
    """One writer: the CPU and command in every figure set, the same JSON and Markdown files
    (a ``_``-prefixed module is a helper its script imports, as ``_figures`` is)."""
    source = script.read_text()
    assert "from _figures import" in source and "save(" in source, f"{script.name} does not save through _figures"
    assert "provenance(" in source or "command(" in source, f"{script.name} states no command"
    assert '"|---' not in source, f"{script.name} writes a Markdown table by hand: use _figures.table"
    assert ".write_text(json.dumps" not in source, f"{script.name} writes its JSON by hand: use _figures.save"
