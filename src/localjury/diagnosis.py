"""What this machine can run, and what each model will run on: the facts behind
``localjury doctor`` (CPU features, engines installed, the probes' results)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib.util import find_spec
from typing import Any

from localjury.engines._catalog import ENGINES, ready
from localjury.engines.native.cpu import detect as detect_cpu
from localjury.models.registry import Registry

#: What the report shows the version of: each engine's package, then these (module to find,
#: the distributions that may install it).
_PACKAGES = {
    **{name: (e.package, e.distributions) for name, e in ENGINES.items() if e.package is not None},
    "torch": ("torch", ("torch",)),
    "outlines": ("outlines", ("outlines",)),
}


#: The engine measurement's records: short, of the kind the judges see.
_PROBE_RECORDS = (
    ("When did the Berlin Wall fall?", "The Berlin Wall fell on 9 November 1989."),
    ("What is the capital of Kenya?", "Nairobi is the capital of Kenya."),
    ("Who painted The Starry Night?", "Vincent van Gogh painted The Starry Night."),
    ("Why do trees shed leaves?", "Trees shed their leaves to save water through the cold months."),
)


@dataclass
class ModelReport:
    """One model of the registry on this machine."""

    name: str
    ready: bool
    engine: str
    why: str
    options: list[dict[str, Any]] = field(default_factory=list)
    """Each engine as a candidate: usable, why not, measured judgments/s."""
    kernels: str | None = None
    """llama.cpp's kernel verdict for its GGUF (None: no GGUF here, or llama.cpp missing)."""


@dataclass
class Report:
    """Everything ``localjury doctor`` prints."""

    cpu: dict[str, Any]
    packages: dict[str, str | None]
    """Version of each engine package, None when it is not installed."""
    matmul_gflops: dict[str, float]
    """torch's matmul rate here, per dtype (the floor of the transformers engine)."""
    cuda: bool
    models: list[ModelReport]

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-able data."""
        return asdict(self)


def _version(module: str, dists: tuple[str, ...]) -> str | None:
    if find_spec(module) is None:
        return None
    for name in dists:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "installed"


def matmul_rate(dtype_name: str, size: int = 1024, seconds: float = 0.5) -> float:
    """torch's square-matmul rate in GFLOP/s for ``dtype_name`` on this process's threads."""
    import torch

    dtype = getattr(torch, dtype_name)
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    torch.matmul(a, b)  # warm-up: kernel selection, oneDNN's first call
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        torch.matmul(a, b)
        count += 1
    return 2 * size**3 * count / elapsed / 1e9


def diagnose(registry: Registry, *, measure: bool = False, probe: bool = True) -> Report:
    """Gather the report.

    Args:
        registry: The models to report on.
        measure: Time the engines of every ``auto`` model that more than one engine can load
            (a load and a dozen samples each; again where figures are cached); otherwise show
            the cached figures or the rule's choice. A model whose entry says
            ``trust_remote_code: true`` is never loaded here: only a run that names it runs its
            code (``--trust-remote-code``).
        probe: Run llama.cpp's kernel probe for GGUF files not probed here yet (seconds each).
    """
    from localjury.engines import explain_engine
    from localjury.engines._auto import choose

    cpu = detect_cpu()
    packages = {name: _version(*where) for name, where in _PACKAGES.items()}
    rates: dict[str, float] = {}
    cuda = False
    if packages["torch"] is not None:
        import torch

        cuda = bool(torch.cuda.is_available())
        rates = {name: round(matmul_rate(name), 1) for name in ("float32", "bfloat16")}
    models = []
    for spec in registry.models.values():
        engine, why = explain_engine(spec, measure=measure and not spec.trust_remote_code)
        opts = [] if spec.is_served or spec.engine != "auto" else [asdict(o) for o in choose(spec, run=False).options]
        kernels = None
        if not spec.is_served and find_spec("llama_cpp") is not None and spec.gguf_file().is_file():
            from localjury.engines.native.llamacpp_kernels import kernel_choice

            choice = kernel_choice(spec.gguf_file(), probe=probe)
            state = "repacked kernels on" if choice.extra_bufts else "repacked kernels off"
            kernels = f"{state}: {choice.reason}" if choice.usable else f"unsafe: {choice.reason}"
        models.append(ModelReport(spec.name, ready(spec), engine, why, opts, kernels))
    info = {
        "name": cpu.name,
        "threads": cpu.threads,
        "flags": cpu.notable,
        "amx": cpu.amx,
        "key": cpu.key,
        "overridden": cpu.overridden,
    }
    return Report(info, packages, rates, cuda, models)


def _time_engine(spec_json: str, engine_name: str) -> None:  # pragma: no cover - the subprocess
    """Load ``spec`` on ``engine_name``, judge one prompt (one-time costs), then time the
    probe's prompts with n samples each; print the rate as one JSON line
    (:func:`localjury.engines._auto.measure` runs this in a subprocess)."""
    from localjury.engines import load_engine
    from localjury.engines._auto import PROBE_N, PROBE_PROMPTS
    from localjury.engines.base import GenerateCall
    from localjury.metrics.aspect_critic import AspectCritic
    from localjury.models.registry import ModelSpec
    from localjury.records.record import Record
    from localjury.types import Sampling

    spec = ModelSpec.model_validate_json(spec_json)
    metric = AspectCritic("mentions_date", "The response must include a specific date or year.", strictness=PROBE_N)
    engine = load_engine(spec, engine_name)
    prompts = [
        engine.format_prompt(metric.messages(Record(id=f"probe-{i}", user_input=q, response=a)))
        for i, (q, a) in enumerate(_PROBE_RECORDS[:PROBE_PROMPTS])
    ]
    schema = metric.json_schema()
    sampling = Sampling(temperature=max(spec.temperature, 0.1), top_p=spec.top_p, max_tokens=spec.max_tokens, seed=0)
    engine.generate(GenerateCall(prompts[:1], 1, sampling, schema))  # one-time costs (index, caches)
    start = time.perf_counter()
    engine.generate(GenerateCall(prompts, PROBE_N, sampling, schema))
    seconds = time.perf_counter() - start
    print(json.dumps({"judgments_per_s": len(prompts) * PROBE_N / seconds, "seconds": seconds}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":  # pragma: no cover
    _time_engine(sys.argv[1], sys.argv[2])
