"""``localjury calibrate``: judge user-labelled records, fit each (model, metric)'s Platt
scaling and threshold, and measure the fit on held-out folds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury._hashing import file_sha256
from localjury._version import __version__
from localjury.bench import stats
from localjury.bench._judge import graded, resolve_metric
from localjury.bench.config import CalibrateConfig
from localjury.bench.formats import BenchItem, load
from localjury.bench.sampling import sample
from localjury.errors import ConfigError
from localjury.models.registry import ModelSpec
from localjury.results._outputs import OutputSet
from localjury.run import EngineFactory, RunResult, evaluate
from localjury.votes.calibration import CalibrationFile, Calibrator, Source, cross_validated, fit, read_calibration

if TYPE_CHECKING:
    from rich.progress import Progress


def _figures(
    gold: list[int], verdicts: Sequence[int | None], scores: Sequence[float | None], seed: int
) -> dict[str, Any]:
    c = stats.classification(gold, verdicts, seed=seed)
    p = stats.probabilistic(gold, scores, seed=seed)
    keep = ("accuracy", "balanced_accuracy", "kappa")
    # As the calibration file stores them (JSON): the interval a list.
    ci = list(c["kappa_ci"]) if c["kappa_ci"] is not None else None
    return {**{k: c[k] for k in keep}, "kappa_ci": ci, "brier": p["brier"], "ece": p["ece"], "auroc": p["auroc"]}


def _fit(
    name: str, items: list[BenchItem], run: RunResult, metric: str, data: str | Path, folds: int, seed: int
) -> Calibrator:
    """One model's fit on the judged records, with its held-out figures."""
    by_id = {r.record_id: r for r in run.iter_results()}
    judged = [(it.gold, next((j for j in by_id[it.id].models if j.model == name), None)) for it in items]
    rows = [(g, j, graded(j, composite=False)) for g, j in judged]
    usable = [(g, j, s) for g, j, s in rows if s is not None]
    gold = [g for g, _, _ in usable]
    scores = [float(s) for _, _, s in usable]
    source: Source = "p_pass" if all(j is not None and j.confidence is not None for _, j, _ in usable) else "vote_share"
    k, held = cross_validated(scores, gold, folds=folds, seed=seed)
    cal = fit(name, metric, source, scores, gold)
    held_out = {
        "folds": k,
        "records": len(usable),
        "abstained": len(rows) - len(usable),
        "uncalibrated": _figures(gold, [j.verdict for _, j, _ in usable], scores, seed),  # type: ignore[union-attr]
        "calibrated": _figures(gold, [int(c > t) for c, t in held], [c for c, _ in held], seed),
    }
    return cal.model_copy(
        update={"labels": str(Path(data).resolve()), "labels_sha256": file_sha256(Path(data)), "held_out": held_out}
    )


def calibrate(
    data: str | Path,
    models: Sequence[str | ModelSpec],
    out: str | Path,
    config: CalibrateConfig | None = None,
    *,
    fmt: str = "jsonl",
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    **settings: Any,
) -> CalibrationFile:
    """Fit a calibration for each model on one metric from labelled records.

    Each model judges every record (``strictness`` samples); its graded score of a record is
    its confidence (mean ``p_pass``) where its engine gives verdict probabilities, else its
    share of passing votes. Platt scaling and then a threshold are fitted on all the records
    and written to ``out`` (merged into it when it is already a calibration file: fits of
    the same model and metric are replaced). Each fit carries held-out figures: stratified
    k-fold, each record scored by a fit on the other folds, beside the uncalibrated run's
    verdicts (majority of votes) on the same records.

    Args:
        data: Labelled records (``fmt``; the default ``jsonl`` wants a 0/1 ``gold`` field).
        models: The models to calibrate.
        out: The calibration file (JSON): refused before any model loads when it is the
            labels, the judgment store (or its journals), models.yaml or a model's file, and
            locked until it is written (another command writing it meanwhile is refused).
        config: The settings (:class:`~localjury.bench.config.CalibrateConfig`: the metric,
            strictness, folds, sample, and the run's own), with ``settings`` replacing them by
            name (``metric='good="The answer is good."'``, ``strictness=1``, ``seed=3``...).

    Returns:
        The calibration file's content.

    Raises:
        ConfigError: Bad data, a metric that is not a single verdict, fewer than 2 records
            of a label, an output path refused or being written by another process.
        CommitError: The file system failed while the file was renamed into place.
    """
    out = Path(out)
    cal = (config or CalibrateConfig()).replace(models=list(models), **settings)
    run_config = cal.run.replace(strictness=cal.strictness)
    seed = run_config.sampling.seed
    # Locked from here to the commit: no other command writes the file meanwhile, so the
    # fits read from it now are the ones merged into it.
    with OutputSet({"calibration file": out}, cal.inputs(data, "labels")) as files:
        existing = read_calibration(out) if out.exists() else None
        judge = resolve_metric(cal.metric, fmt, cal.strictness)
        items = sample(load(data, fmt, metric=judge.name), cal.limit, cal.sample_seed)
        if judge.kind != "judge":
            raise ConfigError(
                f"metric {judge.name!r} is a {judge.kind} metric; calibrate judges one verdict per record"
            )
        run = evaluate(
            [it.entry() for it in items],
            [judge],
            config=run_config,
            progress=progress,
            engine_factory=engine_factory,
            output_set=files,  # checked against the judgment store and the models' files too
        )
        fits = [_fit(m.model, items, run, judge.name, data, cal.folds, seed) for m in run.summary.models]
        result = (existing or CalibrationFile(localjury_version=__version__, calibrators=[])).merged(fits)
        result = result.model_copy(update={"localjury_version": __version__})
        files.file(out, result.model_dump_json(indent=2) + "\n")
        files.commit()
    return result
