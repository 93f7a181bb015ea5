"""`localjury run`: judge records (`localjury verify`, which checks a run's files, is in :mod:`.verify`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from localjury.cli._common import (
    MAX_SEED,
    AddressOpt,
    ClusterOpt,
    RegistryOpt,
    ReplicaCpusOpt,
    ReplicasOpt,
    TrustOpt,
    _cluster,
    _interruptible,
    _progress,
    app,
    checked_path,
    err,
    out,
)
from localjury.cli._metrics import _build_metrics
from localjury.errors import ConfigError
from localjury.metrics.base import MAX_STRICTNESS

if TYPE_CHECKING:
    from localjury.gate import Gate
    from localjury.run.result import RunResult


@app.command()
def run(
    data: Annotated[
        Path,
        typer.Argument(
            callback=checked_path,
            help="Records to judge: .jsonl, .json, .csv or .parquet, an inspect_ai eval log (.eval or .json; "
            "a record per sample; needs the inspect extra), or a Hugging Face datasets folder "
            "(save_to_disk; needs the datasets extra).",
        ),
    ],
    aspect: Annotated[
        list[str], typer.Option("--aspect", "-a", help="A predefined aspect (repeatable); see `localjury aspects`.")
    ] = [],  # noqa: B006
    criterion: Annotated[
        list[str], typer.Option("--criterion", "-c", help='Your own criterion, NAME="TEXT" (repeatable).')
    ] = [],  # noqa: B006
    criteria: Annotated[
        Path | None,
        typer.Option(
            "--criteria",
            callback=checked_path,
            help="YAML file of criteria: name: text, or a list of {name, definition, strictness, tie_break}.",
        ),
    ] = None,
    rubrics: Annotated[
        Path | None,
        typer.Option(
            "--rubrics",
            callback=checked_path,
            help="YAML file of named, versioned criteria and rubrics (graded 1-N, a description per level); "
            "an edited or new version of an entry is judged again.",
        ),
    ] = None,
    pairwise: Annotated[
        list[str],
        typer.Option(
            "--pairwise",
            help='A pairwise criterion, NAME="TEXT" (repeatable): which of response_a and response_b better '
            "meets it, asked in both orders.",
        ),
    ] = [],  # noqa: B006
    metric: Annotated[
        list[str],
        typer.Option(
            "--metric",
            help="A metric by name (repeatable): faithfulness (needs retrieved_contexts), "
            "factual_accuracy (needs reference); rubrics graded 1-5: helpfulness_rubric, correctness_rubric "
            "(needs reference), coherence_rubric, harmlessness_rubric; for agent runs (messages): goal_achieved "
            "(needs reference, the goal), tool_call_accuracy and tool_call_accuracy_any_order (need "
            "reference_tool_calls), tool_result_faithfulness; see `localjury metrics`.",
        ),
    ] = [],  # noqa: B006
    models: Annotated[
        str | None,
        typer.Option(
            "--models",
            "-m",
            help="Comma-separated judge models from models.yaml (or model folders). "
            "Default: qwen2.5-coder-1.5b-instruct.",
        ),
    ] = None,
    strictness: Annotated[
        int | None,
        typer.Option(
            "--strictness",
            "-k",
            min=1,
            max=MAX_STRICTNESS,
            help=f"Samples per model for each judgment (1-{MAX_STRICTNESS}); majority vote. Default 1 (or per "
            "criterion).",
        ),
    ] = None,
    adaptive: Annotated[
        bool,
        typer.Option(
            "--adaptive",
            help="Draw k//2+1 samples first; draw the rest only where those disagree. Same verdicts, fewer samples.",
        ),
    ] = False,
    tie_break: Annotated[
        str | None,
        typer.Option(
            "--tie-break",
            help="An even split of valid votes gives: fail (default), pass, or abstain "
            "(pairwise: response_b, response_a, or no preference, the default there).",
        ),
    ] = None,
    scoring: Annotated[
        str,
        typer.Option(
            "--scoring",
            help="votes: a model's verdict is the majority of its votes (default). probability: its score is its "
            "mean verdict probability p_pass, its verdict that above --threshold.",
        ),
    ] = "votes",
    threshold: Annotated[
        float, typer.Option("--threshold", help="With --scoring probability: the p_pass a pass must exceed.")
    ] = 0.5,
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            callback=checked_path,
            help="A calibration file from `localjury calibrate`: calibrated scores and fitted thresholds for every "
            "(model, criterion).",
        ),
    ] = None,
    verdict_first: Annotated[
        bool,
        typer.Option("--verdict-first", help="Ask --aspect and --criterion judges for the verdict before the reason."),
    ] = False,
    evidence: Annotated[
        bool,
        typer.Option(
            "--evidence",
            help="Ask --aspect and --criterion judges for quoted evidence first (up to three quotes, each an exact "
            "span of the response by construction: transformers, llamacpp, vllm with the guidance backend), and "
            "faithfulness and factual_accuracy for quotes of the context on each statement.",
        ),
    ] = False,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            callback=checked_path,
            help="A judge profile from `localjury align`: its criterion is judged too, each record shown its "
            "nearest labeled examples with their gold verdicts, scored by the profile's fitted thresholds; its "
            "models judge when --models is not given.",
        ),
    ] = None,
    checklist: Annotated[
        bool,
        typer.Option(
            "--checklist",
            help="Judge the aspects and criteria in one call per record and model (one verdict each in one JSON "
            "object) instead of one call each; each keeps its own results (with --verdict-first: one call each).",
        ),
    ] = False,
    seed: Annotated[
        int,
        typer.Option(
            "--seed",
            min=0,
            max=MAX_SEED,
            help="Run seed (0 to 2**32-1): the same command and seed give identical results.",
        ),
    ] = 0,
    temperature: Annotated[
        float | None,
        typer.Option(
            "--temperature", min=0.0, help="Override the models' sampling temperature (a finite number >= 0)."
        ),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Override the models' output token budget per sample.")
    ] = None,
    out_path: Annotated[
        Path,
        typer.Option(
            "--out", "-o", callback=checked_path, help="Results file (JSONL, one line per record and criterion)."
        ),
    ] = Path("results.jsonl"),
    summary: Annotated[
        Path | None,
        typer.Option("--summary", callback=checked_path, help="Summary JSON (default: <out stem>.summary.json)."),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="vllm, transformers or llamacpp for every model (default: each models.yaml entry; auto = vLLM where "
            "a CUDA device and vLLM are present, else llamacpp for a .gguf path, else transformers); an entry with "
            "base_url always runs on its server.",
        ),
    ] = None,
    extractor: Annotated[
        str | None,
        typer.Option(
            "--extractor",
            help="Jury model that extracts statements for composite metrics (default: the first model).",
        ),
    ] = None,
    registry: RegistryOpt = None,
    trust_remote_code: TrustOpt = [],  # noqa: B006
    strict_input: Annotated[
        bool, typer.Option("--strict-input", help="Stop at the first bad record instead of reporting it and going on.")
    ] = False,
    cache: Annotated[
        Path | None,
        typer.Option(
            "--cache",
            callback=checked_path,
            help="Judgment store (SQLite); what it holds is not generated again, so a killed run resumes. "
            "Default: $LOCALJURY_CACHE, else $LOCALJURY_HOME/cache/judgments.sqlite.",
        ),
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Use a temporary store for this run only (no reuse, no resume).")
    ] = False,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Start over: generate everything again, replacing what the store holds.")
    ] = False,
    on_overflow: Annotated[
        str,
        typer.Option(
            "--on-overflow",
            help="A prompt longer than a model's context: error (that model's judgment of the record is an error) "
            "or truncate (cut a conversation's middle turns, then the retrieved contexts, marking each cut, until "
            "it fits; results say how many turns were cut).",
        ),
    ] = "error",
    chunk_size: Annotated[
        int,
        typer.Option("--chunk-size", min=1, help="Records per chunk: one engine call and one store commit per chunk."),
    ] = 1024,
    cluster: ClusterOpt = None,
    address: AddressOpt = None,
    replicas: ReplicasOpt = None,
    replica_cpus: ReplicaCpusOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Plan the run without running it: per model the records, prompts, samples and prompt tokens to "
            "generate, the samples already in the judgment store, and the time estimated from a short sample "
            "(--estimate). Writes no results.",
        ),
    ] = False,
    estimate: Annotated[
        int | None,
        typer.Option(
            "--estimate",
            min=0,
            help="With --dry-run: prompts per model to generate and time for the estimate (default 4; 0: load no "
            "model). What they generate is kept in the judgment store for the run.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="With --dry-run: print the plan as JSON.")] = False,
    fail_under: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-under",
            metavar="METRIC=RATE",
            help="A CI gate (repeatable): after writing every output, exit 3 when METRIC's pass rate (as in the "
            "summary) is under RATE (0.9 or 90%), listing the records that failed; a metric with no scored record "
            "fails its bar.",
        ),
    ] = None,
) -> None:
    """Judge DATA on each criterion and metric with each model, vote, and write results and a summary
    (with --dry-run: plan the run and estimate its time instead)."""
    from localjury.gate import Gate, check_names
    from localjury.run import RunConfig, evaluate
    from localjury.summary import summary_path_for
    from localjury.tables import print_summary

    metrics = _build_metrics(aspect, criterion, criteria, metric, verdict_first, pairwise, rubrics, evidence)
    files = (("criteria file", criteria), ("calibration file", calibration), ("rubrics file", rubrics))
    inputs: dict[str, str | Path] = {k: v for k, v in files if v is not None}
    jury = [m.strip() for m in models.split(",") if m.strip()] if models else None
    if profile is not None:
        from localjury.profile import with_profile

        metrics, inputs, profile_models = with_profile(profile, metrics, inputs)
        jury = jury or profile_models or None
    gates = [Gate.parse(text) for text in fail_under or []]
    check_names(gates, [m.name for m in metrics])
    config = RunConfig.of(
        seed=seed,
        strictness=strictness,
        tie_break=tie_break,
        scoring=scoring,
        threshold=threshold,
        calibration=calibration,
        temperature=temperature,
        max_tokens=max_tokens,
        adaptive=adaptive,
        checklist=checklist,
        cache=cache,
        use_cache=not no_cache,
        fresh=fresh,
        strict_input=strict_input,
        on_overflow=on_overflow,
        chunk_size=chunk_size,
        models=jury,
        registry=registry,
        engine=engine,
        extractor=extractor,
        trust_remote_code=trust_remote_code,
        cluster=_cluster(cluster, address, replicas, replica_cpus),
    )
    if dry_run:
        _dry_run(data, metrics, config, estimate, as_json, quiet)
        return
    given = [flag for flag, v in (("--estimate", estimate is not None), ("--json", as_json)) if v]
    if given:
        raise ConfigError(f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} only with --dry-run")
    with _interruptible(), _progress(quiet) as progress:
        result = evaluate(
            data,
            metrics,
            config=config,
            out=out_path,
            summary=summary,
            inputs=inputs,
            command=["localjury", *sys.argv[1:]],
            progress=progress,
        )
    print_summary(result.summary, out)
    errors = result.summary.record_errors
    if errors:
        err.print(f"{errors} bad record(s): see the 'error' field in {out_path}", style="yellow")
    out.print(f"results: {out_path}\nsummary: {summary or summary_path_for(out_path)}")
    if gates:
        _gate(gates, result)


def _gate(gates: list[Gate], result: RunResult) -> None:
    """Check the run's pass rates against its ``--fail-under`` bars: each met bar on stdout,
    each missed one on stderr with its failing records, then exit 3 if one was missed."""
    from localjury.gate import GATE_EXIT, check, describe

    outcomes = check(gates, result.summary, result.iter_results())
    for outcome in outcomes:
        (out if outcome.met else err).print(describe(outcome), style=None if outcome.met else "red", soft_wrap=True)
    if not all(o.met for o in outcomes):
        raise typer.Exit(GATE_EXIT)


def _dry_run(data: Path, metrics: list[Any], config: Any, estimate: int | None, as_json: bool, quiet: bool) -> None:
    """Plan the run and print the plan (a table, or JSON on stdout)."""
    from localjury.run import dry_run
    from localjury.run.dry import DEFAULT_ESTIMATE_PROMPTS
    from localjury.tables import print_plan

    with _interruptible(), _progress(quiet or as_json) as progress:
        plan = dry_run(
            data,
            metrics,
            config=config,
            estimate=DEFAULT_ESTIMATE_PROMPTS if estimate is None else estimate,
            progress=progress,
        )
    if as_json:
        sys.stdout.write(plan.model_dump_json(indent=2) + "\n")
    else:
        print_plan(plan, out)
