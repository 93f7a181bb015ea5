"""Which engine runs here: ``engine: auto``'s measured choice, each branch reached by
overriding what is installed and what was measured."""

import json

import pytest

from localjury.engines import _auto, explain_engine, resolve_engine
from localjury.models.registry import ModelSpec


@pytest.fixture
def both(tmp_path, monkeypatch):
    """A model whose folder has both a GGUF and Hugging Face weights, with llama.cpp importable."""
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LOCALJURY_AUTO_ENGINE", "measure")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.gguf").write_bytes(b"GGUF")
    monkeypatch.setattr(_auto, "find_spec", lambda name: object() if name == "llama_cpp" else None)
    return ModelSpec(name="m", path=str(folder))


def fake_measure(rates, calls):
    def measure(spec, engine):
        calls.append(engine)
        rate = rates[engine]
        if isinstance(rate, str):
            return _auto.EngineOption(engine, True, failure=rate)
        return _auto.EngineOption(engine, True, judgments_per_s=rate)

    return measure


def test_auto_measures_once_and_keeps_the_fastest(both):
    calls = []
    choice = _auto.choose(both, measure_fn=fake_measure({"transformers": 2.5, "llamacpp": 1.4}, calls))
    assert choice.engine == "transformers" and choice.measured and "2.50" in choice.reason and "1.40" in choice.reason
    again = _auto.choose(both, measure_fn=fake_measure({}, calls))
    assert again.engine == "transformers" and calls == ["transformers", "llamacpp"]
    # doctor --measure: timed again (an idle machine may say otherwise), and the new figures kept.
    redone = _auto.choose(both, fresh=True, measure_fn=fake_measure({"transformers": 1.0, "llamacpp": 1.4}, calls))
    assert redone.engine == "llamacpp" and len(calls) == 4
    assert _auto.choose(both, measure_fn=fake_measure({}, calls)).engine == "llamacpp"


def test_the_measurement_says_what_it_does_how_long_the_rest_takes_and_how_to_skip_it(both, monkeypatch, capsys):
    clock = iter([100.0, 130.0, 130.0, 142.0])  # transformers takes 30 s, llamacpp 12 s
    monkeypatch.setattr(_auto.time, "monotonic", lambda: next(clock))
    _auto.choose(both, measure_fn=fake_measure({"transformers": "exit 1: boom", "llamacpp": 1.4}, []))
    err = capsys.readouterr().err.splitlines()
    assert "measuring which engine runs m fastest" in err[0] and "--engine transformers or another skips it" in err[0]
    assert "a load and 12 samples each" in err[0] and str(_auto.cache_path(both).parent) in err[0]
    assert err[1] == "localjury:   transformers (1 of 2) ... 30 s: failed"
    assert err[2] == "localjury:   llamacpp (2 of 2, about 30 s left) ... 12 s: 1.40 judgments/s"


def test_auto_takes_llamacpp_where_it_measures_faster(both):
    choice = _auto.choose(both, measure_fn=fake_measure({"transformers": 1.5, "llamacpp": 1.6}, []))
    assert choice.engine == "llamacpp"


def test_an_engine_whose_measurement_crashes_is_not_chosen(both):
    rates = {"transformers": "killed by signal 11: ", "llamacpp": 0.4}
    choice = _auto.choose(both, measure_fn=fake_measure(rates, []))
    assert choice.engine == "llamacpp" and "transformers failed" in choice.reason


def test_auto_with_one_loadable_engine_measures_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALJURY_AUTO_ENGINE", "measure")
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    spec = ModelSpec(name="hf", path=str(folder))
    choice = _auto.choose(spec, measure_fn=lambda *a: pytest.fail("nothing to compare"))
    assert choice.engine == "transformers" and "only engine" in choice.reason
    assert resolve_engine(spec) == "transformers"


def test_auto_names_what_is_missing_before_a_pull(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path))
    spec = ModelSpec(name="q", embedded="qwen2.5-coder-1.5b-instruct")
    choice = _auto.choose(spec)
    assert choice.engine == "llamacpp" and choice.reason == "not pulled: localjury models pull q"
    assert "models pull q --dequantize" in {o.engine: o.why_not for o in choice.options}["transformers"]


def test_the_rule_setting_and_an_unmeasured_listing_do_not_measure(both, monkeypatch):
    engine, why = explain_engine(both)  # models list, doctor: never a measurement
    assert engine == "transformers" and "not measured" in why
    monkeypatch.setenv("LOCALJURY_AUTO_ENGINE", "rule")
    assert _auto.choose(both, measure_fn=lambda *a: pytest.fail("rule")).engine == "transformers"


def test_a_cached_choice_whose_files_went_is_measured_again(both):
    calls = []
    _auto.choose(both, measure_fn=fake_measure({"transformers": 3.0, "llamacpp": 1.0}, calls))
    path = _auto.cache_path(both)
    data = json.loads(path.read_text())
    data["engine"] = "vllm"  # not loadable here
    path.write_text(json.dumps(data))
    _auto.choose(both, measure_fn=fake_measure({"transformers": 3.0, "llamacpp": 1.0}, calls))
    assert len(calls) == 4


def test_the_rule_keeps_a_gguf_model_on_llamacpp_beside_a_dequantized_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path))
    monkeypatch.setenv("LOCALJURY_AUTO_ENGINE", "rule")
    monkeypatch.setattr(_auto, "find_spec", lambda name: object() if name == "llama_cpp" else None)
    spec = ModelSpec(name="q", embedded="qwen2.5-coder-1.5b-instruct")
    spec.local_dir().mkdir(parents=True)
    (spec.local_dir() / "model.gguf").write_bytes(b"GGUF")
    (spec.local_dir() / "config.json").write_text("{}")  # `models pull q --dequantize` added it
    assert _auto.choose(spec).engine == "llamacpp"
    smol = ModelSpec(name="s", embedded="smollm2-135m-instruct")  # shipped converted: transformers
    smol.local_dir().mkdir(parents=True)
    (smol.local_dir() / "model.gguf").write_bytes(b"GGUF")
    (smol.local_dir() / "config.json").write_text("{}")
    assert _auto.choose(smol).engine == "transformers"
