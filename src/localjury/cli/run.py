"""`localjury run`: judge records (`localjury verify`, which checks a run's files, is in :mod:`.verify`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from localjury.cli._common import (
    QuietOpt,
    _interruptible,
    _progress,
    app,
    checked_path,
    err,
    out,
)
from localjury.cli._settings import AddressOpt, ClusterOpt, ReplicaCpusOpt, ReplicasOpt, cluster_of, takes_settings
from localjury.errors import ConfigError
from localjury.metrics.kinds import named_help
from localjury.run.config import GROUPS

if TYPE_CHECKING:
    from localjury.results.gate import Gate
    from localjury.run.prepare import Settled
    from localjury.run.result import RunResult


DataArg = Annotated[
    Path,
    typer.Argument(
        callback=checked_path,
        help="Records to judge: .jsonl, .json, .csv or .parquet, an inspect_ai eval log (.eval or .json; "
        "a record per sample; needs the inspect extra), or a Hugging Face datasets folder "
        "(save_to_disk; needs the datasets extra).",
    ),
]
AspectOpt = Annotated[
    list[str], typer.Option("--aspect", "-a", help="A predefined aspect (repeatable); see `localjury aspects`.")
]
CriterionOpt = Annotated[
    list[str], typer.Option("--criterion", "-c", help='Your own criterion, NAME="TEXT" (repeatable).')
]
CriteriaOpt = Annotated[
    Path | None,
    typer.Option(
        "--criteria",
        callback=checked_path,
        help="YAML file of criteria: name: text, or a list of {name, definition, strictness, tie_break}.",
    ),
]
RubricsOpt = Annotated[
    Path | None,
    typer.Option(
        "--rubrics",
        callback=checked_path,
        help="YAML file of named, versioned criteria and rubrics (graded 1-N, a description per level); "
        "an edited or new version of an entry is judged again.",
    ),
]
PairwiseOpt = Annotated[
    list[str],
    typer.Option(
        "--pairwise",
        help='A pairwise criterion, NAME="TEXT" (repeatable): which of response_a and response_b better '
        "meets it, asked in both orders.",
    ),
]
MetricOpt = Annotated[
    list[str],
    typer.Option(
        "--metric",
        help=named_help(),
    ),
]
MetricModuleOpt = Annotated[
    Path | None,
    typer.Option(
        "--metric-module",
        callback=checked_path,
        help="A Python file whose METRICS table names metrics for --metric, each made by a function of no "
        "argument (a metric of a kind of its own names its judging class); see examples/unsure_kind.py.",
    ),
]
VerdictFirstOpt = Annotated[
    bool, typer.Option("--verdict-first", help="Ask --aspect and --criterion judges for the verdict before the reason.")
]
EvidenceOpt = Annotated[
    bool,
    typer.Option(
        "--evidence",
        help="Ask --aspect and --criterion judges for quoted evidence first (up to three quotes, each an exact "
        "span of the response by construction: transformers, llamacpp, vllm with the guidance backend), and "
        "faithfulness and factual_accuracy for quotes of the context on each statement.",
    ),
]
ReadThinkingOpt = Annotated[
    bool,
    typer.Option(
        "--read-thinking",
        help="Let --aspect and --criterion judges read each response's <think> block (a reasoning model's "
        "thinking) with its answer; by default they judge the answer alone.",
    ),
]
ProfileOpt = Annotated[
    Path | None,
    typer.Option(
        "--profile",
        callback=checked_path,
        help="A judge profile from `localjury align`: its criterion is judged too, each record shown its "
        "nearest labeled examples with their gold verdicts, scored by the profile's fitted thresholds; its "
        "models judge when --models is not given.",
    ),
]
OutOpt = Annotated[
    Path,
    typer.Option("--out", "-o", callback=checked_path, help="Results file (JSONL, one line per record and criterion)."),
]
SummaryOpt = Annotated[
    Path | None,
    typer.Option("--summary", callback=checked_path, help="Summary JSON (default: <out stem>.summary.json)."),
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Plan the run without running it or loading a model: per model the records, prompts, samples and "
        "prompt tokens to generate and the samples already in the judgment store; with --estimate N, also the "
        "time estimated from N prompts generated per model. Writes no results.",
    ),
]
EstimateOpt = Annotated[
    int | None,
    typer.Option(
        "--estimate",
        min=0,
        help="With --dry-run: load each model with work left, generate and time N of its prompts, and estimate "
        "the run's time (default 0: load no model, no estimate; 4 is a good start). What they generate is kept "
        "in the judgment store for the run.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="With --dry-run: print the plan as JSON.")]
FailUnderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-under",
        metavar="METRIC=RATE",
        help="A CI gate (repeatable): after writing every output, exit 3 when METRIC's pass rate (as in the "
        "summary) is under RATE (0.9 or 90%), listing the records that failed; a metric with no scored record "
        "fails its bar.",
    ),
]
#: The run settings `run` takes as options: every field of the config's groups, derived from
#: the field (:mod:`localjury.cli._settings`), so that a new setting is one field there.
RUN_SETTINGS = tuple(name for group in GROUPS.values() for name in group.model_fields)


@app.command()
@takes_settings(RUN_SETTINGS)
def run(
    data: DataArg,
    aspect: AspectOpt = [],  # noqa: B006
    criterion: CriterionOpt = [],  # noqa: B006
    criteria: CriteriaOpt = None,
    rubrics: RubricsOpt = None,
    pairwise: PairwiseOpt = [],  # noqa: B006
    metric: MetricOpt = [],  # noqa: B006
    metric_module: MetricModuleOpt = None,
    verdict_first: VerdictFirstOpt = False,
    evidence: EvidenceOpt = False,
    read_thinking: ReadThinkingOpt = False,
    profile: ProfileOpt = None,
    out_path: OutOpt = Path("results.jsonl"),
    summary: SummaryOpt = None,
    cluster: ClusterOpt = None,
    address: AddressOpt = None,
    replicas: ReplicasOpt = None,
    replica_cpus: ReplicaCpusOpt = None,
    quiet: QuietOpt = False,
    dry_run: DryRunOpt = False,
    estimate: EstimateOpt = None,
    as_json: JsonOpt = False,
    fail_under: FailUnderOpt = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Judge DATA on each criterion and metric with each model, vote, and write results and a summary
    (with --dry-run: plan the run instead, without loading a model)."""
    from localjury.run import RunConfig
    from localjury.run.pipeline import Run
    from localjury.run.prepare import jury_of, settle

    settings = dict(settings or {})
    ray_cluster = cluster_of(cluster, address=address, replicas=replicas, cpus_per_replica=replica_cpus)
    config = RunConfig.of(**settings, cluster=ray_cluster)
    # The jury first (an unknown model fails before the criteria are read), unless a judge
    # profile names it.
    specs = jury_of(config) if profile is None or config.jury.models is not None else None
    from localjury.metrics.spec import metrics_of_options

    metrics = metrics_of_options(aspect, criterion, criteria, metric, pairwise, verdict_first=verdict_first,
                                 evidence=evidence, thinking=read_thinking,
                                 modules=[metric_module] if metric_module else [])  # fmt: skip
    files = (("criteria file", criteria), ("calibration file", settings["calibration"]),
             ("metric module", metric_module))  # fmt: skip
    inputs: dict[str, str | Path] = {k: v for k, v in files if v is not None}
    gates = _gates(fail_under or [])
    settled = settle(metrics, config=config, inputs=inputs, profile=profile, rubrics=rubrics, specs=specs)
    if gates:
        from localjury.results.gate import check_names

        check_names(gates, [m.name for m in settled.metrics])
    if dry_run:
        _dry_run(data, settled, estimate, as_json, quiet)
        return
    given = [flag for flag, v in (("--estimate", estimate is not None), ("--json", as_json)) if v]
    if given:
        raise ConfigError(f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} only with --dry-run")
    with _interruptible(), _progress(quiet) as progress:
        result = Run(data, settled, out=out_path, summary=summary, command=["localjury", *sys.argv[1:]],
                     progress=progress).evaluate()  # fmt: skip
    from localjury.results.summary import summary_path_for
    from localjury.results.tables import print_summary

    print_summary(result.summary, out)
    errors = result.summary.record_errors
    if errors:
        err.print(f"{errors} bad record(s): see the 'error' field in {out_path}", style="yellow")
    out.print(f"results: {out_path}\nsummary: {summary or summary_path_for(out_path)}")
    if gates:
        _gate(gates, result)


def _gates(bars: list[str]) -> list[Gate]:
    """The ``--fail-under`` bars, parsed before anything runs (the gate's module is imported only
    for a run that has some)."""
    if not bars:
        return []
    from localjury.results.gate import Gate

    return [Gate.parse(text) for text in bars]


def _gate(gates: list[Gate], result: RunResult) -> None:
    """Check the run's pass rates against its ``--fail-under`` bars: each met bar on stdout,
    each missed one on stderr with its failing records, then exit 3 if one was missed."""
    from localjury.results.gate import GATE_EXIT, check, describe

    outcomes = check(gates, result.summary, result.iter_results())
    for outcome in outcomes:
        (out if outcome.met else err).print(describe(outcome), style=None if outcome.met else "red", soft_wrap=True)
    if not all(o.met for o in outcomes):
        raise typer.Exit(GATE_EXIT)


def _dry_run(data: Path, settled: Settled, estimate: int | None, as_json: bool, quiet: bool) -> None:
    """Plan the run and print the plan (a table, or JSON on stdout)."""
    from localjury.results.tables import print_plan
    from localjury.run.dry import plan_run

    with _interruptible(), _progress(quiet or as_json) as progress:
        plan = plan_run(data, settled, estimate=estimate or 0, progress=progress)
    if as_json:
        sys.stdout.write(plan.model_dump_json(indent=2) + "\n")
    else:
        print_plan(plan, out)
