"""Run a judge benchmark: load a labeled set, judge it with the jury, compare with gold."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury._outputs import OutputSet
from localjury._version import __version__
from localjury.bench import stats
from localjury.bench._files import described, write
from localjury.bench._judge import BenchMode, graded, is_pairwise, resolve_metric
from localjury.bench.align import add_aligned, aligned_judge, traces_of
from localjury.bench.checklist import checklist_critics, compare_checklist
from localjury.bench.formats import FORMATS, BenchItem, load, sample
from localjury.bench.published import llmbar_reference
from localjury.errors import ConfigError
from localjury.metrics.aligned import DEFAULT_SHOTS
from localjury.metrics.pairwise import ORDERS, corrected
from localjury.registry import ModelSpec, registry_path
from localjury.report import ModelJudgment, RecordResult
from localjury.run import EngineFactory, RunConfig, RunResult, evaluate
from localjury.run.prepare import store_files
from localjury.voting import passes, vote_share

if TYPE_CHECKING:
    from rich.progress import Progress

    from localjury.run.cluster import RayCluster

JURY = "jury"


def prediction(score: float | None) -> int | None:
    """A score as a 0/1 prediction: pass (1) when above 0.5, as for the jury's pass rate; a
    composite's share of supported statements passes only with a majority of them."""
    verdict = passes(score)
    return None if verdict is None else int(verdict)


def _sample_votes(result: RecordResult, model: str) -> list[list[int | None]]:
    """The vote vectors whose agreement is the model's self-consistency: one per judgment,
    one per statement for composite metrics, one per order for pairwise metrics (so that a
    judge's position bias is not counted as disagreement among its samples)."""
    if result.statements is not None:
        return [j.votes for s in result.statements for j in s.models if j.model == model]
    judged = [j for j in result.models if j.model == model]
    if any(j.order_votes for j in judged):
        return [votes for j in judged for votes in (j.order_votes or {}).values()]
    return [j.votes for j in judged]


def order_shares(judgment: ModelJudgment | None) -> dict[str, float | None]:
    """A pairwise judgment's share of valid votes for response_a in each order, corrected to
    the record's frame (order "AB" shows response_a as A, "BA" shows it as B)."""
    order_votes = (judgment.order_votes if judgment is not None else None) or {}
    return {order: vote_share([corrected(v, order) for v in order_votes.get(order, [])]) for order in ORDERS}


def _pick(share: float | None) -> int | None:
    """An order's pick from a share of votes for response_a: the strict majority, no pick on
    an even split."""
    if share is None or share == 0.5:
        return None
    return int(share > 0.5)


def compute(
    items: Sequence[BenchItem],
    run: RunResult,
    models: Sequence[str],
    *,
    seed: int = 0,
    pairwise: bool = False,
    metric: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every figure of the benchmark, and one prediction row per record; ``pairwise``: the
    records are pairs judged by a pairwise metric, and each judge also gets the figures of
    its two orders (:func:`localjury.bench.stats.both_orders`); ``metric``: that metric's
    results only (a run of several)."""
    by_id = {r.record_id: r for r in run.iter_results() if metric is None or r.metric == metric}
    gold = [it.gold for it in items]
    preds: dict[str, list[int | None]] = {m: [] for m in models}
    grades: dict[str, list[float | None]] = {m: [] for m in models}
    if len(models) > 1:
        preds[JURY] = []
        grades[JURY] = []
    votes: dict[str, list[list[int | None]]] = {m: [] for m in models}
    # Pairwise metrics: each judge's pick in each order (record frame, 1: response_a).
    picks: dict[str, dict[str, list[int | None]]] = {m: {o: [] for o in ORDERS} for m in preds}
    rows: list[dict[str, Any]] = []
    errors = 0
    for it in items:
        result = by_id[str(it.record["id"])]
        errors += result.error is not None
        per_model = {j.model: j for j in result.models}
        row: dict[str, Any] = {
            "record_id": result.record_id,
            "gold": it.gold,
            "pair": it.pair,
            "score": result.score,
            "error": result.error,
            "models": {},
        }
        shares: dict[str, list[float]] = {o: [] for o in ORDERS}
        for m in models:
            j = per_model.get(m)
            pred = prediction(j.score) if j is not None else None
            preds[m].append(pred)
            grades[m].append(graded(j, result.statements is not None))
            votes[m].extend(_sample_votes(result, m))
            row["models"][m] = {
                "votes": j.votes if j else None,
                "verdict": j.verdict if j else None,
                "score": j.score if j else None,
                "prediction": pred,
                "graded": grades[m][-1],
                "abstentions": j.abstentions if j else None,
                "reasons": j.reasons if j else None,
            }
            if j is not None and j.evidence is not None:
                row["models"][m]["evidence"] = [
                    None if sample is None else [q.model_dump() for q in sample] for sample in j.evidence
                ]
            if pairwise:
                for order, share in order_shares(j).items():
                    picks[m][order].append(_pick(share))
                    if share is not None:
                        shares[order].append(share)
                row["models"][m]["order_votes"] = j.order_votes if j else None
        if len(models) > 1:
            preds[JURY].append(prediction(result.score))
            row["jury_prediction"] = preds[JURY][-1]
            decided = [g[-1] for g in (grades[m] for m in models) if g[-1] is not None]
            grades[JURY].append(sum(decided) / len(decided) if decided else None)
            row["jury_graded"] = grades[JURY][-1]
            if pairwise:  # the jury's pick in an order: the mean of its models' shares there
                for order, values in shares.items():
                    picks[JURY][order].append(_pick(sum(values) / len(values) if values else None))
        if result.statements is not None:
            row["statements"] = [
                {"statement": s.statement, "score": s.score, "votes": {j.model: j.votes for j in s.models}}
                for s in result.statements
            ]
            for entry, stmt in zip(row["statements"], result.statements, strict=True):
                quoted = {j.model: j.evidence for j in stmt.models if j.evidence is not None}
                if quoted:
                    entry["evidence"] = {
                        m: [None if x is None else [q.model_dump() for q in x] for x in ev] for m, ev in quoted.items()
                    }
        rows.append(row)
    speed = {s.model: s for s in run.summary.models}
    judges: dict[str, Any] = {}
    for name, column in preds.items():
        entry = stats.classification(gold, column, seed=seed)
        entry["graded"] = stats.probabilistic(gold, grades[name], seed=seed)
        if pairwise:
            entry["orders"] = stats.both_orders(gold, picks[name]["AB"], picks[name]["BA"])
        if any(it.pair for it in items):
            pairs: dict[str, list[tuple[int, int | None]]] = {}
            for it, p in zip(items, column, strict=True):
                if it.pair:
                    pairs.setdefault(it.pair, []).append((it.gold, p))
            entry["pairs"] = stats.pair_accuracy(pairs)
        if name in speed:
            s = speed[name]
            entry["self_consistency"] = stats.self_consistency(votes[name])
            entry["judgments_per_second"] = s.judgments_per_second
            entry["output_tokens_per_second"] = s.output_tokens_per_second
            entry["samples"] = s.judgments
            entry["cached_samples"] = s.cached
        judges[name] = entry
    figures = {
        "records": len(items),
        "record_errors": errors,
        "baseline": stats.majority_baseline(gold),
        "judges": judges,
        "agreement": {
            "fleiss": stats.fleiss({m: preds[m] for m in models}),
            "pairwise_kappa": stats.pairwise_kappa({m: preds[m] for m in models}),
        },
    }
    return figures, rows


def run_bench(
    data: str | Path,
    fmt: str,
    models: Sequence[str | ModelSpec],
    out: str | Path,
    *,
    metric: str | None = None,
    strictness: int = 1,
    limit: int | None = None,
    sample_seed: int = 0,
    seed: int = 0,
    registry: str | Path | None = None,
    use_cache: bool = True,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    cluster: RayCluster | None = None,
    verdict_first: bool = False,
    evidence: bool = False,
    mode: BenchMode = "auto",
    checklist: Sequence[str] = (),
    aligned: int | None = None,
    shots: int = DEFAULT_SHOTS,
) -> dict[str, Any]:
    """Benchmark judge models (and their jury) against a labeled data set.

    Writes ``metrics.json`` (every figure), ``predictions.jsonl`` (each record with gold and
    per-model votes, reasons, quotes, verdicts and predictions), ``report.md`` and a self-contained
    ``report.html`` with plots into ``out``. ``cluster`` shards the judging over Ray
    replicas (see :func:`localjury.evaluate`); the figures are those of a local run.
    ``verdict_first`` asks the Aspect Critic for its verdict before its reason (to compare
    with the default, reason first); ``evidence`` for quoted evidence first. ``mode``: ``pairwise`` judges pairs with a
    :class:`~localjury.metrics.pairwise.PairwiseCritic` in both orders and reports both
    orders' figures as LLMBar does, beside the published figures of LLMBar's judges;
    ``pointwise`` judges each response on its own; ``auto`` (default) is pairwise for sets
    of pairs (``llmbar``; ``jsonl`` records with ``response_a`` and ``response_b``).
    ``checklist``: more criteria (aspects or ``NAME="criterion"``) to judge with the bench's
    own, once one call per criterion and once in one checklist call per record, each from a
    temporary store, and compare (:mod:`localjury.bench.checklist`; ``checklist`` in metrics.json).
    ``aligned``: also judge each record shown ``shots`` nearest labeled records of the other
    of ``aligned`` folds (a pair, or the records of one input, in one fold; see
    :mod:`localjury.bench.align`), reported beside the zero-shot judges as "MODEL (aligned)";
    with ``evidence`` the aligned judge quotes too, each example quoting as the zero-shot
    judges' first sample that voted its gold label did (judged after them).

    Returns:
        The content of metrics.json.

    The four files are refused before any model loads when one would overwrite an input
    (the data set, the judgment store or its journals, models.yaml, a model's files), locked
    for the run, and committed together (see :class:`localjury._outputs.OutputSet`).

    Raises:
        ConfigError: Unknown format, unreadable data, bad settings, an output refused or
            being written by another process.
        CommitError: The file system failed part way through the commit.
    """
    if limit is not None and limit < 1:
        raise ConfigError(f"`limit` must be >= 1, got {limit}")
    folder = Path(out)
    outputs = {
        "predictions": folder / "predictions.jsonl",
        "Markdown report": folder / "report.md",
        "HTML report": folder / "report.html",
        "figures": folder / "metrics.json",
    }
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"the bench output folder {folder} is a file; give a folder")
    config = RunConfig.of(
        models=list(models), seed=seed, strictness=strictness, registry=registry, use_cache=use_cache, cluster=cluster
    )
    inputs = {"dataset": Path(data), "models.yaml": registry_path(registry), **store_files(config.store.path())}
    # Locked from here to the commit; checked against the models' files too (by evaluate)
    # before any model loads.
    with OutputSet(outputs, inputs) as files:
        pairwise = is_pairwise(mode, fmt, data)
        all_items = load(data, fmt, pairwise=pairwise)
        items = sample(all_items, limit, sample_seed)
        judge = resolve_metric(
            metric, fmt, strictness, verdict_first=verdict_first, pairwise=pairwise, evidence=evidence
        )
        ids = [str(it.record["id"]) for it in items]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"{data}: record ids are not unique")
        critics = checklist_critics(judge, checklist, strictness) if checklist else None
        records = [it.record for it in items]
        judging = partial(
            evaluate, records, config=config, progress=progress, engine_factory=engine_factory, output_set=files
        )
        # A quoting judge's examples quote what its zero-shot samples quoted: judged after them.
        fold_judge = aligned_judge(items, judge, aligned, shots, sample_seed) if aligned and not evidence else None
        run = judging([judge, *([fold_judge] if fold_judge else [])])
        aligned_run = run
        if aligned and evidence:
            fold_judge = aligned_judge(items, judge, aligned, shots, sample_seed, traces_of(items, run, judge.name))
            aligned_run = judging([fold_judge])
        names = [m.model for m in run.summary.models]
        figures, rows = compute(items, run, names, seed=sample_seed, pairwise=pairwise, metric=judge.name)
        if fold_judge is not None:
            more = compute(items, aligned_run, names, seed=sample_seed, metric=fold_judge.name)
            add_aligned(figures, rows, more, fold_judge, items)
        manifest = run.manifest
        figures = {
            "benchmark": {
                "dataset": str(Path(data).resolve()),
                "format": fmt,
                "format_description": FORMATS[fmt].description,
                "records_in_file": len(all_items),
                "records": len(items),
                "limit": limit,
                "sample_seed": sample_seed,
                "seed": seed,
                "strictness": strictness,
                "metric": {
                    "name": judge.name,
                    "description": judge.description,
                    "verdict_first": verdict_first,
                    "evidence": evidence,
                },
                "mode": "pairwise" if pairwise else "pointwise",
                "aligned": {"folds": aligned, "shots": shots, "similarity": "tfidf-cosine"} if aligned else None,
                "models": described(manifest),
                "packages": manifest.packages if manifest else {},
                "localjury_version": __version__,
                "seconds": run.summary.seconds + (aligned_run.summary.seconds if aligned_run is not run else 0.0),
            },
            **figures,
        }
        if critics:
            figures["checklist"] = compare_checklist(
                [it.record for it in items], [it.gold for it in items], critics, config, seed=sample_seed,
                progress=progress, engine_factory=engine_factory, output_set=files,
            )  # fmt: skip
        if pairwise and fmt == "llmbar":
            figures["published"] = llmbar_reference(data)
        if evidence:
            from localjury.bench.evidence import examples

            figures["evidence"] = examples(items, rows)
        write(files, outputs, rows, figures)
    return figures
