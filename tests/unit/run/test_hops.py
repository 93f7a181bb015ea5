"""docs/architecture.md lists the hops of one `localjury run`, from the command line to the
committed files, for a newcomer to read: each listed function exists. How a real run travels
through the modules is traced by tests/integration/run/test_trace.py."""

import importlib
import re

import pytest

from tests import ROOT

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
