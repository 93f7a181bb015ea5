"""The tests are laid out like the code: each folder under ``tests/unit``, ``tests/integration``
and ``tests/system`` mirrors a package of ``src/localjury`` (or the repository's
``benchmarks/``); a test that starts a Ray cluster, a browser, a server or a namespace is
a system test by its folder and by its marker, and no other test is; every integration
module is marked slow; the modules the
scheduler in ``tests/conftest.py`` names exist. Read from the files, without importing."""

import ast
from pathlib import Path

import pytest

from tests import ROOT
from tests.conftest import FIRST, RAY_MODULES

TESTS = ROOT / "tests"
TIERS = ("unit", "integration", "system")


def folders(tier: str) -> list[Path]:
    top = TESTS / tier
    return sorted(p.relative_to(top) for p in top.rglob("*") if p.is_dir() and p.name != "__pycache__")


def marked_system(module: Path) -> bool:
    """Whether the module or one of its functions carries ``pytest.mark.system``."""
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Attribute) and node.attr == "system":
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr == "mark":
                return True
    return False


def module_marks(module: Path, mark: str) -> bool:
    """Whether the module's ``pytestmark`` names ``pytest.mark.<mark>`` (every test in it)."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            return f"pytest.mark.{mark}" in ast.unparse(node.value)
    return False


def module_marks_system(module: Path) -> bool:
    return module_marks(module, "system")


@pytest.mark.parametrize("tier", TIERS)
def test_every_test_folder_mirrors_a_package(tier):
    for folder in folders(tier):
        package = ROOT / "src" / "localjury" / folder
        mirrored = (package / "__init__.py").is_file() or folder.parts[0] == "benchmarks"
        assert mirrored, f"tests/{tier}/{folder} mirrors no package of src/localjury (nor benchmarks/)"
        assert (TESTS / tier / folder / "__init__.py").is_file(), f"tests/{tier}/{folder} has no __init__.py"


def test_system_tests_live_in_tests_system_and_are_marked():
    for module in sorted((TESTS / "system").rglob("test_*.py")):
        assert module_marks_system(module), f"{module.relative_to(ROOT)}: pytestmark lacks pytest.mark.system"
    for tier in ("unit", "integration"):
        for module in sorted((TESTS / tier).rglob("test_*.py")):
            assert not marked_system(module), f"{module.relative_to(ROOT)} holds a system test: move it to tests/system"


def test_every_integration_module_is_marked_slow():
    """``-m "not slow"`` leaves out every test that loads a model (a conftest's ``pytestmark``
    marks nothing: each module says so)."""
    for module in sorted((TESTS / "integration").rglob("test_*.py")):
        assert module_marks(module, "slow"), f"{module.relative_to(ROOT)}: pytestmark lacks pytest.mark.slow"


def test_the_modules_the_scheduler_names_exist():
    for name in {*RAY_MODULES, *FIRST}:
        assert (ROOT / name).is_file(), f"tests/conftest.py names {name}, which is not there"
    assert all(name.startswith("tests/system/") for name in RAY_MODULES)


def test_the_checks_above_can_fail(tmp_path):
    stray = tmp_path / "test_stray.py"
    stray.write_text("import pytest\n\n@pytest.mark.system\ndef test_x():\n    pass\n")
    assert marked_system(stray) and not module_marks_system(stray)
    stray.write_text("import pytest\n\npytestmark = [pytest.mark.slow, pytest.mark.system]\n")
    assert module_marks_system(stray)
    stray.write_text("import pytest\n\npytestmark = pytest.mark.slow\n")
    assert not marked_system(stray) and not module_marks_system(stray)
