import json
import subprocess
import sys
from functools import partial

import pytest
from typer.testing import CliRunner

from localjury.cli import app
from localjury.errors import ConfigError
from localjury.metrics import PREDEFINED_ASPECTS
from localjury.metrics.spec import metrics_of_options
from tests.cli_process import localjury
from tests.fakes import fake_registry, run_cli

HEAVY = ("torch", "transformers", "outlines", "vllm", "ray", "inspect_ai")


@pytest.fixture
def cli(monkeypatch, capsys):
    """The CLI in this process (what a subprocess would add here is the interpreter's start):
    ``cli(*args)`` gives (exit code, stdout, stderr)."""
    return partial(run_cli, monkeypatch, capsys)


@pytest.fixture
def no_engine_loads(monkeypatch):
    """A test of what stops a run before any model loads: a load is refused, and fails the
    test at its end even where the run catches the refusal."""
    loads = []

    def load(spec, *args, **kwargs):
        loads.append(spec.name)
        raise RuntimeError(f"{spec.name} was loaded")

    monkeypatch.setattr("localjury.run.generate.load_engine", load)
    yield
    assert loads == []


def test_import_and_help_do_not_import_heavy_packages():
    code = (
        "import sys, localjury, localjury.cli\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(localjury.cli.app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_aspects_lists_every_predefined_aspect():
    result = CliRunner().invoke(app, ["aspects"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name in PREDEFINED_ASPECTS:  # the set itself is pinned in test_metrics
        assert name in result.output


def test_build_metrics_from_all_three_sources(tmp_path):
    crit = tmp_path / "c.yaml"
    crit.write_text("- name: polite\n  definition: The response is polite.\n  strictness: 3\n  tie_break: pass\n")
    metrics = metrics_of_options(["coherence"], ["dated=The response includes a year. (e.g. x=1)"], crit)
    assert [m.name for m in metrics] == ["coherence", "dated", "polite"]
    assert metrics[1].definition == "The response includes a year. (e.g. x=1)"
    assert (metrics[2].strictness, metrics[2].tie_break) == (3, "pass")


def test_criteria_file_as_a_mapping(tmp_path):
    crit = tmp_path / "c.yaml"
    crit.write_text("dated: The response includes a year.\nshort: The response is under 20 words.\n")
    assert [m.name for m in metrics_of_options([], [], crit)] == ["dated", "short"]


@pytest.mark.parametrize(
    ("aspects", "criteria", "file_text", "message"),
    [
        (["nice"], [], None, "unknown aspect 'nice'"),
        ([], ["no-equals-sign"], None, "--criterion expects NAME=TEXT"),
        ([], ["=text"], None, "--criterion expects NAME=TEXT"),
        ([], [], "- name: x\n", "item 1 needs 'name' and 'definition'"),
        ([], [], "- name: x\n  definition: y\n  strictnes: 3\n", "unknown keys: strictnes"),
        ([], [], "- name: x\n  definition: y\n  strictness: 0\n", "strictness must be an integer from 1 to 64"),
        ([], [], "- name: x\n  definition: y\n  strictness: 1000\n", "strictness must be an integer from 1 to 64"),
        ([], [], "just text", "must map names to criteria"),
    ],
)
def test_bad_criteria_are_config_errors(tmp_path, aspects, criteria, file_text, message):
    path = None
    if file_text is not None:
        path = tmp_path / "c.yaml"
        path.write_text(file_text)
    with pytest.raises(ConfigError, match=message):
        metrics_of_options(aspects, criteria, path)


def test_usage_errors_exit_2_without_traceback(tmp_path, cli):
    data = tmp_path / "d.jsonl"
    data.write_text('{"response": "x"}\n')
    code, _, err = cli("run", data, "--criterion", "oops")
    assert code == 2
    assert "error: --criterion expects NAME=TEXT" in err and "Traceback" not in err
    code, _, err = cli("run", data)
    assert code == 2
    flags = "--aspect, --criterion, --criteria, --metric or --pairwise"
    assert f"no metric to judge: give at least one ({flags})" in err


def test_missing_model_names_the_pull_command(tmp_path, cli, monkeypatch):
    data = tmp_path / "d.jsonl"
    data.write_text('{"response": "x"}\n')
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    code, _, err = cli("run", data, "--aspect", "coherence", "--models", "gemma-3-270m")
    assert code == 2
    assert "localjury models pull gemma-3-270m" in err


def test_debug_shows_the_traceback(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"response": "x"}\n')
    proc = localjury("--debug", "run", str(data), "--criterion", "oops")
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_models_info_and_list(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path))
    code, out, _ = cli("models", "info", "gemma-3-270m")
    info = json.loads(out)
    assert code == 0 and info["embedded"] == "gemma-3-270m" and info["ready"] is False
    assert info["local_dir"] == str(tmp_path / "models" / "gemma-3-270m")
    code, out, _ = cli("models", "list")
    assert code == 0 and "localjury models pull smollm2-135m-instruct" in out


def test_pulling_a_path_model_is_refused(tmp_path, cli):
    (tmp_path / "m.yaml").write_text("models:\n  mine:\n    path: /x\n")
    code, _, err = cli("models", "pull", "mine", "--registry", tmp_path / "m.yaml")
    assert code == 2 and "only embedded models" in err


def test_strict_input_stops_before_any_model_loads(tmp_path, cli, no_engine_loads):
    registry = fake_registry(tmp_path, "mine")  # never loaded: the bad record stops the run first
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "ok", "response": "x"}\n{"id": "bad", "user_input": "q"}\n')
    args = ["--models", "mine", "--registry", registry, "--strict-input", "--out", tmp_path / "r.jsonl"]
    code, _, err = cli("run", data, "--aspect", "coherence", *args)
    assert code == 1
    assert "record 'bad' (d.jsonl line 2), field 'response': missing" in err
    assert not (tmp_path / "r.jsonl").exists()


def test_scoring_and_calibration_options_are_checked_before_any_model_loads(tmp_path, cli, no_engine_loads):
    data = tmp_path / "d.jsonl"
    data.write_text('{"response": "x"}\n')
    code, _, err = cli("run", data, "--aspect", "coherence", "--scoring", "logits")
    assert code == 2 and "unknown scoring 'logits'" in err
    code, _, err = cli("run", data, "--aspect", "coherence", "--calibration", tmp_path / "none.json")
    assert code == 2 and "calibration file not found" in err
    other = tmp_path / "cal.json"
    other.write_text(json.dumps({"localjury_version": "x", "calibrators": []}))
    code, _, err = cli(
        "run", data, "--aspect", "coherence", "--models", "smollm2-135m-instruct", "--calibration", other
    )
    assert code == 2 and "no fit for smollm2-135m-instruct/coherence" in err


def test_verdict_first_reaches_aspects_and_criteria():
    metrics = metrics_of_options(["coherence"], ['dated="A year."'], None, verdict_first=True)
    assert all(m.verdict_first for m in metrics)
    assert list(metrics[1].json_schema()["properties"]) == ["verdict", "reason"]


def test_library_messages_name_settings_and_the_cli_shows_flags(tmp_path):
    from localjury.cli import cli_words

    message = "pass another file as `cache`, or `use_cache=False`; lower `cpus_per_replica` or `replicas`"
    assert cli_words(message) == "pass another file as --cache, or --no-cache; lower --replica-cpus or --replicas"
    from localjury.store import JudgmentStore

    folder = tmp_path / "store"
    folder.mkdir()
    with pytest.raises(ConfigError) as info:
        JudgmentStore(folder)
    shown = cli_words(str(info.value))
    assert "pass a file path as --cache" in shown and "or --no-cache" in shown and "`" not in shown


def test_dry_run_options_need_dry_run_and_a_dry_run_is_local(tmp_path, cli, no_engine_loads):
    data = tmp_path / "d.jsonl"
    data.write_text('{"response": "x"}\n')
    code, _, err = cli("run", data, "--aspect", "coherence", "--estimate", "2")
    assert code == 2 and "--estimate applies only with --dry-run" in err
    code, _, err = cli("run", data, "--aspect", "coherence", "--estimate", "2", "--json")
    assert code == 2 and "--estimate and --json apply only with --dry-run" in err
    code, _, err = cli("run", data, "--aspect", "coherence", "--dry-run", "--cluster", "ray")
    assert code == 2
    assert "a dry run plans a run on this machine; give it without --cluster ray" in err
    assert not (tmp_path / "results.jsonl").exists()
