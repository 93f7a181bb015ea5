import pytest

from localjury.errors import ConfigError, ModelNotAvailableError
from localjury.registry import DEFAULT_MODEL, PACKAGED_REGISTRY, load_registry, registry_path


def test_packaged_registry_has_both_embedded_models():
    reg = load_registry(PACKAGED_REGISTRY)
    assert DEFAULT_MODEL in reg.models
    assert reg.models["smollm2-135m-instruct"].prompt_format == "chat"
    assert reg.models["gemma-3-270m"].prompt_format == "plain"


def test_repo_models_yaml_is_the_packaged_one():
    from pathlib import Path

    top = Path(__file__).resolve().parents[2] / "models.yaml"
    assert top.read_text() == PACKAGED_REGISTRY.read_text()


def test_registry_resolution_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOCALJURY_MODELS", raising=False)
    assert registry_path() == PACKAGED_REGISTRY
    (tmp_path / "models.yaml").write_text("models: {}\n")
    assert registry_path() == tmp_path / "models.yaml"
    monkeypatch.setenv("LOCALJURY_MODELS", str(tmp_path / "env.yaml"))
    assert registry_path() == tmp_path / "env.yaml"
    assert registry_path(tmp_path / "cli.yaml") == tmp_path / "cli.yaml"


def test_typo_in_an_entry_fails_loudly(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("models:\n  mine:\n    path: ./w\n    temprature: 0.5\n")
    with pytest.raises(ConfigError, match=r"models.yaml entry 'mine'.*temprature: Extra inputs are not permitted"):
        load_registry(path)


def test_entry_needs_exactly_one_source(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("models:\n  mine:\n    dtype: float32\n")
    with pytest.raises(ConfigError, match="exactly one of 'path'"):
        load_registry(path)


def test_relative_paths_resolve_against_the_registry_file(tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "m.yaml").write_text("models:\n  mine:\n    path: w\n")
    assert load_registry(tmp_path / "m.yaml").get("mine").local_dir() == tmp_path / "w"


def test_missing_weights_name_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path))
    reg = load_registry(PACKAGED_REGISTRY)
    with pytest.raises(ModelNotAvailableError, match="run: localjury models pull gemma-3-270m"):
        reg.get("gemma-3-270m").require_local_dir()
    (tmp_path / "m.yaml").write_text("models:\n  mine:\n    path: /nowhere/x\n")
    with pytest.raises(ModelNotAvailableError, match="no Hugging Face model folder at /nowhere/x"):
        load_registry(tmp_path / "m.yaml").get("mine").require_local_dir()


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown model 'qwen'.*smollm2-135m-instruct, gemma-3-270m"):
        load_registry(PACKAGED_REGISTRY).get("qwen")


def test_a_model_folder_can_be_named_directly(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    spec = load_registry(PACKAGED_REGISTRY).get(str(tmp_path))
    assert spec.local_dir() == tmp_path and spec.name == tmp_path.name


def test_bad_yaml(tmp_path):
    (tmp_path / "m.yaml").write_text("models: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_registry(tmp_path / "m.yaml")
    (tmp_path / "n.yaml").write_text("judges: {}\n")
    with pytest.raises(ConfigError, match="top-level 'models:' mapping"):
        load_registry(tmp_path / "n.yaml")


def test_pickled_weights_are_refused_and_named(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    spec = load_registry(PACKAGED_REGISTRY).get(str(tmp_path))
    with pytest.raises(ModelNotAvailableError, match=r"no \*\.safetensors weights .*found pytorch_model\.bin"):
        spec.require_local_dir()
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert spec.require_local_dir() == tmp_path


def test_vllm_settings_in_models_yaml(tmp_path):
    (tmp_path / "m.yaml").write_text(
        "models:\n  big:\n    path: /models/big\n    engine: vllm\n    vllm:\n      gpu_memory_utilization: 0.5\n"
        "      tensor_parallel_size: 2\n      quantization: awq\n      structured_outputs_backend: xgrammar\n"
        "      max_model_len: 16384\n"
    )
    spec = load_registry(tmp_path / "m.yaml").get("big")
    assert spec.engine == "vllm" and spec.vllm.gpu_memory_utilization == 0.5
    assert (spec.vllm.tensor_parallel_size, spec.vllm.quantization) == (2, "awq")
    assert (spec.vllm.structured_outputs_backend, spec.vllm.max_model_len) == ("xgrammar", 16384)
    assert load_registry(PACKAGED_REGISTRY).get("smollm2-135m-instruct").engine == "auto"
    (tmp_path / "bad.yaml").write_text("models:\n  big:\n    path: /m\n    vllm:\n      gpu_memory: 0.5\n")
    with pytest.raises(ConfigError, match="gpu_memory"):
        load_registry(tmp_path / "bad.yaml")
    (tmp_path / "backend.yaml").write_text(
        "models:\n  big:\n    path: /m\n    vllm:\n      structured_outputs_backend: lm\n"
    )
    with pytest.raises(ConfigError, match="structured_outputs_backend"):
        load_registry(tmp_path / "backend.yaml")
