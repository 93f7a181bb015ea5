"""One real `localjury run` (the llama.cpp engine on SmolLM2, one record), traced call by call
between the modules of src/localjury, reads as one pass through its stages: the counts
``../shared/tools/trace_run.py`` reports (docs/architecture.md shows its output) may not rise.

The tracer here counts as that tool does: every call whose caller and callee live in different
modules of the package, on every thread; a stage is a top-level package (or module) of
localjury, the ground floor's helpers (``_files``, ``errors``...) none; the pipeline's stages
are visited in the order data flows through them, and a move to an earlier one runs backward;
an edge runs against the import order when the callee's stage imports the caller's.
"""

import ast
import functools
import itertools
import json
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests import ROOT
from tests.fakes import run_cli

pytest.importorskip("llama_cpp", reason="the llamacpp extra (scripts/test installs it)")
pytestmark = pytest.mark.slow

SRC = ROOT / "src" / "localjury"
GROUND = {"_files", "_hashing", "_terminal", "_yaml", "_setting_bounds", "_version", "errors", "types"}
ORDER = ["models", "records", "metrics", "engines", "store", "votes", "results"]

#: The most a run may take: what the tool measures on a warm home (docs/architecture.md, "One
#: run, traced": 63 modules, 17 visits, 5 backward, AMD EPYC Zen 3), and this test on a fresh
#: one, with its imports done before the trace as the tool does them. A CPU's kernels can take
#: another module, hence one of margin there and in the visits; none in the backward moves,
#: the issue's bound. Lower them as the code gets closer to one visit per stage, never raise them.
MAX_MODULES = 64
MAX_PIPELINE_VISITS = 18
MAX_BACKWARD = 5
MAX_UP_EDGES = 0


def stage(module: str) -> str:
    return module.split("/", 1)[0] if "/" in module else module.removesuffix(".py")


@functools.cache
def module_of(filename: str) -> str | None:
    try:
        return str(Path(filename).resolve().relative_to(SRC))
    except ValueError:
        return None


def stage_imports() -> dict[str, set[str]]:
    """The stages each stage imports (statically, at any depth of the module)."""
    deps: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        mod = str(path.relative_to(SRC))
        parts = ["localjury", *Path(mod).parent.parts]
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                base = parts[: len(parts) - node.level + 1] if node.level else []
                names.append(".".join([*base, node.module]) if node.module else ".".join(base))
            elif isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            for name in names:
                top = name.split(".")
                if top[0] == "localjury" and len(top) > 1 and top[1] != stage(mod):
                    deps.setdefault(stage(mod), set()).add(top[1])
    return deps


def imports(deps: dict[str, set[str]], a: str, b: str) -> bool:
    """Whether stage ``a`` imports stage ``b``, directly or through others."""
    seen, todo = set(), [a]
    while todo:
        for d in deps.get(todo.pop(), ()):
            if d == b:
                return True
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return False


@pytest.mark.fresh_engines  # the engine loads as in any run, not from the module's pool
def test_one_run_is_one_pass_through_its_stages(smollm, tmp_path, monkeypatch, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r1", "input": "When did the Berlin Wall fall?", "response": "In 1989."}) + "\n")
    edges: Counter = Counter()
    seq: list[str] = []
    lock = threading.Lock()

    def hook(frame, event, arg):
        if event != "call":
            return
        callee = module_of(frame.f_code.co_filename)
        if callee is None:
            return
        caller, f = None, frame.f_back
        while f is not None and caller is None:
            caller, f = module_of(f.f_code.co_filename), f.f_back
        if caller is None or caller == callee:
            return
        with lock:
            edges[(caller, callee)] += 1
            if stage(callee) not in GROUND and (not seq or seq[-1] != stage(callee)):
                seq.append(stage(callee))

    args = ["run", data, "-c", "dated=The response must include a year.", "--models", "smollm2-135m-instruct",
            "--engine", "llamacpp", "-k", "1", "--seed", "0", "--no-cache", "--out", tmp_path / "o" / "r.jsonl",
            "--quiet"]  # fmt: skip
    import localjury.cli  # noqa: F401  # imported before the trace starts, as the tool imports it

    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        code, _, err = run_cli(monkeypatch, capsys, *args)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert code == 0, err
    assert (tmp_path / "o" / "r.manifest.json").is_file()  # the run went all the way to its files

    deps = stage_imports()
    modules = {m for e in edges for m in e}
    up = sorted(f"{a} -> {b}" for a, b in edges if stage(a) != stage(b) and imports(deps, stage(b), stage(a)))
    flow = [s for s in seq if s in ORDER]
    flow = [s for i, s in enumerate(flow) if i == 0 or flow[i - 1] != s]
    backward = sum(ORDER.index(b) < ORDER.index(a) for a, b in itertools.pairwise(flow))
    counts = {"modules": len(modules), "visits": len(flow), "backward": backward, "up": up, "flow": " ".join(flow)}
    assert len(modules) <= MAX_MODULES, counts
    assert len(flow) <= MAX_PIPELINE_VISITS, counts
    assert backward <= MAX_BACKWARD, counts
    assert len(up) <= MAX_UP_EDGES, counts
