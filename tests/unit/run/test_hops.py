"""docs/architecture.md lists the hops of one `localjury run`, from the command line to the
committed files: each listed function exists, and a run traced call by call first calls them
in the listed order."""

import importlib
import json
import re
import sys

import pytest

import localjury.run.pipeline
from tests import ROOT
from tests.fakes import factory, fake_registry, judgment, run_cli

DOC = ROOT / "docs" / "architecture.md"
SRC = ROOT / "src" / "localjury"
#: A row of the table: | # | `function` | `module` | what it does |
ROW = re.compile(r"^\| (\d+) \| `([\w.]+)` \| `([\w/]+\.py)` \|")


def hops() -> list[tuple[str, str]]:
    """The table's (module path under src/localjury, function's qualified name), in order."""
    section = DOC.read_text().split("## One `localjury run`, hop by hop", 1)[1].split("\n## ", 1)[0]
    rows = [ROW.match(line) for line in section.splitlines()]
    found = [(int(m[1]), m[3], m[2]) for m in rows if m]
    assert [n for n, _, _ in found] == list(range(1, len(found) + 1)), "the hops are numbered 1, 2, 3..."
    return [(module, function) for _, module, function in found]


def test_the_run_is_at_most_15_hops_through_at_most_15_modules():
    listed = hops()
    assert 0 < len(listed) <= 15 and len({module for module, _ in listed}) <= 15


@pytest.mark.parametrize(("module", "function"), hops())
def test_each_listed_function_exists(module, function):
    assert (SRC / module).is_file(), f"no module {module}"
    name = "localjury." + module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    found = importlib.import_module(name)
    for part in function.split("."):
        found = getattr(found, part, None)
        assert found is not None, f"{module} has no {function}"


def respond(model, prompt, j):
    if "Break the answer" in prompt:
        return json.dumps({"statements": ["It fell in 1989."]})
    if "<statements>" in prompt:
        return json.dumps({"verdicts": [{"statement": "s1", "reason": "r", "verdict": 1}]})
    return judgment(1)


def test_a_run_first_calls_them_in_the_listed_order(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(localjury.run.pipeline, "load_engine", factory(respond, []))
    data = tmp_path / "d.jsonl"
    record = {"id": "r1", "user_input": "When?", "response": "In 1989.", "retrieved_contexts": ["It fell in 1989."]}
    data.write_text(json.dumps(record) + "\n")
    args = ["run", data, "--criterion", "dated=The response gives a year.", "--metric", "faithfulness",
            "--models", "fake", "--registry", fake_registry(tmp_path), "--quiet",
            "--out", tmp_path / "r.jsonl"]  # fmt: skip
    first: dict[tuple[str, str], int] = {}

    def trace(frame, event, arg):
        if event == "call":
            path = frame.f_code.co_filename
            if path.startswith(str(SRC)):
                first.setdefault((path[len(str(SRC)) + 1 :], frame.f_code.co_qualname), len(first))

    sys.setprofile(trace)
    try:
        code, _, err = run_cli(monkeypatch, capsys, *args)
    finally:
        sys.setprofile(None)
    assert code == 0, err
    assert (tmp_path / "r.manifest.json").is_file()  # committed
    listed = hops()
    missing = [hop for hop in listed if hop not in first]
    assert not missing, f"never called: {missing}"
    assert sorted(listed, key=first.__getitem__) == listed, "the hops are first called in another order"
