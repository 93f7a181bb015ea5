"""`localjury align`: build a judge profile from labeled records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from localjury.cli._common import MAX_SEED, RegistryOpt, TrustOpt, _interruptible, _progress, app, checked_path, out
from localjury.errors import ConfigError
from localjury.metrics.aligned import DEFAULT_SHOTS
from localjury.metrics.base import MAX_STRICTNESS

if TYPE_CHECKING:
    from localjury.metrics import AspectCritic


@app.command()
def align(
    data: Annotated[
        Path,
        typer.Argument(
            callback=checked_path,
            help="Labeled records: one a line with a gold field (0/1), or a bench format (see --format).",
        ),
    ],
    out_path: Annotated[
        Path, typer.Option("--out", "-o", callback=checked_path, help="The judge profile to write (YAML).")
    ],
    criterion: Annotated[
        str | None,
        typer.Option("--criterion", "-c", help="The criterion's wording, a yes/no statement about the response."),
    ] = None,
    metric: Annotated[
        str | None,
        typer.Option(
            "--metric",
            help='The metric name results use (default: "aligned"); or, without --criterion, an aspect or '
            'NAME="criterion" (default: the format\'s own criterion).',
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", "-f", help="jsonl (a gold field), or a bench format (halueval-general, truthfulqa...)."
        ),
    ] = "jsonl",
    models: Annotated[
        str | None,
        typer.Option("--models", "-m", help="Comma-separated judge models (default: qwen2.5-coder-1.5b-instruct)."),
    ] = None,
    shots: Annotated[
        int, typer.Option("--shots", min=0, max=32, help="Labeled examples shown per prompt, balanced by label.")
    ] = DEFAULT_SHOTS,
    strictness: Annotated[
        int, typer.Option("--strictness", "-k", min=1, max=MAX_STRICTNESS, help="Samples per model.")
    ] = 3,
    evidence: Annotated[
        bool,
        typer.Option(
            "--evidence",
            help="Quote evidence first (as `run --evidence`): each model first judges the labels zero-shot, and each "
            "example quotes as its first sample that voted its gold label did (one no sample got right is not shown).",
        ),
    ] = False,
    no_calibrate: Annotated[
        bool,
        typer.Option(
            "--no-calibrate",
            help="Fit no thresholds (no model loads, unless --evidence): the profile's judges are scored by votes.",
        ),
    ] = False,
    folds: Annotated[int, typer.Option("--folds", min=2, help="Folds that measure the fitted thresholds.")] = 5,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Use at most N labeled records.")] = None,
    sample_seed: Annotated[
        int, typer.Option("--sample-seed", min=0, max=MAX_SEED, help="Seed of the --limit sample.")
    ] = 0,
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help="Judging seed (0 to 2**32-1).")] = 0,
    registry: RegistryOpt = None,
    trust_remote_code: TrustOpt = [],  # noqa: B006
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not reuse stored judgments.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Build a judge profile from labeled records: each record judged with `run --profile` is shown
    its nearest labeled records (TF-IDF cosine, balanced by label) with their gold verdicts.

    Unless --no-calibrate, each model judges the labels (none shown itself or its pair) to fit a threshold.
    With --evidence, the profile quotes its evidence first, and so do its examples (bootstrapped: see --evidence).
    """
    from localjury.bench import require

    require()
    from localjury.bench.align import build_profile
    from localjury.cli.bench import _jury, print_calibration

    judge = _criterion(criterion, metric, fmt, strictness, evidence)
    specs = _jury(models, registry, trust_remote_code)
    with _interruptible(), _progress(quiet) as progress:
        profile = build_profile(
            data, specs, out_path, judge=judge, fmt=fmt, shots=shots, calibrate=not no_calibrate, folds=folds,
            limit=limit, sample_seed=sample_seed, seed=seed, registry=registry, use_cache=not no_cache,
            progress=progress,
        )  # fmt: skip
    if profile.calibrators:
        print_calibration(profile.calibrators, out)
    labels = {g: sum(e.gold == g for e in profile.examples) for g in (1, 0)}
    out.print(
        f"{len(profile.examples)} labeled examples ({labels[1]} pass, {labels[0]} fail), {profile.shots} a prompt"
        f"\nprofile: {out_path}"
    )


def _criterion(criterion: str | None, metric: str | None, fmt: str, strictness: int, evidence: bool) -> AspectCritic:
    """The criterion to align: ``--criterion``'s wording under ``--metric``'s name, else
    ``--metric`` as bench reads it, else the format's own; ``evidence``: quoting first."""
    from localjury.bench._judge import resolve_metric
    from localjury.metrics import AspectCritic

    if criterion is not None:
        if not criterion.strip():
            raise ConfigError("--criterion needs a non-empty wording")
        return AspectCritic(metric or "aligned", criterion, strictness=strictness, evidence=evidence)
    judge = resolve_metric(metric, fmt, strictness, evidence=evidence)
    if type(judge) is not AspectCritic:
        raise ConfigError(f"--metric {metric!r} is no yes/no criterion; give --criterion TEXT or an aspect")
    return judge
