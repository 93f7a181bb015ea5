"""The documentation cannot drift from the code: the site builds with ``mkdocs build --strict``
(every page in the nav, every link and anchor found, every docstring the API pages read), and
every code example in README.md and docs/ is checked against what it names.

- ``localjury`` commands (bash blocks) are parsed by the CLI itself: the command exists, and
  its options, their values and its arguments are ones the command takes.
- Python blocks compile, every name they import from localjury exists, and every call of one
  binds to its signature (arguments the function does not take are drift).
- YAML blocks parse, and a ``models:`` block is a valid registry (unknown keys are errors);
  JSON blocks parse, as one document or a line each, and a results line is a valid
  ``RecordResult`` (every field it shows is one results carry).

tests/docs/test_examples_run.py runs them, with a scripted engine in place of the model; running
them with the real models (a model load each, minutes on 2 cores) is left to the integration
tests and benchmarks that run the same commands.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(lang: str) -> list[tuple[str, str]]:
    """(where, code) of every fenced block in ``lang``."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) == lang:
                line = text[: m.start()].count("\n") + 1
                found.append((f"{page.relative_to(ROOT)}:{line}", m.group(2)))
    return found


def commands(code: str) -> list[list[str]]:
    """The ``localjury`` command lines of a bash block: continuations joined, comments dropped,
    each of ``&&``, ``;`` and ``|``'s parts its own command."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        part: list[str] = []
        for word in [*words, ";"]:
            if word in ("&&", ";", "|", "||"):
                while part and re.match(r"^\w+=", part[0]):  # VAR=value before the command
                    part.pop(0)
                if part and Path(part[0]).name == "localjury":
                    out.append(part[1:])
                part = []
            else:
                part.append(word)
    return out


def test_the_site_builds_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").is_file()
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()
    assert "cli-options" not in cli and "<code>--fail-under</code>" in cli  # the hook made the table


def hook(name: str):
    """The MkDocs hook docs/hooks/NAME.py (cli_options: the CLI's option tables; figures: the
    benchmarks' figures), loaded as MkDocs loads it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_option_tables_are_the_clis_own():
    import typer

    from localjury.cli import app

    options = hook("cli_options")
    page = "Intro.\n\n<!-- cli-options: run -->\n\nAfter.\n"
    table = options.on_page_markdown(page, page=None).split("\n\n")[1].splitlines()
    group = typer.main.get_command(app)
    run = group.get_command(typer.Context(group), "run")
    shown = [p for p in run.params if not getattr(p, "hidden", False)]
    assert len(table) == 2 + len(shown)  # a row per argument and option, in the CLI's order
    assert table[2].startswith("| `DATA` | PATH | required | Records to judge")
    (seed,) = [row for row in table if row.startswith("| `--seed` |")]
    assert seed.startswith("| `--seed` | INTEGER 0 to 4294967295 | `0` | Run seed (0 to 2\\*\\*32-1)")
    assert "&lt;out stem&gt;" in next(row for row in table if row.startswith("| `--summary` |"))
    assert "| `--force` |" in options.options_table(["models", "pull"])  # a subcommand's
    with pytest.raises(Exception, match="`localjury models lst` is no command of the CLI"):
        options.options_table(["models", "lst"])


def test_a_figures_marker_becomes_the_benchmarks_markdown_with_its_cpu_and_command():
    figures_hook = hook("figures")
    figures = json.loads((ROOT / "benchmarks" / "results" / "decision_heads.json").read_text())
    page = figures_hook.on_page_markdown("## Heads\n\n<!-- figures: decision_heads -->\n", page=None)
    assert "<!--" not in page and "\n### Decision heads against prompting\n" in page  # two levels down
    assert "\n#### truthfulqa " in page  # the benchmark's own sections under it
    assert f"CPU: {figures['cpu']}. Command: `{figures['command']}`." in page
    with pytest.raises(Exception, match=r"no benchmarks/results/nothing\.md"):
        figures_hook.on_page_markdown("<!-- figures: nothing -->", page=None)


def test_the_readme_is_short_and_links_only_pages_that_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 12 * 1024
    linked = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert linked and all((ROOT / p).is_file() for p in linked)
    assert "## Use your own model" in readme[: readme.index("## Judge your data")]


#: A test module or test the docs name as the evidence of a claim: ``tests/…/test_x.py``, with
#: ``::test_name`` (``*`` a wildcard) where one test is meant.
TEST_REF = re.compile(r"\b(tests/[\w/]+\.py)(?:::([\w*]+))?")


def named_tests(text: str) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in TEST_REF.finditer(text)]


def test_every_test_the_docs_name_exists():
    named = [(page, ref) for page in PAGES for ref in named_tests(page.read_text())]
    assert len(named) >= 20
    for page, (module, test) in named:
        where = f"{page.relative_to(ROOT)} names {module}{'::' + test if test else ''}"
        assert (ROOT / module).is_file(), f"{where}, which is not there"
        if test is not None:
            defined = re.findall(r"^\s*(?:async )?def (test_\w+)", (ROOT / module).read_text(), re.M)
            assert any(fnmatch.fnmatchcase(d, test) for d in defined), f"{where}: no such test in it"


def test_a_moved_test_is_drift():
    assert named_tests("`tests/unit/test_x.py::test_y_*`, `tests/system/z.py`") == [
        ("tests/unit/test_x.py", "test_y_*"),
        ("tests/system/z.py", None),
    ]


CLI_COMMANDS = [(where, argv) for where, code in blocks("bash") for argv in commands(code)]


def test_the_docs_show_the_commands():
    assert len(CLI_COMMANDS) >= 20
    assert {argv[0] for _, argv in CLI_COMMANDS} >= {"run", "bench", "align", "show", "models", "calibrate"}


@pytest.mark.parametrize(("where", "argv"), CLI_COMMANDS, ids=[f"{w}:{a[0]}" for w, a in CLI_COMMANDS])
def test_each_command_parses(where, argv):
    parse(where, argv)


def parse(where: str, argv: list[str]) -> None:
    """Parse ``localjury ARGV`` as the CLI does, running nothing; fail naming ``where``.
    (typer 0.29 carries its own click, ``typer._click``: its classes are read off the objects.)"""
    import typer

    from localjury.cli import app

    command = typer.main.get_command(app)
    name, args = "localjury", list(argv)
    while hasattr(command, "get_command") and args and not args[0].startswith("-"):
        sub = command.get_command(typer.Context(command), args[0])
        if sub is None:
            pytest.fail(f"{where}: no command {args[0]!r} in `{name}` (`localjury {' '.join(argv)}`)")
        name, command, args = f"{name} {args[0]}", sub, args[1:]
    args = [a for a in args if a != "..."]  # an elided argument list
    try:
        command.make_context(name, args)
    except typer.Exit:  # --help
        pass
    except Exception as exc:
        if not hasattr(exc, "format_message"):  # not a usage error: a bug of the CLI's own
            raise
        pytest.fail(f"{where}: `{name} {' '.join(args)}`: {exc.format_message()}")


@pytest.mark.parametrize(
    "argv",
    [["run", "d.jsonl", "--strictnes", "3"], ["models", "lst"], ["run", "d.jsonl", "--strictness", "x"], ["nope"]],
)
def test_the_check_fails_a_command_the_cli_would_refuse(argv):
    with pytest.raises(pytest.fail.Exception):
        parse("here", argv)


PYTHON = blocks("python")


def _imported(tree: ast.AST) -> dict[str, object]:
    names: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("localjury"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
                names[alias.asname or alias.name] = getattr(module, alias.name)
    return names


def _callee(func: ast.expr, names: dict[str, object]) -> object | None:
    if isinstance(func, ast.Name):
        return names.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names:
        return getattr(names[func.value.id], func.attr, None)
    return None


@pytest.mark.parametrize(("where", "code"), PYTHON, ids=[w for w, _ in PYTHON])
def test_each_python_example_compiles_and_calls_localjury_as_it_is(where, code):
    check_python(where, code)


@pytest.mark.parametrize(
    "code",
    [
        "from localjury import AspectCritic\nAspectCritic('a', 'b', strictnes=3)",
        "from localjury import Judge\n",
        "from localjury import AspectCritic\nAspectCritic.predefined('conciseness', 3, 4)",
    ],
)
def test_the_check_fails_an_example_that_drifted(code):
    with pytest.raises((pytest.fail.Exception, AssertionError)):
        check_python("here", code)


def check_python(where: str, code: str) -> None:
    """Compile ``code``; every localjury name it imports exists and every call of one binds."""
    tree = ast.parse(code, filename=where)
    names = _imported(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = _callee(node.func, names)
        if target is None or not callable(target):
            continue
        signature = inspect.signature(target)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue  # *args / **kwargs: nothing to bind statically
        try:
            signature.bind(*node.args, **{k.arg: k.value for k in node.keywords if k.arg})
        except TypeError as exc:
            pytest.fail(f"{where}, line {node.lineno}: {ast.unparse(node.func)}(...): {exc}")


def test_every_yaml_and_json_example_parses_and_every_registry_is_valid(tmp_path):
    from localjury.models.registry import load_registry

    registries = 0
    for where, code in blocks("yaml"):
        data = yaml.safe_load(code)
        assert data is not None, where
        if isinstance(data, dict) and "models" in data:
            path = tmp_path / f"models{registries}.yaml"
            path.write_text(code)
            load_registry(path)  # a ConfigError names the entry and the key
            registries += 1
    assert registries >= 1
    from localjury.results.record_result import RecordResult

    results = 0
    for where, code in blocks("json"):
        try:
            documents = [json.loads(code)]
        except json.JSONDecodeError:  # JSON Lines
            documents = [json.loads(line) for line in code.splitlines() if line.strip()]
        for doc in documents:
            if isinstance(doc, dict) and "record_id" in doc:  # a line of results.jsonl, as it is written
                RecordResult.model_validate(doc, context={"where": where})
                results += 1
    assert results >= 3
