"""The engines' native code paths: CPU detection, and llama.cpp's kernel probe verdicts, each
branch reached by overriding the detection."""

import pytest

from localjury.engines.native import cpu as cpus
from localjury.engines.native import llamacpp_kernels as kernels

XEON = "fpu avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8"
EPYC = "fpu avx2 fma avx512f avx512bw avx512_vnni avx512_bf16"


def test_cpuinfo_gives_name_and_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: " + XEON + "\n")
    name, flags = cpus._read_cpuinfo(info)
    assert name == "Intel(R) Xeon(R) Platinum 8480+" and "amx_bf16" in flags


@pytest.mark.parametrize(("flags", "amx"), [(XEON, True), (EPYC, False), ("amx_tile", False), ("", False)])
def test_amx_needs_tiles_and_a_tile_dtype(monkeypatch, flags, amx):
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", flags)
    cpu = cpus.detect()
    assert cpu.amx is amx and cpu.overridden
    assert ("amx_bf16" in cpu.describe()) is ("amx_bf16" in flags)


@pytest.mark.parametrize(("omp", "expected"), [(None, 8), ("2", 2), ("64", 8), ("0", 8), ("four", 8)])
def test_omp_num_threads_caps_the_engines_threads(monkeypatch, omp, expected):
    """A replica of a sharded run sets OMP_NUM_THREADS to its share of the node's cores: llama.cpp
    then takes that many threads, never more than the process may run on."""
    monkeypatch.setattr(cpus, "_machine_cpu", lambda: cpus.Cpu(name="test", flags=frozenset(), threads=8))
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert cpus.compute_threads() == expected


def test_the_cpu_key_changes_with_the_feature_set(monkeypatch):
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", XEON)
    xeon = cpus.detect().key
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", EPYC)
    assert cpus.detect().key != xeon
    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", EPYC.replace(" ", ","))
    assert cpus.detect().key == cpus.Cpu("x", frozenset(EPYC.split()), 1).key


# -- llama.cpp's kernel verdicts ------------------------------------------------------------


REFERENCE = [3.0, -1.0, 7.5, 0.2, 12.0, -4.0]


def run(extra: bool, ok: bool = True, noise: float = 0.0, argmax: int = 7, failure: str | None = None):
    if not ok:
        return kernels.ProbeRun(extra, False, failure or "killed by SIGSEGV")
    row = [x + noise * (-1) ** i for i, x in enumerate(REFERENCE)]
    return kernels.ProbeRun(extra, True, None, [argmax] * 4, [row] * 4, 1.0)


def test_a_crash_with_the_repacked_kernels_turns_them_off():
    cpu = cpus.Cpu("Xeon", frozenset(XEON.split()), 2)
    choice = kernels._decide(run(True, ok=False), run(False), cpu)
    assert choice.usable and not choice.extra_bufts and "SIGSEGV" in choice.reason


def test_repacked_kernels_that_compute_other_logits_are_off():
    cpu = cpus.Cpu("x", frozenset(), 2)
    assert not kernels._decide(run(True, argmax=9), run(False), cpu).extra_bufts
    garbage = kernels._decide(run(True, noise=6.0), run(False), cpu)
    assert not garbage.extra_bufts and "correlation" in garbage.reason
    rounded = kernels._decide(run(True, noise=0.5), run(False), cpu)  # repacked blocks round differently
    assert rounded.extra_bufts and rounded.usable and "proven" in rounded.reason and "0.5" in rounded.reason


def test_a_plain_path_that_fails_makes_llama_cpp_unusable():
    choice = kernels._decide(run(True), run(False, ok=False), cpus.Cpu("x", frozenset(), 2))
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
    kernels.cache_path(gguf, cpus.detect()).write_text("{not json")
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
