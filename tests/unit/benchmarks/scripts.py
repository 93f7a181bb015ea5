"""The benchmark scripts as modules, for the tests of their pure parts (no model is run)."""

import importlib.util
from types import ModuleType

from tests import ROOT


def load(path: str) -> ModuleType:
    """The script at ``benchmarks/<path>``, imported as a module of its own name (it puts
    benchmarks/ on sys.path itself, for the shared ``_figures``)."""
    spec = importlib.util.spec_from_file_location(
        path.rsplit("/", 1)[-1].removesuffix(".py"), ROOT / "benchmarks" / path
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
