"""Every YAML file localjury reads goes through one loader that bounds what aliases expand to
and how deep a document nests (localjury._yaml): profiles, criteria and rubric files and
models.yaml alike, refused with a configuration error (exit 2) that names the file and the
rule, before anything is built from them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localjury._files import read_yaml
from localjury.errors import ConfigError
from localjury.models.registry import load_registry
from tests.fakes import fake_registry, run_cli

PROFILE_HEAD = "version: 1\ncriterion: {name: fluffy, definition: The response is about a fluffy animal.}\n"
CALIBRATOR = "{model: fake, metric: fluffy, source: p_pass, a: 1, b: 0, threshold: 0.5, records: 4, positives: 2"


def levels(n: int, k: int, indent: str = "") -> str:
    """``n`` anchored lists, each of ``k`` aliases of the one before: k**n values in 1 KB."""
    lines = [f"{indent}l0: &l0 [" + ", ".join(["x"] * k) + "]"]
    lines += [f"{indent}l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * k) + "]" for i in range(1, n)]
    return "\n".join(lines) + "\n"


def criteria_bomb(n: int, k: int) -> str:
    return "defs:\n" + levels(n, k, "  ") + f"criteria:\n- name: a\n  definition: *l{n - 1}\n"


def profile_bomb(n: int, k: int) -> str:
    held_out = "{" + levels(n, k).strip().replace("\n", ", ") + "}"
    return PROFILE_HEAD + f"calibrators:\n- {CALIBRATOR}, held_out: {held_out}}}\n"


def rubric_bomb(n: int, k: int) -> str:
    return "defs:\n" + levels(n, k, "  ") + f"rubrics:\n- {{name: r, version: 1, criterion: c, levels: *l{n - 1}}}\n"


def registry_bomb(n: int, k: int, folder: Path) -> str:
    return "defs:\n" + levels(n, k, "  ") + f"models:\n  fake: {{path: {folder}, description: *l{n - 1}}}\n"


def string_bomb(uses: int, size: int) -> str:
    return (
        f"criteria:\n- name: a\n  definition: &s {'x' * size}\n- name: b\n  definition: ["
        + ", ".join(["*s"] * uses)
        + "]\n"
    )


def deep_profile(depth: int) -> str:
    return PROFILE_HEAD + f"calibrators:\n- {CALIBRATOR}, held_out: {{k: " + "[" * depth + "]" * depth + "}}\n"


def cli_options(tmp_path: Path, option: str, text: str) -> list:
    """``localjury run`` with ``text`` as the file of ``option`` (the model of a fake registry)."""
    registry = fake_registry(tmp_path)
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "response": "x"}\n')
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    files = {"--registry": bad} if option == "--registry" else {"--registry": registry, option: bad}
    args = ["run", data, "--models", "fake", "--quiet", "--out", tmp_path / "out.jsonl"]
    if option != "--criteria":
        args += ["--criterion", "dated=The response includes a year."]
    return [*args, *(x for pair in files.items() for x in pair)]


# 4**10 values (a million, over the bound) stand in a few hundred bytes; the code before the bound
# built them (a string of 6 MB) and went on.
BOMBS = [
    ("--criteria", lambda tmp: criteria_bomb(10, 4)),
    ("--profile", lambda tmp: profile_bomb(10, 4)),
    ("--rubrics", lambda tmp: rubric_bomb(10, 4)),
    ("--registry", lambda tmp: registry_bomb(10, 4, tmp / "model")),
]


@pytest.mark.parametrize(("option", "bomb"), BOMBS, ids=[b[0] for b in BOMBS])
def test_an_alias_bomb_in_any_yaml_file_exits_2_naming_the_file_and_the_bound(
    tmp_path, monkeypatch, capsys, option, bomb
):
    code, _, err = run_cli(monkeypatch, capsys, *cli_options(tmp_path, option, bomb(tmp_path)))
    assert code == 2, err
    assert "bad.yaml is not read: the value at line" in err
    assert "expands, each alias counted at every use, to more than 500,000 values" in err
    assert "the bound on a YAML file; use fewer aliases" in err and "unexpected" not in err


def test_a_profile_nested_400_deep_exits_2_naming_the_depth_bound(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, *cli_options(tmp_path, "--profile", deep_profile(400)))
    assert code == 2, err
    assert "bad.yaml is not read: line 4 is nested more than 64 levels deep" in err
    assert "flatten it" in err and "unexpected" not in err


def test_an_alias_to_a_collection_it_is_inside_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("criteria:\n- name: a\n  definition: &x [1, *x]\n")
    with pytest.raises(ConfigError, match=r"c.yaml is not read: the value at line 3 holds an alias to a collection"):
        read_yaml(path, "criteria file")


def test_depth_through_aliases_counts_as_written_out(tmp_path):
    """An anchor 40 deep used 40 deep is 80 levels written out: refused, though no line of the
    file nests past 64."""
    path = tmp_path / "c.yaml"
    inner = "[" * 40 + "]" * 40
    path.write_text(f"a: &a {inner}\nb: " + "[" * 39 + "*a" + "]" * 39 + "\n")
    with pytest.raises(ConfigError, match=r"nested more than 64 levels deep \(aliases followed\)"):
        read_yaml(path, "criteria file")
    path.write_text(f"a: &a {inner}\nb: [*a]\n")  # 42 levels: read
    assert read_yaml(path, "criteria file")["b"][0] == read_yaml(path, "criteria file")["a"]


def test_anchors_and_merge_keys_within_the_bounds_still_read(tmp_path):
    folder = fake_registry(tmp_path).parent / "model"
    registry = tmp_path / "models.yaml"
    registry.write_text(
        "defaults: &defaults {temperature: 0.2, max_tokens: 64, context_length: 2048}\n"
        f"models:\n  a: {{<<: *defaults, path: {folder}}}\n  b:\n    <<: *defaults\n    path: {folder}\n"
        "    temperature: 0.9\n"
    )
    models = load_registry(registry).models
    assert (models["a"].temperature, models["a"].max_tokens, models["a"].context_length) == (0.2, 64, 2048)
    assert (models["b"].temperature, models["b"].max_tokens) == (0.9, 64)
    # A large document written out without aliases (JSON is YAML) reads as before: 100,000
    # values (PyYAML, in pure Python, reads some tens of thousands a second).
    big = {"k": [[["x"] * 100] * 100] * 10}
    registry.write_text(json.dumps(big))
    assert read_yaml(registry, "models registry") == big


def test_a_yaml_file_over_the_byte_bound_is_refused_unread(tmp_path, monkeypatch):
    import localjury._files

    monkeypatch.setattr(localjury._files, "MAX_YAML_BYTES", 1000)
    path = tmp_path / "models.yaml"
    path.write_text("models: {}\n" + "# comment\n" * 200)
    with pytest.raises(ConfigError, match=r"models registry .*models.yaml is over the 1,000-byte bound on a models"):
        read_yaml(path, "models registry")


# --- The cases of the issue, as a user meets them: in a process of bounded memory ------------------

#: Address space for the process: several times what a refused file needs, far below what the
#: expansions take (gigabytes).
LIMIT = 3 << 30

ISSUE_CASES = [
    ("--profile", lambda tmp: profile_bomb(9, 8)),  # the 955-byte profile: calibrators[].held_out
    ("--criteria", lambda tmp: criteria_bomb(10, 10)),  # definition: *l9, ten levels of ten
    ("--criteria", lambda tmp: string_bomb(2000, 1 << 20)),  # one 1 MB string aliased 2,000 times
]


def _limited(*args):
    code = (
        f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT})); "
        "from localjury.cli import main; main()"
    )
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="address-space limits as Linux sets them")
@pytest.mark.parametrize(("option", "bomb"), ISSUE_CASES, ids=["profile", "criteria-levels", "criteria-string"])
def test_the_issue_s_bombs_are_refused_in_bounded_memory(tmp_path, option, bomb):
    done = _limited(*cli_options(tmp_path, option, bomb(tmp_path)))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "bad.yaml is not read:" in done.stderr and "the bound on a YAML file" in done.stderr
