"""Imports flow one way (cli -> run -> metrics / engines / votes / results -> records /
models -> types / errors), no module imports the package's __init__, no models module imports
an engine (the engines read the models.yaml schema, never the reverse), no backend imports the
catalog that gathers the backends' facts, and the modules'
imports have no cycle: not at the top level, nor through an import inside a function or an
``if TYPE_CHECKING:`` block. Read from the source, without importing anything."""

import ast
from pathlib import Path

import pytest

from tests import ROOT

SRC = ROOT / "src"

#: Each module's layer, by the longest matching name prefix: a module imports only from
#: its own layer or a lower one.
LAYERS = {
    "localjury.cli": 4,
    "localjury.integrations": 4,
    "localjury.run": 3,
    "localjury.bench": 3,
    "localjury.review": 3,
    "localjury.diagnosis": 3,
    "localjury.metrics": 2,
    "localjury.engines": 2,
    "localjury.votes": 2,
    "localjury.store": 2,
    "localjury.results": 2,
    "localjury.results._outputs": 1,
    "localjury.results._commit": 1,
    "localjury.results._journal": 1,
    "localjury.records": 1,
    "localjury.models": 1,
    "localjury._files": 1,
    "localjury._writes": 1,
    "localjury._terminal": 1,
    "localjury.types": 0,
    "localjury.errors": 0,
    "localjury._version": 0,
    "localjury._hashing": 0,
    "localjury._yaml": 0,
    "localjury._setting_bounds": 0,
    "localjury.models._embedded": 0,
    "localjury.models._engine_settings": 0,
    "localjury.models._safetensors": 0,
}
#: The backend packages: each one's ``__init__`` holds its facts, which engines/_catalog.py gathers.
BACKENDS = tuple(f"localjury.engines.{backend}" for backend in ("transformers", "llamacpp", "vllm", "server"))
#: Modules that never import an engine.
ENGINE_FREE = (
    "localjury.votes.voting",
    "localjury.records.record",
    "localjury.records.conversation",
    "localjury.records.readers",
    "localjury.records.inspect_log",
    "localjury.results.record_result",
    "localjury.results.summary",
    "localjury.metrics",
    "localjury.store",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> tuple[set[str], set[str]]:
    """The localjury modules a file imports: at its top level, and anywhere (functions,
    ``if TYPE_CHECKING:`` blocks included)."""
    top: set[str] = set()
    anywhere: set[str] = set()

    def visit(node: ast.AST, at_top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            names: list[str] = []
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                # `from localjury.bench import stats` imports the module localjury.bench.stats
                names = [child.module, *(f"{child.module}.{a.name}" for a in child.names)]
            elif isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            names = [n for n in names if n == "localjury" or n.startswith("localjury.")]
            anywhere.update(names)
            if at_top:
                top.update(names)
            type_checking = isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            nested = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            visit(child, at_top and not type_checking and not nested)

    visit(ast.parse(path.read_text(encoding="utf-8")), True)
    return top, anywhere


NAMES = {module_name(p) for p in sorted((SRC / "localjury").rglob("*.py"))}
MODULES = {
    module_name(p): tuple({n for n in found if n in NAMES} for found in imports(p))
    for p in sorted((SRC / "localjury").rglob("*.py"))
}


def layer(module: str) -> int:
    prefix = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None)
    assert prefix is not None, f"{module} is in no layer: add it to LAYERS"
    return LAYERS[prefix]


@pytest.mark.parametrize("module", [m for m in MODULES if m != "localjury"])
def test_imports_flow_one_way(module):
    _, anywhere = MODULES[module]
    assert "localjury" not in anywhere, f"{module} imports the package's __init__"
    upward = [m for m in anywhere if layer(m) > layer(module)]
    assert not upward, f"{module} (layer {layer(module)}) imports from a higher layer: {upward}"
    if module.startswith(ENGINE_FREE):
        assert not [m for m in anywhere if m.startswith("localjury.engines")], f"{module} imports an engine"
    if module.startswith("localjury.engines"):
        assert not [m for m in anywhere if m.startswith(("localjury.metrics", "localjury.store"))]


def test_no_models_module_imports_an_engine():
    """Not even inside a function: the engines' facts read the models.yaml schema, so an arrow
    back from models/ to engines/ would run up the stack."""
    models = [m for m in MODULES if m == "localjury.models" or m.startswith("localjury.models.")]
    found = {m: sorted(i for i in MODULES[m][1] if i.startswith("localjury.engines")) for m in models}
    assert models and {m: i for m, i in found.items() if i} == {}


def test_no_backend_imports_the_catalog_of_the_backends():
    backends = [m for m in MODULES if m.startswith(BACKENDS)]
    assert [m for m in backends if "localjury.engines._catalog" in MODULES[m][1]] == []


def test_no_import_cycle():
    graph = {m: {i for i in anywhere if i != m} for m, (_, anywhere) in MODULES.items()}
    # A package's __init__ imports its modules and they import their siblings through it
    # only by name: an edge into one's own parent package is not a cycle Python trips on.
    graph = {m: {i for i in deps if not m.startswith(i + ".")} for m, deps in graph.items()}
    done: set[str] = set()

    def walk(m: str, path: list[str]) -> None:
        if m in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(m) :], m]))
        if m in done:
            return
        for dep in sorted(graph[m]):
            walk(dep, [*path, m])
        done.add(m)

    for m in sorted(graph):
        walk(m, [])
