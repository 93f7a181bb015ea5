"""`localjury align`: build a judge profile from labeled records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from localjury.bench.config import AlignConfig
from localjury.cli._common import QuietOpt, _interruptible, _progress, app, checked_path, out
from localjury.cli._settings import JURY_SETTINGS, own_settings, takes_settings
from localjury.errors import ConfigError
from localjury.metrics.base import MAX_STRICTNESS

if TYPE_CHECKING:
    from localjury.metrics import AspectCritic
    from localjury.metrics.rubric import Rubric


AlignDataArg = Annotated[
    Path,
    typer.Argument(
        callback=checked_path,
        help="Labeled records: one a line with a gold field (0/1), or pairs (response_a, response_b, gold 1 where "
        "A is the better), or a bench format (see --format).",
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
AlignRubricOpt = Annotated[
    str | None,
    typer.Option(
        "--rubric",
        help="Align a rubric to records scored on its scale (a score field, 1..N): a predefined rubric "
        "(helpfulness_rubric...) or one of --rubrics FILE's. Builds a graded profile (graded heads).",
    ),
]
AlignRubricsOpt = Annotated[
    Path | None, typer.Option("--rubrics", callback=checked_path, help="The rubric file (YAML) --rubric names one of.")
]


@app.command()
@takes_settings(JURY_SETTINGS)
@takes_settings(own_settings(AlignConfig), AlignConfig, into="align_settings")
def align(
    data: AlignDataArg,
    out_path: AlignOutPathOpt,
    criterion: AlignCriterionOpt = None,
    metric: AlignMetricOpt = None,
    fmt: AlignFmtOpt = "jsonl",
    strictness: AlignStrictnessOpt = 3,
    evidence: AlignEvidenceOpt = False,
    rubric: AlignRubricOpt = None,
    rubrics: AlignRubricsOpt = None,
    quiet: QuietOpt = False,
    settings: dict[str, Any] | None = None,
    align_settings: dict[str, Any] | None = None,
) -> None:
    """Build a judge profile from labeled records: each record judged with `run --profile` is shown
    its nearest labeled records (TF-IDF cosine, balanced by label) with their gold verdicts.

    Unless --no-calibrate, each model judges the labels (none shown itself or its pair) to fit a threshold.
    With --evidence, the profile quotes its evidence first, and so do its examples (bootstrapped: see --evidence).
    Unless --no-heads (and given 40 labels, 10 of each), each model also judges them zero-shot and a decision head
    is fitted on its hidden states per layer; a head that beats prompting by cross-validated kappa decides for it.
    With two models or more (and the calibration run), a stacked jury (a logistic regression on the models'
    probabilities) is compared with the jury's mean; where it wins, a run reports it beside each score.

    Labeled pairs (response_a, response_b, gold 1 where A is the better; see --mode) build a pairwise profile:
    each model judges the pairs in both orders, and a preference head (a local reward model) fitted on each
    response's hidden states decides its pairs where it beats that by cross-validated kappa (needs 20 pairs).

    With --rubric, records scored on the rubric's scale (score 1..N) build a graded profile: each model grades
    them as the rubric does, and a graded head (a ridge regression on the rubric prompt's hidden states) scores
    its records where it beats that by cross-validated Spearman's rho (needs 40 scored records).
    """
    from localjury.bench import require

    require()
    from localjury.bench.align import build_profile
    from localjury.cli.bench import _jury, print_calibration

    judge = _criterion(criterion, metric, fmt, strictness, evidence) if rubric is None else \
        _rubric(rubric, rubrics, strictness, given=criterion is not None or metric is not None or evidence)  # fmt: skip
    settings = settings or {}
    specs = _jury(settings)
    config = AlignConfig.of(
        **(align_settings or {}),
        seed=settings["seed"],
        registry=settings["registry"],
        use_cache=settings["use_cache"],
        thinking=settings["thinking"],
    )
    with _interruptible(), _progress(quiet) as progress:
        profile = build_profile(data, specs, out_path, config, judge=judge, fmt=fmt, progress=progress)
    if profile.calibrators:
        print_calibration(profile.calibrators, out)
    by = "spearman" if profile.rubric is not None else "kappa"
    for decision in profile.decisions:
        ways = ", ".join(
            f"{w.way} {getattr(w, by):.2f}" + (f" ({w.accuracy:.0%} of pairs right)" if w.accuracy is not None else "")
            for w in decision.ways[:4]
            if getattr(w, by) is not None
        )
        out.print(
            f"{decision.model}: decides by {decision.winner} ({decision.why})" + (f"\n  {by}: {ways}" if ways else "")
        )
        if decision.artifact:
            out.print(f"  warning: {decision.artifact}", markup=False, highlight=False)
    if profile.jury is not None:
        jury = profile.jury
        kappas = ", ".join(f"{w.way} {w.kappa:.2f}" for w in jury.ways if w.kappa is not None)
        out.print(f"jury: {jury.winner} ({jury.why})" + (f"\n  kappa: {kappas}" if kappas else ""), markup=False)
    if profile.pairwise or profile.rubric is not None:
        heads = ", ".join(h.binding.model for h in profile.heads) or "none"
        out.print(f"{'graded' if profile.rubric else 'preference'} heads: {heads}\nprofile: {out_path}")
        return
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


def _rubric(name: str, path: Path | None, strictness: int, *, given: bool) -> Rubric:
    """The rubric to align: ``name`` among ``path``'s rubrics, else a predefined rubric; ``given``:
    --criterion, --metric or --evidence given too, which a rubric does not take (its name is its metric's)."""
    from localjury.metrics.rubric import Rubric, predefined_rubric
    from localjury.metrics.rubric_file import rubric_file_metrics

    if given:
        raise ConfigError("--rubric aligns a rubric, named by it: --criterion, --metric and --evidence are a yes/no "
                          "criterion's")  # fmt: skip
    if path is None:
        return predefined_rubric(name, strictness=strictness)
    found = next((m for m in rubric_file_metrics(path) if m.name == name), None)
    if not isinstance(found, Rubric):
        raise ConfigError(f"rubric file {path} has no rubric named {name!r}")
    found.strictness = strictness
    return found
