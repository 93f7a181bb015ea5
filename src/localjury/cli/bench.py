"""`localjury bench` (judges against gold labels) and `localjury calibrate` (fit to your labels)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from localjury.cli._common import (
    AddressOpt,
    ClusterOpt,
    QuietOpt,
    ReplicaCpusOpt,
    ReplicasOpt,
    _cluster,
    _interruptible,
    _progress,
    app,
    checked_path,
    out,
)
from localjury.cli._settings import JURY_SETTINGS, takes_settings
from localjury.metrics.aligned import DEFAULT_SHOTS
from localjury.metrics.base import MAX_STRICTNESS
from localjury.run.config import MAX_SEED

if TYPE_CHECKING:
    from rich.console import Console

    from localjury.calibration import Calibrator


BenchDataArg = Annotated[
    Path, typer.Argument(callback=checked_path, help="A labeled data set (read from this path, never bundled).")
]
BenchFmtOpt = Annotated[
    str,
    typer.Option("--format", "-f", help="llmbar, halueval-general, halueval-qa, truthfulqa, or jsonl (a gold field)."),
]
BenchOutDirOpt = Annotated[
    Path,
    typer.Option("--out", "-o", callback=checked_path, help="Folder for metrics.json, predictions.jsonl, reports."),
]
BenchMetricOpt = Annotated[
    str | None,
    typer.Option(
        "--metric",
        help='What to judge: an aspect, NAME="criterion", faithfulness or factual_accuracy (default: per format).',
    ),
]
BenchStrictnessOpt = Annotated[
    int, typer.Option("--strictness", "-k", min=1, max=MAX_STRICTNESS, help="Samples per model.")
]
BenchLimitOpt = Annotated[
    int | None, typer.Option("--limit", min=1, help="Judge at most N records (pairs kept whole).")
]
BenchSampleSeedOpt = Annotated[
    int,
    typer.Option("--sample-seed", min=0, max=MAX_SEED, help="Seed of the --limit sample and the bootstrap."),
]
BenchVerdictFirstOpt = Annotated[
    bool, typer.Option("--verdict-first", help="Ask for the verdict before the reason (compare with the default).")
]
BenchEvidenceOpt = Annotated[
    bool,
    typer.Option(
        "--evidence",
        help="Ask for quoted evidence first, each quote an exact span of the judged text (compare with the default).",
    ),
]
BenchModeOpt = Annotated[
    str,
    typer.Option(
        "--mode",
        help="pairwise: judge each pair in both orders (as LLMBar does); pointwise: each response on its own; "
        "auto: pairwise for sets of pairs (llmbar; jsonl with response_a/response_b).",
    ),
]
BenchAlignedOpt = Annotated[
    int | None,
    typer.Option(
        "--aligned",
        min=2,
        help="Also judge each record shown its nearest labeled records (as `run --profile` does) from the other "
        "of K folds (a pair, or the records of one input, in one fold), reported beside the zero-shot judges.",
    ),
]
BenchShotsOpt = Annotated[
    int, typer.Option("--shots", min=1, max=32, help="With --aligned: labeled examples per prompt.")
]
BenchChecklistOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--checklist",
        help='Another criterion (an aspect or NAME="criterion"; repeatable) to judge with the bench\'s, '
        "once in one checklist call per record and once one call per criterion (each from a temporary store), "
        "reporting their agreement, κ against the labels and the tokens and seconds saved.",
    ),
]


@app.command()
@takes_settings(JURY_SETTINGS)
def bench(
    data: BenchDataArg,
    fmt: BenchFmtOpt,
    out_dir: BenchOutDirOpt,
    metric: BenchMetricOpt = None,
    strictness: BenchStrictnessOpt = 1,
    limit: BenchLimitOpt = None,
    sample_seed: BenchSampleSeedOpt = 0,
    verdict_first: BenchVerdictFirstOpt = False,
    evidence: BenchEvidenceOpt = False,
    mode: BenchModeOpt = "auto",
    aligned: BenchAlignedOpt = None,
    shots: BenchShotsOpt = DEFAULT_SHOTS,
    checklist: BenchChecklistOpt = None,
    cluster: ClusterOpt = None,
    address: AddressOpt = None,
    replicas: ReplicasOpt = None,
    replica_cpus: ReplicaCpusOpt = None,
    quiet: QuietOpt = False,
    settings: dict[str, Any] | None = None,
) -> None:
    """Benchmark judge models (and their jury) against gold labels: accuracy, κ, agreement, speed."""
    from localjury.bench import require

    require()
    from localjury.bench.run import run_bench

    settings = settings or {}
    specs = _jury(settings)
    with _interruptible(), _progress(quiet) as progress:
        figures = run_bench(
            data,
            fmt,
            specs,
            out_dir,
            metric=metric,
            strictness=strictness,
            limit=limit,
            sample_seed=sample_seed,
            seed=settings["seed"],
            registry=settings["registry"],
            use_cache=settings["use_cache"],
            progress=progress,
            cluster=_cluster(cluster, address, replicas, replica_cpus),
            verdict_first=verdict_first,
            evidence=evidence,
            mode=mode,  # type: ignore[arg-type]  # checked by run_bench, naming the choices
            checklist=checklist or (),
            aligned=aligned,
            shots=shots,
        )
    print_figures(figures, fmt, out)
    out.print(f"reports: {out_dir / 'report.html'}, {out_dir / 'report.md'}; figures: {out_dir / 'metrics.json'}")


@app.command()
@takes_settings(JURY_SETTINGS)
def calibrate(
    data: Annotated[
        Path, typer.Argument(callback=checked_path, help="Labelled records: one a line with a gold field (0/1).")
    ],
    out_path: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            callback=checked_path,
            help="Calibration file (JSON); fits of other models/metrics in it are kept.",
        ),
    ],
    metric: Annotated[
        str | None,
        typer.Option("--metric", help='What the labels judge: an aspect or NAME="criterion" (default: per format).'),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="jsonl (a gold field), or a bench format (llmbar, truthfulqa...).")
    ] = "jsonl",
    strictness: Annotated[
        int, typer.Option("--strictness", "-k", min=1, max=MAX_STRICTNESS, help="Samples per model.")
    ] = 3,
    folds: Annotated[int, typer.Option("--folds", min=2, help="Folds of the held-out evaluation.")] = 5,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Use at most N labelled records.")] = None,
    sample_seed: Annotated[
        int, typer.Option("--sample-seed", min=0, max=MAX_SEED, help="Seed of the --limit sample.")
    ] = 0,
    quiet: QuietOpt = False,
    settings: dict[str, Any] | None = None,
) -> None:
    """Fit each model's calibration (Platt scaling, threshold) to your labels, measured on held-out folds."""
    from localjury.bench import require

    require()
    from localjury.bench.calibrate import calibrate as fit_calibration

    settings = settings or {}
    specs = _jury(settings)
    names = [s.name for s in specs]
    with _interruptible(), _progress(quiet) as progress:
        result = fit_calibration(
            data, specs, out_path, metric=metric, fmt=fmt, strictness=strictness, folds=folds, limit=limit,
            sample_seed=sample_seed, seed=settings["seed"], registry=settings["registry"],
            use_cache=settings["use_cache"], progress=progress,
        )  # fmt: skip
    print_calibration([c for c in result.calibrators if c.model in names], out)
    out.print(f"n: labelled records; thr.: fitted threshold; held out: {folds}-fold\ncalibration: {out_path}")


def _jury(settings: dict[str, Any]) -> list[Any]:
    """The specs of ``--models`` (default: the default judge), with ``--trust-remote-code``
    checked as ``localjury run`` checks it (see :func:`localjury.run.jury.resolve_models`)."""
    from localjury.run.jury import resolve_models

    return resolve_models(settings["models"], settings["registry"], settings["trust_remote_code"])


def _both(figures: tuple[dict[str, Any], dict[str, Any]], key: str, form: str) -> str:
    """A figure before and after calibration, "-" where undefined."""
    return " → ".join("-" if f[key] is None else format(f[key], form) for f in figures)


def print_figures(figures: dict[str, Any], fmt: str, console: Console) -> None:
    """Print a bench's figures: each judge's, for pairwise benches both orders', and the checklist's
    comparison where it ran one."""
    from localjury._terminal import Column, print_table
    from localjury.bench.report import BASELINE, ORDERS_HEADER, _header, _orders_rows, _rows

    header, rows = _header(figures), _rows(figures)
    # The terminal's table, importance: the lowest goes first where the terminal is narrow (the
    # reports have every column).
    importance = {"judge": None, "accuracy [95% CI]": None, "Cohen's κ [95% CI]": 4, "pair acc.": 3}
    importance |= {"abstained": 2, "judgments/s": 1}
    columns = [
        Column(
            h,
            [row[i] for row in rows],
            "name" if h == "judge" else "figure",
            importance[h],
            justify="left",
        )
        for i, h in enumerate(header)
        if h in importance
    ]
    styles = ["red" if row[0].startswith(BASELINE) else None for row in rows]
    print_table(console, columns, title=f"{fmt}: {figures['records']} records", row_styles=styles)
    orders = _orders_rows(figures)
    if orders:
        both = [
            Column(h, [row[i] for row in orders], "name" if i == 0 else "figure") for i, h in enumerate(ORDERS_HEADER)
        ]
        styles = ["dim" if "(published" in row[0] else None for row in orders]
        print_table(console, both, title="both orders (pairwise)", row_styles=styles)
    if figures.get("checklist"):
        from localjury.bench.checklist import COST_HEADER, HEADER, table_rows

        for head, body in zip((HEADER, COST_HEADER), table_rows(figures["checklist"]), strict=True):
            columns = [Column(h, [r[i] for r in body], "name" if i < 2 else "figure") for i, h in enumerate(head)]
            print_table(console, columns, title="checklist against one call per criterion")


def print_calibration(calibrators: list[Calibrator], console: Console) -> None:
    """Print each model's fitted calibration, measured on held-out folds (before → after)."""
    from localjury._terminal import Column, print_table

    held = [(c.held_out["uncalibrated"], c.held_out["calibrated"]) for c in calibrators]
    columns = [
        Column("model", [c.model for c in calibrators], "name"),
        Column("metric", [c.metric for c in calibrators], "name"),
        Column("n", [str(c.records) for c in calibrators]),
        Column("thr.", [f"{c.threshold:.3f}" for c in calibrators]),
        Column("accuracy", [_both(h, "accuracy", ".1%") for h in held]),
        Column("κ", [_both(h, "kappa", ".2f") for h in held]),
    ]
    print_table(console, columns, title="calibration (held out: before → after)")
