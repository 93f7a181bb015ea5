import json
import re
from pathlib import Path

import pytest

from localjury.errors import ConfigError, ModelNotAvailableError
from localjury.models.registry import DEFAULT_MODEL, PACKAGED_REGISTRY, load_registry, registry_path
from tests import ROOT


def test_packaged_registry_has_both_embedded_models():
    reg = load_registry(PACKAGED_REGISTRY)
    assert DEFAULT_MODEL in reg.models
    assert reg.models["smollm2-135m-instruct"].prompt_format == "chat"
    assert reg.models["gemma-3-270m"].prompt_format == "plain"


def test_repo_models_yaml_is_the_packaged_one():

    top = ROOT / "models.yaml"
    assert top.read_text() == PACKAGED_REGISTRY.read_text()


def test_registry_resolution_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOCALJURY_MODELS", raising=False)
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    assert registry_path() == PACKAGED_REGISTRY
    (tmp_path / "models.yaml").write_text("models: {}\n")
    assert registry_path() == PACKAGED_REGISTRY  # the working directory's is read only when named
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "models.yaml").write_text("models: {}\n")
    assert registry_path() == tmp_path / "home" / "models.yaml"
    monkeypatch.setenv("LOCALJURY_MODELS", str(tmp_path / "env.yaml"))
    assert registry_path() == tmp_path / "env.yaml"
    assert registry_path(tmp_path / "cli.yaml") == tmp_path / "cli.yaml"
    assert registry_path("models.yaml") == Path("models.yaml")


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


def test_an_unknown_model_says_that_the_working_directory_s_models_yaml_was_not_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.yaml").write_text("models:\n  mine:\n    path: ./w\n")
    with pytest.raises(ConfigError, match=r"the models\.yaml in the working directory is read only when named with"):
        load_registry().get("mine")
    assert load_registry("models.yaml").get("mine").local_dir() == Path("w")


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("temperature: .inf", "temperature: Input should be a finite number"),
        ("temperature: .nan", "temperature: Input should be a finite number"),
        ("top_p: .nan", "top_p: Input should be a finite number"),
        ("temperature: -1", "temperature: Input should be greater than or equal to 0"),
        ("max_tokens: 0", "max_tokens: Input should be greater than 0"),
        ("context_length: .inf", "context_length: Input should be a finite number"),
        ("vllm:\n      cpu_kv_cache_gib: .inf", "vllm.cpu_kv_cache_gib: Input should be a finite number"),
        ("server:\n      request_timeout: .nan", "server.request_timeout: Input should be a finite number"),
    ],
)
def test_a_setting_that_is_not_a_finite_number_in_range_is_refused_at_load(tmp_path, entry, field):
    (tmp_path / "m.yaml").write_text(f"models:\n  mine:\n    path: /m\n    {entry}\n")
    with pytest.raises(ConfigError, match=rf"models.yaml entry 'mine' in .*m.yaml: {re.escape(field)}"):
        load_registry(tmp_path / "m.yaml")


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
    (tmp_path / "model.safetensors").write_bytes(safetensors_bytes({}))
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


def safetensors_bytes(tensors, metadata=None, pad_to=8):
    """A safetensors file written by hand: 8-byte little-endian header length, the JSON header
    (padded with spaces, as the library does), then the tensors' bytes (zeros)."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, size) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % pad_to)
    return len(text).to_bytes(8, "little") + text + bytes(offset)


TWO_TENSORS = {"embed.weight": ("F32", [16, 8], 512), "head.bias": ("F16", [8], 16)}


def model_folder(folder, **files):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text("{}")
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return load_registry(PACKAGED_REGISTRY).get(str(folder))


def test_complete_safetensors_weights_pass_the_header_check(tmp_path):
    good = safetensors_bytes(TWO_TENSORS, metadata={"format": "pt"})
    spec = model_folder(tmp_path, **{"model-00001-of-00002.safetensors": good})
    # A 4 GiB shard, sparse: the check reads its header, never its data.
    header = json.dumps({"w": {"dtype": "U8", "shape": [4 << 30], "data_offsets": [0, 4 << 30]}}).encode()
    with open(tmp_path / "model-00002-of-00002.safetensors", "wb") as fh:
        fh.write(len(header).to_bytes(8, "little") + header)
        fh.truncate(8 + len(header) + (4 << 30))
    assert spec.require_local_dir() == tmp_path


GOOD = safetensors_bytes(TWO_TENSORS)
SIZE = len(GOOD)


def raw(header):
    return len(header).to_bytes(8, "little") + header


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (GOOD[:300], rf"truncated: 300 bytes, the header says {SIZE:,}"),
        (GOOD + b"extra", rf"{SIZE + 5:,} bytes, the header says {SIZE:,} \(5 bytes after the last tensor\)"),
        (b"\x01\x02\x03", r"truncated: 3 bytes, too short for the 8-byte header length"),
        ((5000).to_bytes(8, "little") + b"{}" + bytes(90), r"truncated: 100 bytes, its header alone needs 5,008"),
        ((1 << 62).to_bytes(8, "little") + b"{}", r"not a safetensors file: a header length of 4,611,686,018,427,38"),
        (raw(b"{not json}"), r"not a safetensors file: its header is not JSON"),
        (bytes(64), r"not a safetensors file: its header is not JSON"),  # zeros: an empty header
        (raw(b"[]"), r"not a safetensors file: its header is not a JSON object"),
        (
            raw(b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [8]}}'),
            r"not a safetensors file: tensor 'w' in its header has no valid data_offsets \(begin, end\)",
        ),
    ],
    ids=["truncated", "too-long", "shorter-than-8", "header-past-end", "huge-header", "bad-json", "zeros",
         "not-object", "bad-offsets"],
)  # fmt: skip
def test_damaged_safetensors_weights_are_refused_naming_the_file_and_fix(tmp_path, data, problem):
    spec = model_folder(tmp_path / "m", **{"model.safetensors": data})
    with pytest.raises(ModelNotAvailableError, match=problem) as info:
        spec.require_local_dir()
    message = str(info.value)
    assert message.startswith(f"model 'm': weights file {tmp_path / 'm' / 'model.safetensors'} is ")
    assert message.endswith("; copy or download the model's weights into that folder again") and "\n" not in message


def test_one_damaged_shard_is_named(tmp_path):
    spec = model_folder(
        tmp_path,
        **{"model-00001-of-00002.safetensors": GOOD, "model-00002-of-00002.safetensors": GOOD[:-1]},
    )
    with pytest.raises(ModelNotAvailableError, match=rf"model-00002-of-00002\.safetensors is truncated: {SIZE - 1:,}"):
        spec.require_local_dir()


def test_damaged_weights_of_an_embedded_model_name_the_pull_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path))
    folder = tmp_path / "models" / "smollm2-135m-instruct"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(GOOD[:100])
    spec = load_registry(PACKAGED_REGISTRY).get("smollm2-135m-instruct")
    with pytest.raises(
        ModelNotAvailableError,
        match=r"is truncated: 100 bytes, .*; run: localjury models pull smollm2-135m-instruct --force$",
    ):
        spec.require_local_dir()


def test_packaged_registry_has_the_qwen_judges_on_the_measured_engine():
    reg = load_registry(PACKAGED_REGISTRY)
    for name in ("qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"):
        spec = reg.models[name]
        assert spec.engine == "auto" and spec.prompt_format == "chat" and spec.embedded == name


def test_a_gguf_path_names_the_file_and_its_tokenizer_cache(tmp_path, monkeypatch):
    from localjury.models.registry import ModelSpec

    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    gguf = tmp_path / "judge.gguf"
    spec = ModelSpec(name="judge", path=str(gguf))
    assert spec.is_gguf_path and spec.gguf_file() == gguf
    assert spec.tokenizer_dir().parent == tmp_path / "home" / "tokenizers"
    with pytest.raises(ModelNotAvailableError, match=r"model 'judge': no GGUF file at .*judge\.gguf; fix 'path'"):
        spec.require_gguf()
    gguf.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ModelNotAvailableError, match=r"is not a GGUF file; give a \.gguf file"):
        spec.require_gguf()
    gguf.write_bytes(b"GGUF" + bytes(20))
    assert spec.require_gguf() == gguf
    folder = ModelSpec(name="q", embedded="qwen2.5-coder-0.5b-instruct")
    assert folder.gguf_file() == tmp_path / "home" / "models" / "qwen2.5-coder-0.5b-instruct" / "model.gguf"
    with pytest.raises(ModelNotAvailableError, match="run: localjury models pull q"):
        folder.require_gguf()


def test_a_gguf_file_can_be_named_directly(tmp_path):
    gguf = tmp_path / "my-judge.gguf"
    gguf.write_bytes(b"GGUF")
    spec = load_registry(PACKAGED_REGISTRY).get(str(gguf))
    assert spec.path == str(gguf.resolve()) and spec.is_gguf_path


def test_a_spec_stays_hashable_with_server_settings():
    from localjury.models.registry import ModelSpec, ServerSettings

    def spec(top_k: int) -> ModelSpec:
        return ModelSpec(name="s", base_url="http://127.0.0.1:1/v1", server=ServerSettings(extra_body={"top_k": top_k}))

    assert hash(spec(1)) == hash(spec(1)) and len({spec(1), spec(1), spec(2)}) == 2
