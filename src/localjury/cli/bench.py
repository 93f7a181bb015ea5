"""`localjury bench` (judges against gold labels) and `localjury calibrate` (fit to your labels)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from localjury.bench.config import BenchConfig, CalibrateConfig
from localjury.cli._common import (
    QuietOpt,
    _interruptible,
    _progress,
    app,
    checked_path,
    out,
)
from localjury.cli._settings import (
    JURY_SETTINGS,
    AddressOpt,
    ClusterOpt,
    ReplicaCpusOpt,
    ReplicasOpt,
    cluster_of,
    own_settings,
    takes_settings,
)

if TYPE_CHECKING:
    from rich.console import Console

    from localjury.votes.calibration import Calibrator


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


@app.command()
@takes_settings(JURY_SETTINGS)
@takes_settings(own_settings(BenchConfig), BenchConfig, into="bench_settings")
@takes_settings(("ungrounded",), into="reasons")
def bench(
    data: BenchDataArg,
    fmt: BenchFmtOpt,
    out_dir: BenchOutDirOpt,
    cluster: ClusterOpt = None,
    address: AddressOpt = None,
    replicas: ReplicasOpt = None,
    replica_cpus: ReplicaCpusOpt = None,
    quiet: QuietOpt = False,
    settings: dict[str, Any] | None = None,
    bench_settings: dict[str, Any] | None = None,
    reasons: dict[str, Any] | None = None,
) -> None:
    """Benchmark judge models (and their jury) against gold labels: accuracy, κ, agreement, speed."""
    from localjury.bench import require

    require()
    from localjury.bench.run import run_bench

    settings = settings or {}
    specs = _jury(settings)
    ray_cluster = cluster_of(cluster, address=address, replicas=replicas, cpus_per_replica=replica_cpus)
    config = BenchConfig.of(
        **(bench_settings or {}), seed=settings["seed"], registry=settings["registry"],
        use_cache=settings["use_cache"], thinking=settings["thinking"], cluster=ray_cluster, **(reasons or {}),
    )  # fmt: skip
    with _interruptible(), _progress(quiet) as progress:
        figures = run_bench(data, fmt, specs, out_dir, config, progress=progress)
    print_figures(figures, fmt, out)
    out.print(f"reports: {out_dir / 'report.html'}, {out_dir / 'report.md'}; figures: {out_dir / 'metrics.json'}")


@app.command()
@takes_settings(JURY_SETTINGS)
@takes_settings(own_settings(CalibrateConfig), CalibrateConfig, into="calibrate_settings")
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
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="jsonl (a gold field), or a bench format (llmbar, truthfulqa...).")
    ] = "jsonl",
    quiet: QuietOpt = False,
    settings: dict[str, Any] | None = None,
    calibrate_settings: dict[str, Any] | None = None,
) -> None:
    """Fit each model's calibration (Platt scaling, threshold) to your labels, measured on held-out folds."""
    from localjury.bench import require

    require()
    from localjury.bench.calibrate import calibrate as fit_calibration

    settings = settings or {}
    specs = _jury(settings)
    names = [s.name for s in specs]
    config = CalibrateConfig.of(
        **(calibrate_settings or {}), seed=settings["seed"], registry=settings["registry"],
        use_cache=settings["use_cache"], thinking=settings["thinking"],
    )  # fmt: skip
    with _interruptible(), _progress(quiet) as progress:
        result = fit_calibration(data, specs, out_path, config, fmt=fmt, progress=progress)
    print_calibration([c for c in result.calibrators if c.model in names], out)
    out.print(f"n: labelled records; thr.: fitted threshold; held out: {config.folds}-fold\ncalibration: {out_path}")


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
        from localjury.bench.checklist_comparison import COST_HEADER, HEADER, table_rows

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
