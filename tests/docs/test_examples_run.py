"""Every example of README.md and docs/ that can run here runs, to its end, with the model
replaced by a scripted engine (tests/docs/test_docs.py checks them all statically):

- Python blocks run for real, a page's blocks in order in one namespace (a block may use
  what an earlier one on its page defined), in a fresh working directory with the files they
  read (made from examples/ or from the page) and a ``$LOCALJURY_HOME`` and judgment store
  of their own. A run's results must have one line per (record, metric), every metric
  scored on some record.
- ``localjury`` commands of bash blocks run through the CLI in this process, a page's
  commands in order in one working directory (``show`` reads what ``run`` wrote), and must
  exit 0; a run's results file has one line per (record, metric) of its summary.

What cannot run here (a Ray cluster, a model server, a data set outside the repository, an
elided argument) is listed below with the reason, shown as the skip's reason.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import re
import shutil
import sys
import traceback
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import ROOT
from tests.docs.test_docs import blocks, commands
from tests.fakes import ScriptedEngine, run_cli

#: Python blocks that do not run here, by (page, a line of the block): why.
PYTHON_NOT_RUN = {
    ("docs/records.md", "task = Task(dataset=..., solver=generate(),"): (
        "an inspect_ai Task with its dataset elided (`dataset=...`); examples/inspect_task.py runs the "
        "scorer in a task (tests/integration/integrations/test_inspect.py)"
    ),
    ("docs/traces.md", "Client().spans.log_span_annotations_dataframe(dataframe=frame)"): (
        "sends the annotations to a Phoenix server (tests/unit/results/test_annotations_in_tools.py "
        "sends them with Phoenix's client to a fake one)"
    ),
    ("docs/traces.md", 'mlflow.log_feedback(source=AssessmentSource(**row.pop("source")), **row)'): (
        "logs the feedback to an MLflow tracking store (tests/unit/results/test_annotations_in_tools.py "
        "builds MLflow's Feedback from each row)"
    ),
}
#: Why `localjury review` does not run here.
SERVES = "serves a page until Ctrl-C (tests/system/review/ runs it in a browser)"
#: Commands that do not run here, by (page, part of the command line): why.
COMMANDS_NOT_RUN = {
    ("docs/ray.md", "--cluster ray"): "starts a Ray cluster (tests/system/run/cluster/ runs these)",
    ("docs/benchmarking.md", "../shared/data/"): "reads a benchmark data set that is not in the repository",
    ("docs/calibration.md", "../shared/data/"): "reads a benchmark data set that is not in the repository",
    ("docs/calibration.md", "--profile profile.yaml"): "reads the judge profile that `align` above writes",
    ("docs/servers.md", "my-models.yaml"): "asks the llama-cpp-python server that the block starts",
    ("README.md", "review results.jsonl"): SERVES,
    ("docs/review.md", "review out/review/results.jsonl"): SERVES,
    ("docs/review.md", "results.labels.jsonl"): "reads the labels the page above saves",
    ("docs/resume-and-trust.md", "verify"): (
        "re-hashes the judge's model files, which the scripted engine has none of "
        "(tests/integration/run/test_dry.py verifies a real run)"
    ),
}


# -- the scripted jury --------------------------------------------------------------------------
def answer(schema: dict | None, prompt: str, sources: list[str]) -> str:
    """The least answer ``schema`` takes, passing: every property, the last of an enum (verdict 1),
    the top of a range (a rubric's best level), one item per array (one statement), a quote the
    first word of the first quotable text (``sources``); of two responses, the one whose text
    sorts first, in either order they are shown (no tie between the orders)."""
    from localjury.types import QUOTE_KEY

    defs = (schema or {}).get("$defs", {})

    def value(s: dict):
        if "$ref" in s:
            return value(defs[s["$ref"].rsplit("/", 1)[1]])
        if s.get(QUOTE_KEY):
            return [w[0] for w in (t.split() for t in sources) if w][:1]
        if "const" in s:
            return s["const"]
        if s.get("enum") == ["A", "B"]:
            a, b = (re.findall(rf"<{tag}>\n(.*?)\n</{tag}>", prompt, re.S)[-1] for tag in ("response_a", "response_b"))
            return "A" if a <= b else "B"
        if "enum" in s:
            return s["enum"][-1]
        for union in ("anyOf", "oneOf", "allOf"):
            if union in s:
                return value(s[union][0])
        kind = s.get("type")
        if kind == "object":
            return {k: value(v) for k, v in s.get("properties", {}).items()}
        if kind == "array":
            n = max(s.get("minItems", 1), 1)
            return [value(s.get("items", {})) for _ in range(min(n, s.get("maxItems", n)))]
        if kind in ("integer", "number"):
            return s.get("maximum", s.get("minimum", 1))
        if kind == "boolean":
            return True
        return "fine" + "." * max(s.get("minLength", 0) - 4, 0)

    return json.dumps(value(schema) if schema else {"reason": "fine", "verdict": 1})


class SchemaEngine(ScriptedEngine):
    """The unit tests' scripted engine, answering every prompt with :func:`answer` of its schema."""

    def generate(self, call):
        texts = dict(zip(call.prompts, call.quotes or [[] for _ in call.prompts], strict=True))
        self.respond = lambda model, prompt, j: answer(call.schema, prompt, list(texts[prompt]))
        return super().generate(call)


# -- the files the examples read ----------------------------------------------------------------
def _demo(tmp: Path, name: str) -> None:
    shutil.copy(ROOT / "examples" / "demo.jsonl", tmp / name)


def _rag(tmp: Path) -> None:  # the demo's records with retrieved contexts
    lines = (ROOT / "examples" / "demo.jsonl").read_text().splitlines()
    (tmp / "rag.jsonl").write_text("".join(line + "\n" for line in lines if "contexts" in line))


def _labelled(tmp: Path) -> None:  # the demo's records with a person's mentions_date verdict as `gold`
    gold = {}
    for line in (ROOT / "examples" / "demo_labels.jsonl").read_text().splitlines():
        label = json.loads(line)
        if label["metric"] == "mentions_date":
            gold[label["id"]] = label["verdict"]
    records = [json.loads(line) for line in (ROOT / "examples" / "demo.jsonl").read_text().splitlines()]
    rows = [{**r, "gold": gold[r["id"]]} for r in records if r["id"] in gold]
    (tmp / "my_labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _pairs(tmp: Path) -> None:  # the pair of docs/pairwise.md's Python example
    pair = {"id": "p1", "user_input": "What is 2 + 3?", "response_a": "5", "response_b": "6"}
    (tmp / "pairs.jsonl").write_text(json.dumps(pair) + "\n")


def _conversation(tmp: Path) -> None:  # the conversation file docs/records.md shows
    text = next(code for where, code in blocks("json") if where.startswith("docs/records.md") and "messages" in code)
    (tmp / "conv.json").write_text(text)


def _registry(tmp: Path) -> None:  # the models.yaml README.md shows
    entry = next(code for where, code in blocks("yaml") if where.startswith("README.md") and "models:" in code)
    (tmp / "models.yaml").write_text(entry)


def _saved_dataset(tmp: Path) -> None:  # as docs/records.md's bash block makes it
    import datasets

    ds = datasets.load_dataset("json", data_files=str(ROOT / "examples" / "demo.jsonl"), split="train")
    ds.save_to_disk(str(tmp / "demo_ds"))


#: The files the examples name, each made where its page names it.
FILES: dict[str, Callable[[Path], None]] = {
    **{name: (lambda tmp, name=name: _demo(tmp, name)) for name in ("data.jsonl", "a.jsonl", "b.jsonl")},
    "records.jsonl": lambda tmp: _demo(tmp, "records.jsonl"),
    "my_labels.jsonl": _labelled,
    "rag.jsonl": _rag,
    "pairs.jsonl": _pairs,
    "conv.json": _conversation,
    "models.yaml": _registry,
    "demo_ds": _saved_dataset,
}


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """Make a page's working directory: a fresh folder holding examples/ and the files the page
    names, a $LOCALJURY_HOME and judgment store of its own, and every engine the scripted one
    (its log returned)."""
    import localjury.bench.decision_ways
    import localjury.run.dry
    import localjury.run.generate
    from localjury.models.registry import ModelFiles, ModelSpec

    log: list = []

    def make(page: str) -> list:
        work = tmp_path / "work"
        shutil.copytree(ROOT / "examples", work / "examples", ignore=shutil.ignore_patterns("__pycache__"))
        text = (ROOT / page).read_text()
        for name, write in FILES.items():
            if name in text:
                write(work)
        monkeypatch.chdir(work)
        monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("LOCALJURY_CACHE", str(tmp_path / "judgments.sqlite"))
        monkeypatch.delenv("LOCALJURY_MODELS", raising=False)
        engine = lambda spec, *_, **__: SchemaEngine(spec, None, log)  # noqa: E731
        monkeypatch.setattr(localjury.run.generate, "load_engine", engine)
        monkeypatch.setattr(localjury.bench.decision_ways, "load_engine", engine)  # align's decision heads
        monkeypatch.setattr(localjury.run.dry, "load_tokenizer", engine)
        # The one check of a model's files before a load (run/jury.py: the weights are there and
        # whole), which a run given no engine factory makes: the examples name the embedded models
        # and the README's /models/Qwen2.5-7B-Instruct, none of them in this $LOCALJURY_HOME, and
        # the scripted engine loads no file. Everything else (registry, engine choice, hashing
        # what is there) runs as it does. It answers where the files would be, as the check does.
        where = lambda spec, files: ModelFiles(spec.local_dir(), spec.tokenizer_dir())  # noqa: E731
        monkeypatch.setattr(ModelSpec, "require", where)
        return log

    return make


# -- Python blocks ------------------------------------------------------------------------------
PYTHON = blocks("python")


def page_of(where: str) -> str:
    return where.rsplit(":", 1)[0]


def not_run(table: dict[tuple[str, str], str], where: str, text: str) -> str | None:
    return next((why for (page, part), why in table.items() if page == page_of(where) and part in text), None)


def test_every_example_left_out_is_one_the_docs_show():
    for page, part in PYTHON_NOT_RUN:
        assert any(page_of(w) == page and part in code for w, code in PYTHON), (page, part)
    for page, part in COMMANDS_NOT_RUN:
        assert any(page_of(w) == page and part in " ".join(argv) for w, argv in COMMANDS), (page, part)


def execute(where: str, code: str, namespace: dict) -> None:
    """Run ``code`` in ``namespace``; an exception fails the test naming the line of the page."""
    try:
        exec(compile(code, where, "exec"), namespace)
    except Exception as exc:
        line = next((f.lineno for f in reversed(traceback.extract_tb(exc.__traceback__)) if f.filename == where), None)
        pytest.fail(f"{where}, line {line} of the block: {type(exc).__name__}: {exc}")


def page_namespace(page: str, monkeypatch) -> dict:
    """What a page's first block starts from: on docs/ci-and-pytest.md, the example test file the block
    quotes (its question, criterion and system under test); a ``ragas`` module where RAGAS is
    not installed (docs/records.md: it is never imported by localjury, which reads any object
    whose ``samples`` have its fields; this one has the class the block uses)."""
    namespace: dict = {"__name__": "__docs__"}
    if page == "docs/ci-and-pytest.md":
        exec((ROOT / "examples" / "test_judge_example.py").read_text(), namespace)
    if page == "docs/records.md" and importlib.util.find_spec("ragas") is None:
        monkeypatch.setitem(sys.modules, "ragas", types.SimpleNamespace(EvaluationDataset=EvaluationDataset))
    return namespace


class EvaluationDataset:
    """RAGAS's ``EvaluationDataset`` as far as localjury reads it: ``samples`` with its fields."""

    def __init__(self, samples: list) -> None:
        self.samples = samples

    @classmethod
    def from_list(cls, rows: list[dict]) -> EvaluationDataset:
        return cls([types.SimpleNamespace(**row) for row in rows])


def check_outcome(where: str, before: dict, namespace: dict, log: list) -> None:
    """What a block made is what it says: each run has one result per (record, metric), every
    metric scored on some record (the scripted jury voted), as many records as its data file
    holds; a plan counts samples, to draw or in the store, for each model; a test function
    the block defines passes, given the ``judge`` fixture's object where it takes one."""
    from localjury import RunPlan, RunResult
    from localjury.integrations.pytest_plugin import Judge

    made = {k: v for k, v in namespace.items() if k not in before or before[k] is not v}
    for name, value in made.items():
        if isinstance(value, RunResult):
            summary = value.summary
            assert len(value.results) == summary.records * len(summary.metrics) > 0, (where, name)
            for metric in summary.metrics:
                assert any(r.score is not None for r in value.results if r.metric == metric.metric), (where, metric)
            if summary.dataset and Path(summary.dataset).is_file():
                assert summary.records == len(Path(summary.dataset).read_text().splitlines()), (where, name)
        elif isinstance(value, RunPlan):
            # samples to draw or already in the store (an earlier block on the page may have judged)
            assert value.models and all(m.records and m.judgments + m.cached for m in value.models), (where, name)
        elif name.startswith("test_") and callable(value):  # a pytest test (of the `judge` fixture, if it takes it)
            value(*[Judge(["smollm2-135m-instruct"]) for _ in inspect.signature(value).parameters])
    assert any(entry[0] == "generate" for entry in log), f"{where}: nothing was judged"


@pytest.mark.parametrize(("where", "code"), PYTHON, ids=[w for w, _ in PYTHON])
def test_each_python_example_runs(where, code, sandbox, monkeypatch):
    reason = not_run(PYTHON_NOT_RUN, where, code)
    if reason is not None:
        pytest.skip(reason)
    page = page_of(where)
    log = sandbox(page)
    if page == "docs/ci-and-pytest.md":  # quoted from the example file: it must still be there as shown
        assert code in (ROOT / "examples" / "test_judge_example.py").read_text()
    namespace = page_namespace(page, monkeypatch)
    for earlier, earlier_code in PYTHON:  # the page's blocks before this one, as a reader ran them
        if earlier == where:
            break
        if page_of(earlier) == page and not_run(PYTHON_NOT_RUN, earlier, earlier_code) is None:
            execute(earlier, earlier_code, namespace)
    before = dict(namespace)
    execute(where, code, namespace)
    check_outcome(where, before, namespace, log)


def test_a_python_example_that_raises_fails(sandbox, monkeypatch):
    sandbox("README.md")
    code = "from localjury import AspectCritic, evaluate\n\nevaluate('missing.jsonl', [AspectCritic('a', 'b')])\n"
    with pytest.raises(pytest.fail.Exception, match=r"here, line 3 of the block: .*missing\.jsonl"):
        execute("here", code, {})


# -- commands -----------------------------------------------------------------------------------
COMMANDS = [(where, argv) for where, code in blocks("bash") for argv in commands(code)]


def invoke(where: str, argv: list[str], tmp: Path, monkeypatch, capsys) -> str:
    """Run ``localjury ARGV`` in this process (a path under /tmp moved into ``tmp``); fail
    naming ``where`` unless it exits 0; check the files a run wrote; return its stdout."""
    argv = [re.sub(r"^/tmp/", f"{tmp}/tmp/", a) for a in argv]
    code, out, err = run_cli(monkeypatch, capsys, *argv)
    if code != 0:
        pytest.fail(f"{where}: `localjury {' '.join(argv)}` exited {code}: {(err or out)[-2000:]}")
    if argv[0] == "run" and "--dry-run" not in argv:
        results = Path(next((b for a, b in itertools.pairwise(argv) if a in ("--out", "-o")), "results.jsonl"))
        summary = json.loads(results.with_name(results.stem + ".summary.json").read_text())
        lines = results.read_text().splitlines()
        assert len(lines) == summary["records"] * len(summary["metrics"]) > 0, f"{where}: {argv}"
    return out


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=[f"{w}:{a[0]}" for w, a in COMMANDS])
def test_each_command_runs(where, argv, sandbox, tmp_path, monkeypatch, capsys):
    reason = not_run(COMMANDS_NOT_RUN, where, " ".join(argv))
    if reason is not None:
        pytest.skip(reason)
    page = page_of(where)
    log = sandbox(page)
    for earlier, earlier_argv in COMMANDS:  # the page's commands before this one (`show` reads `run`'s)
        if earlier_argv is argv:
            break
        if page_of(earlier) == page and not_run(COMMANDS_NOT_RUN, earlier, " ".join(earlier_argv)) is None:
            invoke(earlier, earlier_argv, tmp_path, monkeypatch, capsys)
    out = invoke(where, argv, tmp_path, monkeypatch, capsys)
    assert out.strip(), f"{where}: `localjury {' '.join(argv)}` printed nothing"
    if argv[0] in ("run", "calibrate") and "--dry-run" not in argv:
        assert any(entry[0] == "generate" for entry in log), f"{where}: nothing was judged"
    if argv[0] == "show" and "--record" in argv:
        assert argv[argv.index("--record") + 1] in out


def test_a_command_that_fails_fails(sandbox, tmp_path, monkeypatch, capsys):
    sandbox("README.md")
    with pytest.raises(pytest.fail.Exception, match=r"here: `localjury run missing.jsonl .*` exited 2"):
        invoke("here", ["run", "missing.jsonl", "--aspect", "conciseness"], tmp_path, monkeypatch, capsys)
