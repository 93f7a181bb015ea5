"""`localjury doctor`: the machine, the engines, and what each model will run on."""

from __future__ import annotations

from typing import Annotated

import typer

from localjury.cli._common import app, out
from localjury.cli._settings import RegistryOpt


@app.command()
def doctor(
    measure: Annotated[
        bool,
        typer.Option(
            "--measure",
            help="Time the engines of each `engine: auto` model that more than one engine can load here, again if "
            "they were timed before (a load and a dozen samples per engine; cached for runs). Best on an idle machine.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    registry: RegistryOpt = None,
) -> None:
    """Show this machine's CPU features and torch's matmul rates, the engines installed,
    llama.cpp's kernel probe for each GGUF here, and the engine each model will run on, and why."""
    from localjury.diagnosis import diagnose
    from localjury.models.registry import load_registry

    report = diagnose(load_registry(registry), measure=measure)
    if as_json:
        out.print_json(data=report.to_dict())
        return
    cpu = report.cpu
    flags = " ".join(cpu["flags"]) or "none of note"
    out.print(f"CPU: {cpu['name']}, {cpu['threads']} threads" + (" (LOCALJURY_CPU_FLAGS)" if cpu["overridden"] else ""))
    out.print(f"  features: {flags}")
    out.print(f"  AMX: {'yes' if cpu['amx'] else 'no'}")
    if report.matmul_gflops:
        rates = ", ".join(f"{k} {v:,.0f}" for k, v in report.matmul_gflops.items())
        out.print(f"  torch matmul (GFLOP/s): {rates}")
    out.print(f"  CUDA: {'yes' if report.cuda else 'no'}")
    out.print("engines:")
    for name, version in report.packages.items():
        out.print(f"  {name}: {version or 'not installed'}")
    out.print("models:")
    for m in report.models:
        out.print(f"  {m.name}: {m.engine} ({m.why})" + ("" if m.ready else " [not pulled]"))
        for o in m.options:
            if o["judgments_per_s"] is not None:
                state = f"{o['judgments_per_s']:.2f} judgments/s"
            elif o["failure"]:
                state = f"failed: {o['failure']}"
            else:
                state = "can load it" if o["usable"] else o["why_not"]
            out.print(f"    {o['engine']}: {state}")
        if m.kernels:
            out.print(f"    llama.cpp: {m.kernels}")
