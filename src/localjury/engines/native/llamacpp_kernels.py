"""Which llama.cpp kernels this machine runs safely, proven in a subprocess before use.

llama.cpp can repack a GGUF's quantized weights into "extra buffer types" for the CPU it
finds (AMX tiles on Intel Xeons, interleaved blocks for AVX2/AVX-512/NEON). Those kernels
are fast where they work and fatal where they do not: on Sapphire-Rapids-class Xeons the
AMX repack of Q4_K/Q6_K weights faults in the first matmul (llama.cpp issue 20824, closed
without a fix), killing the process with SIGSEGV. A Python ``try`` cannot catch that.

So no engine runs a kernel family that has not been proven here: before the first load of a
GGUF on a machine, :func:`kernel_choice` loads it in two subprocesses, with and without the
extra buffers, prefills a few tokens and decodes batched and single steps in each. The
extra buffers are used only when that subprocess lived and its logits agree with the plain
path's; otherwise the engine runs without them and says why, once. The verdict is cached in
``$LOCALJURY_HOME/probes`` under the CPU's feature set, the llama.cpp build and the file,
so it is paid once per machine, build and model (a few seconds).

``LOCALJURY_LLAMACPP_EXTRA_BUFTS=0|1`` forces the choice without a probe (an explicit,
trusted setting); ``LOCALJURY_LLAMACPP_PROBE_FAULT=extra`` makes the probe with the extra
buffers die of SIGSEGV, as it does on an AMX Xeon, so the fallback is testable anywhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from localjury.engines.native.cpu import Cpu
from localjury.engines.native.cpu import detect as detect_cpu

#: Prompt of the probe: a few dozen tokens in any vocabulary.
_PROBE_TEXT = b"Judge whether the response states a specific year. Response: The bridge opened in 1937."
#: Logit rows compared between the two paths: every one of these token ids that the vocabulary has.
_SAMPLED_IDS = range(0, 1 << 18, 499)
#: Least correlation, at every probed position, between the logits of the two paths that still
#: counts as the same arithmetic: repacked blocks round differently (max differences of 0.4-0.7
#: on logits spanning tens, correlation above 0.999, measured on the embedded GGUFs), a broken
#: kernel computes something else.
MIN_CORRELATION = 0.99
#: Seconds one probe subprocess may take (loading a 1.5B GGUF and a few decodes take ~5).
PROBE_TIMEOUT = 300
_announced: set[str] = set()


@dataclass(frozen=True)
class ProbeRun:
    """One probe subprocess: how it ended and what it computed."""

    extra_bufts: bool
    ok: bool
    """Whether the subprocess exited 0 and printed its result."""
    failure: str | None = None
    """How it ended otherwise: the signal that killed it, or its exit code and last stderr line."""
    argmax: list[int] | None = None
    """Argmax of the logits at each probed position (prefill, batched step, single step)."""
    sampled: list[list[float]] | None = None
    """The logits at :data:`_SAMPLED_IDS` at each probed position."""
    seconds: float | None = None


@dataclass(frozen=True)
class KernelChoice:
    """Whether the llamacpp engine uses llama.cpp's extra buffer types for one GGUF here."""

    extra_bufts: bool
    reason: str
    """Why, in a line: the probe's outcome, or the setting that forced it."""
    cpu: str
    """The CPU it was decided for (:meth:`localjury.engines.native.cpu.Cpu.describe`)."""
    probed: bool = False
    """Whether a probe decided it (not an environment setting)."""
    usable: bool = True
    """False when llama.cpp failed the probe even without the extra buffers: loading it in this
    process could kill it, so the engine refuses with :attr:`reason` instead."""

    def apply(self, params: Any) -> Any:
        """Set ``use_extra_bufts`` on llama.cpp's model params (``llama_model_params``)."""
        params.use_extra_bufts = self.extra_bufts
        return params


def _library_key() -> str:
    """The llama.cpp build: llama-cpp-python's version and its shared library's size and time
    (a wheel rebuilt for another CPU is another build)."""
    import importlib.metadata
    from importlib.util import find_spec

    spec = find_spec("llama_cpp")
    parts = [importlib.metadata.version("llama-cpp-python")]
    if spec is not None and spec.origin is not None:
        lib = Path(spec.origin).parent / "lib"
        for path in sorted(lib.glob("*.so*")) + sorted(lib.glob("*.dylib")) + sorted(lib.glob("*.dll")):
            stat = path.stat()
            parts.append(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)


def _file_key(gguf: Path) -> str:
    stat = gguf.stat()
    return f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"


def cache_path(gguf: Path, cpu: Cpu) -> Path:
    """Where the verdict for ``gguf`` on this CPU and llama.cpp build is kept."""
    from localjury._files import localjury_home

    digest = hashlib.sha256(f"{cpu.key}|{_library_key()}|{_file_key(gguf)}".encode()).hexdigest()[:16]
    return localjury_home() / "probes" / f"llamacpp-kernels-{digest}.json"


def _forced(cpu: Cpu) -> KernelChoice | None:
    value = os.environ.get("LOCALJURY_LLAMACPP_EXTRA_BUFTS")
    if value is None or value == "":
        return None
    on = value.strip().lower() in ("1", "true", "yes", "on")
    return KernelChoice(on, f"set by LOCALJURY_LLAMACPP_EXTRA_BUFTS={value}", cpu.describe())


def run_probe(gguf: Path, extra_bufts: bool, timeout: float = PROBE_TIMEOUT) -> ProbeRun:
    """Load ``gguf`` in a subprocess with or without the extra buffers and decode a few tokens;
    a crash there is a result, not the end of this process."""
    cmd = [sys.executable, "-m", "localjury.engines.native.llamacpp_kernels", str(gguf), "1" if extra_bufts else "0"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ProbeRun(extra_bufts, False, f"did not finish in {timeout:.0f} s")
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        return ProbeRun(extra_bufts, False, f"killed by {name}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return ProbeRun(extra_bufts, False, f"exit {proc.returncode}: {tail}")
    data = json.loads(lines[-1])
    return ProbeRun(extra_bufts, True, None, data["argmax"], data["sampled"], data["seconds"])


def _decide(with_extra: ProbeRun, plain: ProbeRun, cpu: Cpu) -> KernelChoice:
    """The verdict from the two probe runs (pure, so every branch is testable)."""
    if not plain.ok:
        return KernelChoice(
            False,
            f"llama.cpp failed a probe on this machine even without its repacked kernels ({plain.failure})",
            cpu.describe(),
            True,
            usable=False,
        )
    if not with_extra.ok:
        return KernelChoice(
            False, f"llama.cpp's repacked kernels failed a probe ({with_extra.failure})", cpu.describe(), True
        )
    assert with_extra.sampled is not None and plain.sampled is not None
    pairs = list(zip(with_extra.sampled, plain.sampled, strict=True))
    diff = max((abs(a - b) for x, y in pairs for a, b in zip(x, y, strict=True)), default=0.0)
    corr = min((_correlation(x, y) for x, y in pairs), default=1.0)
    if with_extra.argmax != plain.argmax or corr < MIN_CORRELATION:
        return KernelChoice(
            False,
            f"llama.cpp's repacked kernels computed other logits than the plain path (correlation {corr:.4f}, "
            f"max difference {diff:.3g})",
            cpu.describe(),
            True,
        )
    return KernelChoice(
        True, f"repacked kernels proven by a probe (max logit difference {diff:.3g})", cpu.describe(), True
    )


def _correlation(x: list[float], y: list[float]) -> float:
    """Pearson correlation of two logit rows (1.0 for two constant rows that are equal)."""
    n = len(x)
    if n == 0:
        return 1.0
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return 1.0 if x == y else 0.0
    return sxy / (sxx * syy) ** 0.5


def kernel_choice(gguf: Path, *, probe: bool = True) -> KernelChoice:
    """Whether to use llama.cpp's extra buffer types for ``gguf`` on this machine: forced by
    ``LOCALJURY_LLAMACPP_EXTRA_BUFTS``, else the cached verdict, else (``probe``) a new probe,
    cached; without a probe and a cached verdict, off (nothing unproven runs)."""
    cpu = detect_cpu()
    if forced := _forced(cpu):
        return forced
    path = cache_path(gguf, cpu)
    try:
        cached = json.loads(path.read_text())
        return KernelChoice(**cached["choice"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent or unreadable: probe again
    if not probe:
        return KernelChoice(False, "not probed on this machine yet", cpu.describe())
    plain = run_probe(gguf, extra_bufts=False)
    with_extra = run_probe(gguf, extra_bufts=True)
    choice = _decide(with_extra, plain, cpu)
    if not choice.usable or any(r.failure and r.failure.startswith("did not finish") for r in (plain, with_extra)):
        return choice  # a busy machine or a broken install may pass later: probe again next time
    record = {"choice": asdict(choice), "runs": [asdict(plain), asdict(with_extra)], "gguf": str(gguf)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, indent=2))
        tmp.replace(path)
    except OSError:
        pass  # a read-only home: probe again next time
    return choice


@contextmanager
def plain_llama(choice: KernelChoice) -> Iterator[None]:
    """Make ``llama_cpp.Llama`` objects built inside the block use ``choice``: llama-cpp-python's
    high-level class has no argument for the extra buffers and builds its params from
    ``llama_model_default_params`` (0.3.36), which this wraps for the block."""
    from llama_cpp import llama_cpp as bindings

    original = bindings.llama_model_default_params

    def params() -> Any:
        return choice.apply(original())

    bindings.llama_model_default_params = params
    try:
        yield
    finally:
        bindings.llama_model_default_params = original


def announce(choice: KernelChoice, model: str) -> None:
    """Say once per process, on stderr, when the engine runs without the repacked kernels."""
    if choice.extra_bufts or choice.reason in _announced:
        return
    _announced.add(choice.reason)
    print(
        f"localjury: llamacpp engine ({model}): without llama.cpp's repacked kernels: {choice.reason}", file=sys.stderr
    )


@cache
def _sampled(n_vocab: int) -> list[int]:
    return [i for i in _SAMPLED_IDS if i < n_vocab]


def _probe_main(gguf: str, extra: bool) -> None:  # pragma: no cover - runs in the subprocess
    """Load ``gguf`` with or without the extra buffers, prefill, decode a batched and a single
    step; print the argmax and sampled logits of each as one JSON line."""
    import ctypes
    import time

    import llama_cpp
    import numpy as np
    from llama_cpp import _internals

    start = time.perf_counter()
    if extra and os.environ.get("LOCALJURY_LLAMACPP_PROBE_FAULT") == "extra":
        os.kill(os.getpid(), signal.SIGSEGV)
    quiet = llama_cpp.llama_log_callback(lambda *_: None)  # kept referenced: llama.cpp calls it later
    llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = 0
    params.use_extra_bufts = extra
    model = _internals.LlamaModel(path_model=gguf, params=params, verbose=False)
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = 2 * 256
    cparams.n_batch = cparams.n_ubatch = 256
    cparams.n_seq_max = 2
    cparams.kv_unified = False
    cparams.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = _internals.LlamaContext(model=model, params=cparams, verbose=False)
    memory = llama_cpp.llama_get_memory(ctx.ctx)
    batch = _internals.LlamaBatch(n_tokens=256, embd=0, n_seq_max=1, verbose=False)
    n_vocab = model.n_vocab()
    ids = _sampled(n_vocab)
    tokens = model.tokenize(_PROBE_TEXT, add_bos=True, special=False)
    argmax: list[int] = []
    sampled: list[list[float]] = []

    def decode(items: list[tuple[int, int, int]]) -> None:
        b = batch.batch
        batch.reset()
        for k, (token, pos, seq) in enumerate(items):
            b.token[k], b.pos[k], b.seq_id[k][0], b.n_seq_id[k], b.logits[k] = token, pos, seq, 1, True
        b.n_tokens = len(items)
        if llama_cpp.llama_decode(ctx.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")
        for k in range(len(items)):
            ptr = ctypes.cast(llama_cpp.llama_get_logits_ith(ctx.ctx, k), ctypes.POINTER(ctypes.c_float))
            row = np.ctypeslib.as_array(ptr, shape=(n_vocab,))
            argmax.append(int(row.argmax()))
            sampled.append([round(float(row[i]), 4) for i in ids])

    decode([(t, p, 0) for p, t in enumerate(tokens)])  # prefill: the matrix-matrix kernels
    next_token = argmax[-1]
    llama_cpp.llama_memory_seq_cp(memory, 0, 1, -1, -1)
    n = len(tokens)
    decode([(next_token, n, 0), (next_token, n, 1)])  # a batched step over two sequences
    decode([(argmax[-1], n + 1, 1)])  # a single token: the matrix-vector kernels
    # Only the last positions are compared (the prefill's earlier rows say little more).
    print(json.dumps({"argmax": argmax[-4:], "sampled": sampled[-4:], "seconds": time.perf_counter() - start}))
    sys.stdout.flush()
    os._exit(0)  # skip llama.cpp's teardown: the verdict is out


if __name__ == "__main__":  # pragma: no cover - the probe subprocess
    _probe_main(sys.argv[1], sys.argv[2] == "1")
