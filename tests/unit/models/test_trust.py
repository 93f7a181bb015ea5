"""The trust model: nothing from a data folder runs code or picks a model, a model's own code
runs only when the run names it, and a packaged model's name means the packaged model unless
the command line names the registry that redefines it."""

import json

import pytest

import localjury.diagnosis
import localjury.engines
import localjury.run.generate
from localjury import AspectCritic, evaluate
from localjury.diagnosis import diagnose
from localjury.errors import ConfigError, EngineError
from localjury.models.registry import PACKAGED_REGISTRY, load_registry
from tests.fakes import factory, judgment, run_cli

DATED = AspectCritic("dated", "The response must include a specific date or year.")
CRITERION = "dated=The response must include a specific date or year."
FLAG = "--trust-remote-code"


def yes(model, prompt, j):
    return judgment(1)


cli = run_cli  # the CLI in this process: (exit code, stdout, stderr)


@pytest.fixture
def data_folder(tmp_path, monkeypatch):
    """A data folder from someone else: records, a model folder whose config.json maps the
    model to a Python file there (which leaves a marker when imported), and a models.yaml that
    redefines a packaged model's name (and adds one) to point at it with remote code on. The
    working directory is that folder."""
    folder = tmp_path / "data"
    model = folder / "m"
    model.mkdir(parents=True)
    (folder / "data.jsonl").write_text(json.dumps({"id": "r1", "response": "In 1999."}) + "\n")
    auto_map = {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}
    (model / "config.json").write_text(json.dumps({"model_type": "evil", "auto_map": auto_map}))
    (model / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ["evil.Tok", None]}}))
    (model / "model.safetensors").write_bytes((2).to_bytes(8, "little") + b"{}")
    # An absolute path: transformers imports a copy of the file from its modules cache.
    (model / "evil.py").write_text(f"import pathlib\npathlib.Path({str(model / 'MARKER')!r}).write_text('ran')\n")
    entry = "    path: ./m\n    trust_remote_code: true\n"
    (folder / "models.yaml").write_text(f"models:\n  smollm2-135m-instruct:\n{entry}  evil:\n{entry}")
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def hostile(data_folder, monkeypatch):
    """That folder, with the scripted engine in place of the real ones (its log of loads)."""
    log: list = []
    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(yes, log))
    return data_folder, log


def run_args(*more):
    return ["run", "data.jsonl", "--criterion", CRITERION, "--quiet", "--no-cache", *more]


def test_the_data_folder_of_the_issue_runs_no_code_through_the_real_engines(data_folder, monkeypatch, capsys):
    """The report's case, with the real engines: before the fix, the transformers engine
    loaded ./m with trust_remote_code and imported its Python file."""
    code, _, err = cli(monkeypatch, capsys, *run_args("--models", "smollm2-135m-instruct"))
    assert code == 2 and not (data_folder / "m" / "MARKER").exists()
    code, _, err = cli(monkeypatch, capsys, *run_args("--models", "smollm2-135m-instruct", "--registry", "models.yaml"))
    assert code == 2 and not (data_folder / "m" / "MARKER").exists()
    assert f"pass {FLAG} smollm2-135m-instruct if you trust the files in {data_folder / 'm'}" in err


def test_a_models_yaml_beside_the_data_is_never_read(hostile, monkeypatch, capsys):
    folder, log = hostile
    code, _, err = cli(monkeypatch, capsys, *run_args("--models", "smollm2-135m-instruct"))
    # The packaged model, which is not pulled in this test's home: nothing loads.
    assert code == 2 and "localjury models pull smollm2-135m-instruct" in err
    code, _, err = cli(monkeypatch, capsys, *run_args("--models", "evil"))
    assert code == 2 and "unknown model 'evil'" in err
    assert "the models.yaml in the working directory is read only when named with --registry" in err
    assert log == [] and not (folder / "m" / "MARKER").exists()


def test_remote_code_runs_only_for_a_model_the_run_names(hostile, monkeypatch, capsys):
    folder, log = hostile
    code, _, err = cli(monkeypatch, capsys, *run_args("--models", "evil", "--registry", "models.yaml"))
    assert code == 2 and log == [] and not (folder / "m" / "MARKER").exists()
    (line,) = [line for line in err.splitlines() if line.startswith("error: ")]  # one line
    assert (
        f"model 'evil' asks to run the Python code shipped with its weights (trust_remote_code: true in {folder}"
        in line
    )
    assert f"pass {FLAG} evil if you trust the files in {folder / 'm'}" in line
    code, _, err = cli(monkeypatch, capsys, *run_args("--models", "evil", "--registry", "models.yaml", FLAG, "evil"))
    assert code == 0, err
    assert log[0] == ("load", "evil")


@pytest.mark.parametrize(
    ("more", "message"),
    [
        ([FLAG, "evl"], f"{FLAG} names 'evl', which is no model of this run whose models.yaml entry says "),
        ([FLAG, "evil", FLAG, "mine"], f"{FLAG} names 'mine', which is no model of this run"),
    ],
)
def test_trust_remote_code_names_only_models_that_ask_for_it(hostile, monkeypatch, capsys, more, message):
    folder, log = hostile
    with (folder / "models.yaml").open("a") as fh:
        fh.write("  mine:\n    path: ./m\n")
    args = run_args("--models", "evil,mine", "--registry", "models.yaml", *more)
    code, _, err = cli(monkeypatch, capsys, *args)
    assert code == 2 and message in err and log == []


@pytest.mark.parametrize("command", ["bench", "calibrate"])
def test_bench_and_calibrate_refuse_remote_code_the_same_way(hostile, monkeypatch, capsys, command):
    pytest.importorskip("sklearn")
    folder, log = hostile
    labelled = folder / "labels.jsonl"
    labelled.write_text("".join(json.dumps({"id": f"r{i}", "response": "x", "gold": i % 2}) + "\n" for i in range(4)))
    out = ["--out", folder / "out"] if command == "bench" else ["--out", folder / "cal.json"]
    fmt = ["--format", "jsonl"] if command == "bench" else []
    args = [command, labelled, *fmt, *out, "--models", "evil", "--registry", "models.yaml", "--no-cache", "-q"]
    code, _, err = cli(monkeypatch, capsys, *args)
    assert code == 2 and f"pass {FLAG} evil" in err and log == []
    code, _, err = cli(monkeypatch, capsys, *args, FLAG, "typo")
    assert code == 2 and f"{FLAG} names 'typo'" in err and log == []
    assert not (folder / "m" / "MARKER").exists()


def test_the_python_api_takes_the_same_leave(hostile):
    folder, _ = hostile
    records = [{"id": "r1", "response": "In 1999."}]
    with pytest.raises(ConfigError, match=r"pass `trust_remote_code` evil if you trust the files in"):
        evaluate(records, [DATED], ["evil"], registry="models.yaml", use_cache=False)
    seen: list = []

    def engine(spec):
        seen.append(spec)
        return factory(yes, [])(spec)

    evaluate(records, [DATED], ["evil"], registry="models.yaml", trust_remote_code=["evil"], use_cache=False,
             engine_factory=engine)  # fmt: skip
    assert [(s.name, s.trust_remote_code) for s in seen] == [("evil", True)]
    assert not (folder / "m" / "MARKER").exists()  # the scripted engine imports nothing


def test_a_folder_with_auto_map_never_runs_its_code_without_leave(hostile):
    """A model folder named directly (no registry entry) never has remote code on, and the real
    tokenizer loader then refuses the folder's code instead of importing it."""
    pytest.importorskip("transformers")
    folder, _ = hostile
    spec = load_registry(PACKAGED_REGISTRY).get(str(folder / "m"))
    assert spec.trust_remote_code is False
    with pytest.raises(EngineError, match="contains custom code which must be executed"):
        localjury.engines.load_tokenizer(spec)
    assert not (folder / "m" / "MARKER").exists()


def test_doctor_never_loads_a_model_that_asks_for_remote_code(hostile, monkeypatch):
    folder, _ = hostile
    asked: dict = {}

    def explain(spec, *, measure=False):
        asked[spec.name] = measure
        return "transformers", "test"

    monkeypatch.setattr(localjury.engines, "explain_engine", explain)
    monkeypatch.setattr(localjury.diagnosis, "matmul_rate", lambda name: 1.0)
    (folder / "ok.yaml").write_text(
        "models:\n  plain:\n    path: ./m\n  evil:\n    path: ./m\n    trust_remote_code: true\n"
    )
    diagnose(load_registry(folder / "ok.yaml"), measure=True, probe=False)
    assert asked == {"plain": True, "evil": False}


# -- which registry is read, and who may redefine a packaged model --------------------------------
SHADOW = "models:\n  smollm2-135m-instruct:\n    embedded: smollm2-135m-instruct\n    temperature: 0.1\n"


@pytest.mark.parametrize("where", ["LOCALJURY_MODELS", "LOCALJURY_HOME"])
def test_a_registry_not_named_on_the_command_line_cannot_redefine_a_packaged_model(tmp_path, monkeypatch, where):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    path = home / "models.yaml" if where == "LOCALJURY_HOME" else tmp_path / "env.yaml"
    path.write_text(SHADOW)
    if where == "LOCALJURY_MODELS":
        monkeypatch.setenv("LOCALJURY_MODELS", str(path))
    monkeypatch.setenv("LOCALJURY_HOME", str(home))
    with pytest.raises(ConfigError) as info:
        load_registry()
    assert str(info.value) == (
        f"{path} redefines the packaged model 'smollm2-135m-instruct' (its context_length, prompt_format, purpose, "
        "temperature differ): a packaged model's name means the packaged model unless the "
        "command line names the file that redefines it; rename the entry, or name the file with `registry`"
    )


def test_a_registry_named_on_the_command_line_may_redefine_one_and_is_announced_once(tmp_path, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text(SHADOW)
    assert load_registry(path).get("smollm2-135m-instruct").temperature == 0.1
    load_registry(path)
    err = capsys.readouterr().err
    assert err.count("localjury: 'smollm2-135m-instruct' is the entry of") == 1
    assert f"{path} here, not the packaged model (its " in err


def test_a_copy_of_the_packaged_registry_redefines_nothing(tmp_path, monkeypatch, capsys):
    text = PACKAGED_REGISTRY.read_text().replace("description: SmolLM2", "description: my SmolLM2")
    (tmp_path / "copy.yaml").write_text(text + "  mine:\n    path: /models/mine\n")
    monkeypatch.setenv("LOCALJURY_MODELS", str(tmp_path / "copy.yaml"))
    assert "mine" in load_registry().models
    assert capsys.readouterr().err == ""


def test_the_cli_refuses_a_redefinition_from_the_environment(tmp_path, monkeypatch, capsys):
    (tmp_path / "env.yaml").write_text(SHADOW)
    monkeypatch.setenv("LOCALJURY_MODELS", str(tmp_path / "env.yaml"))
    code, _, err = cli(monkeypatch, capsys, "models", "list")
    assert code == 2 and "or name the file with --registry" in err
    code, _, err = cli(monkeypatch, capsys, "models", "list", "--registry", tmp_path / "env.yaml")
    assert code == 0 and "is the entry of" in err
