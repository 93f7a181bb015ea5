"""`localjury align`: build a judge profile from labeled records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from localjury.cli._common import QuietOpt, _interruptible, _progress, app, checked_path, out
from localjury.cli._settings import JURY_SETTINGS, takes_settings
from localjury.errors import ConfigError
from localjury.metrics.aligned import DEFAULT_SHOTS
from localjury.metrics.base import MAX_STRICTNESS
from localjury.run.config import MAX_SEED

if TYPE_CHECKING:
    from localjury.metrics import AspectCritic


AlignDataArg = Annotated[
    Path,
    typer.Argument(
        callback=checked_path,
        help="Labeled records: one a line with a gold field (0/1), or a bench format (see --format).",
    ),
]
AlignOutPathOpt = Annotated[
    Path, typer.Option("--out", "-o", callback=checked_path, help="The judge profile to write (YAML).")
]
AlignCriterionOpt = Annotated[
    str | None,
    typer.Option("--criterion", "-c", help="The criterion's wording, a yes/no statement about the response."),
]
AlignMetricOpt = Annotated[
    str | None,
    typer.Option(
        "--metric",
        help='The metric name results use (default: "aligned"); or, without --criterion, an aspect or '
        'NAME="criterion" (default: the format\'s own criterion).',
    ),
]
AlignFmtOpt = Annotated[
    str,
    typer.Option("--format", "-f", help="jsonl (a gold field), or a bench format (halueval-general, truthfulqa...)."),
]
AlignShotsOpt = Annotated[
    int, typer.Option("--shots", min=0, max=32, help="Labeled examples shown per prompt, balanced by label.")
]
AlignStrictnessOpt = Annotated[
    int, typer.Option("--strictness", "-k", min=1, max=MAX_STRICTNESS, help="Samples per model.")
]
AlignEvidenceOpt = Annotated[
    bool,
    typer.Option(
        "--evidence",
        help="Quote evidence first (as `run --evidence`): each model first judges the labels zero-shot, and each "
        "example quotes as its first sample that voted its gold label did (one no sample got right is not shown).",
    ),
]
AlignNoCalibrateOpt = Annotated[
    bool,
    typer.Option(
        "--no-calibrate",
        help="Fit no thresholds (no model loads, unless --evidence): the profile's judges are scored by votes.",
    ),
]
AlignFoldsOpt = Annotated[int, typer.Option("--folds", min=2, help="Folds that measure the fitted thresholds.")]
AlignLimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="Use at most N labeled records.")]
AlignSampleSeedOpt = Annotated[
    int, typer.Option("--sample-seed", min=0, max=MAX_SEED, help="Seed of the --limit sample.")
]


@app.command()
@takes_settings(JURY_SETTINGS)
def align(
    data: AlignDataArg,
    out_path: AlignOutPathOpt,
    criterion: AlignCriterionOpt = None,
    metric: AlignMetricOpt = None,
    fmt: AlignFmtOpt = "jsonl",
    shots: AlignShotsOpt = DEFAULT_SHOTS,
    strictness: AlignStrictnessOpt = 3,
    evidence: AlignEvidenceOpt = False,
    no_calibrate: AlignNoCalibrateOpt = False,
    folds: AlignFoldsOpt = 5,
    limit: AlignLimitOpt = None,
    sample_seed: AlignSampleSeedOpt = 0,
    quiet: QuietOpt = False,
    settings: dict[str, Any] | None = None,
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
    settings = settings or {}
    specs = _jury(settings)
    with _interruptible(), _progress(quiet) as progress:
        profile = build_profile(
            data, specs, out_path, judge=judge, fmt=fmt, shots=shots, calibrate=not no_calibrate, folds=folds,
            limit=limit, sample_seed=sample_seed, seed=settings["seed"], registry=settings["registry"],
            use_cache=settings["use_cache"], progress=progress,
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
