"""Which kernels and which engine run here: CPU detection, llama.cpp's kernel probe verdicts,
and ``engine: auto``'s measured choice, each branch reached by overriding the detection."""

import json

import pytest

from localjury.engines import _auto, _cpu, explain_engine, resolve_engine
from localjury.engines import _llamacpp_kernels as kernels
from localjury.models.registry import ModelSpec

XEON = "fpu avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8"
EPYC = "fpu avx2 fma avx512f avx512bw avx512_vnni avx512_bf16"


def test_cpuinfo_gives_name_and_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: " + XEON + "\n")
    name, flags = _cpu._read_cpuinfo(info)
    assert name == "Intel(R) Xeon(R) Platinum 8480+" and "amx_bf16" in flags


@pytest.mark.parametrize(("flags", "amx"), [(XEON, True), (EPYC, False), ("amx_tile", False), ("", False)])
def test_amx_needs_tiles_and_a_tile_dtype(monkeypatch, flags, amx):
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", flags)
    cpu = _cpu.detect()
    assert cpu.amx is amx and cpu.overridden
    assert ("amx_bf16" in cpu.describe()) is ("amx_bf16" in flags)


def test_the_cpu_key_changes_with_the_feature_set(monkeypatch):
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", XEON)
    xeon = _cpu.detect().key
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", EPYC)
    assert _cpu.detect().key != xeon
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", EPYC.replace(" ", ","))
    assert _cpu.detect().key == _cpu.Cpu("x", frozenset(EPYC.split()), 1).key


# -- llama.cpp's kernel verdicts ------------------------------------------------------------


REFERENCE = [3.0, -1.0, 7.5, 0.2, 12.0, -4.0]


def run(extra: bool, ok: bool = True, noise: float = 0.0, argmax: int = 7, failure: str | None = None):
    if not ok:
        return kernels.ProbeRun(extra, False, failure or "killed by SIGSEGV")
    row = [x + noise * (-1) ** i for i, x in enumerate(REFERENCE)]
    return kernels.ProbeRun(extra, True, None, [argmax] * 4, [row] * 4, 1.0)


def test_a_crash_with_the_repacked_kernels_turns_them_off():
    cpu = _cpu.Cpu("Xeon", frozenset(XEON.split()), 2)
    choice = kernels._decide(run(True, ok=False), run(False), cpu)
    assert choice.usable and not choice.extra_bufts and "SIGSEGV" in choice.reason


def test_repacked_kernels_that_compute_other_logits_are_off():
    cpu = _cpu.Cpu("x", frozenset(), 2)
    assert not kernels._decide(run(True, argmax=9), run(False), cpu).extra_bufts
    garbage = kernels._decide(run(True, noise=6.0), run(False), cpu)
    assert not garbage.extra_bufts and "correlation" in garbage.reason
    rounded = kernels._decide(run(True, noise=0.5), run(False), cpu)  # repacked blocks round differently
    assert rounded.extra_bufts and rounded.usable and "proven" in rounded.reason and "0.5" in rounded.reason


def test_a_plain_path_that_fails_makes_llama_cpp_unusable():
    choice = kernels._decide(run(True), run(False, ok=False), _cpu.Cpu("x", frozenset(), 2))
    assert not choice.usable and "even without" in choice.reason


def test_the_environment_forces_the_choice_without_a_probe(monkeypatch, tmp_path):
    monkeypatch.setenv("LOCALJURY_LLAMACPP_EXTRA_BUFTS", "0")
    monkeypatch.setattr(kernels, "run_probe", lambda *a, **k: pytest.fail("no probe when forced"))
    choice = kernels.kernel_choice(tmp_path / "missing.gguf")
    assert not choice.extra_bufts and "LOCALJURY_LLAMACPP_EXTRA_BUFTS=0" in choice.reason


def test_the_verdict_is_probed_once_and_cached_per_cpu(monkeypatch, tmp_path):
    pytest.importorskip("llama_cpp", reason="the llamacpp extra")
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LOCALJURY_LLAMACPP_EXTRA_BUFTS", raising=False)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    calls = []

    def fake(path, extra_bufts, timeout=0):
        calls.append(extra_bufts)
        return run(extra_bufts, ok=not extra_bufts)

    monkeypatch.setattr(kernels, "run_probe", fake)
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", XEON)
    first = kernels.kernel_choice(gguf)
    assert not first.extra_bufts and calls == [False, True]
    assert kernels.kernel_choice(gguf) == first and len(calls) == 2  # cached
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", EPYC)  # another CPU: probed again
    kernels.kernel_choice(gguf)
    assert len(calls) == 4
    # A corrupt cache entry is probed again, never trusted.
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", XEON)
    kernels.cache_path(gguf, _cpu.detect()).write_text("{not json")
    kernels.kernel_choice(gguf)
    assert len(calls) == 6


def test_a_probe_that_segfaults_is_a_result_not_a_dead_process(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp", reason="the llamacpp extra")
    monkeypatch.setenv("LOCALJURY_LLAMACPP_PROBE_FAULT", "extra")
    probe = kernels.run_probe(tmp_path / "any.gguf", extra_bufts=True)
    assert not probe.ok and probe.failure == "killed by SIGSEGV"


def test_the_announcement_is_made_once(capsys):
    choice = kernels.KernelChoice(False, "a unique reason for this test", "cpu")
    kernels.announce(choice, "m")
    kernels.announce(choice, "m")
    assert capsys.readouterr().err.count("a unique reason for this test") == 1


# -- engine: auto --------------------------------------------------------------------------


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
