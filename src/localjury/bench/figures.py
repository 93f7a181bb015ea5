"""A bench's figures: each judge's predictions, graded scores and votes against the gold
labels, one prediction row per record, and the figures computed from them
(:mod:`localjury.bench.stats`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from localjury.bench import stats
from localjury.bench._judge import graded
from localjury.bench.formats import BenchItem
from localjury.metrics.pairwise import ORDERS, corrected
from localjury.results.record_result import ModelJudgment, RecordResult
from localjury.results.summary import ModelSummary
from localjury.run import RunResult
from localjury.votes.voting import passes, vote_share

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
    columns = _Columns(models, pairwise)
    rows = [columns.add(it, by_id[it.id]) for it in items]
    errors = sum(by_id[it.id].error is not None for it in items)
    speed = {s.model: s for s in run.summary.models}
    gold = [it.gold for it in items]
    judges = {name: columns.figures(name, items, speed.get(name), seed) for name in columns.preds}
    preds = {m: columns.preds[m] for m in models}
    figures = {
        "records": len(items),
        "record_errors": errors,
        "baseline": stats.majority_baseline(gold),
        "judges": judges,
        "agreement": {"fleiss": stats.fleiss(preds), "pairwise_kappa": stats.pairwise_kappa(preds)},
    }
    return figures, rows


class _Columns:
    """Each judge's column over the records, filled a record at a time: its predictions,
    graded scores, sample votes and (pairwise) its pick in each order; the jury's where
    several models judge."""

    def __init__(self, models: Sequence[str], pairwise: bool) -> None:
        self.models, self.pairwise = list(models), pairwise
        names = [*self.models, *([JURY] if len(self.models) > 1 else [])]
        self.preds: dict[str, list[int | None]] = {m: [] for m in names}
        self.grades: dict[str, list[float | None]] = {m: [] for m in names}
        self.votes: dict[str, list[list[int | None]]] = {m: [] for m in self.models}
        # Pairwise metrics: each judge's pick in each order (record frame, 1: response_a).
        self.picks: dict[str, dict[str, list[int | None]]] = {m: {o: [] for o in ORDERS} for m in names}

    def add(self, it: BenchItem, result: RecordResult) -> dict[str, Any]:
        """Add one record's judgments to the columns; return its prediction row."""
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
        for m in self.models:
            row["models"][m] = self._add_model(m, per_model.get(m), result, shares)
        if len(self.models) > 1:
            self.preds[JURY].append(prediction(result.score))
            row["jury_prediction"] = self.preds[JURY][-1]
            decided = [g[-1] for g in (self.grades[m] for m in self.models) if g[-1] is not None]
            self.grades[JURY].append(sum(decided) / len(decided) if decided else None)
            row["jury_graded"] = self.grades[JURY][-1]
            if self.pairwise:  # the jury's pick in an order: the mean of its models' shares there
                for order, values in shares.items():
                    self.picks[JURY][order].append(_pick(sum(values) / len(values) if values else None))
        if result.statements is not None:
            row["statements"] = _statement_rows(result)
        return row

    def _add_model(
        self, m: str, j: ModelJudgment | None, result: RecordResult, shares: dict[str, list[float]]
    ) -> dict[str, Any]:
        """Add model ``m``'s judgment of a record (``shares``: each order's vote shares, for
        the jury's pick); return its part of the row."""
        pred = prediction(j.score) if j is not None else None
        self.preds[m].append(pred)
        self.grades[m].append(graded(j, result.statements is not None))
        self.votes[m].extend(_sample_votes(result, m))
        cell: dict[str, Any] = {
            "votes": j.votes if j else None,
            "verdict": j.verdict if j else None,
            "score": j.score if j else None,
            "prediction": pred,
            "graded": self.grades[m][-1],
            "abstentions": j.abstentions if j else None,
            "reasons": j.reasons if j else None,
        }
        if j is not None and j.thinking is not None:
            cell["thinking"] = j.thinking
        if j is not None and j.evidence is not None:
            cell["evidence"] = [None if sample is None else [q.model_dump() for q in sample] for sample in j.evidence]
        if self.pairwise:
            for order, share in order_shares(j).items():
                self.picks[m][order].append(_pick(share))
                if share is not None:
                    shares[order].append(share)
            cell["order_votes"] = j.order_votes if j else None
        return cell

    def figures(self, name: str, items: Sequence[BenchItem], speed: ModelSummary | None, seed: int) -> dict[str, Any]:
        """One judge's figures against the gold labels (and its speed, where it is a model)."""
        gold, column = [it.gold for it in items], self.preds[name]
        entry = stats.classification(gold, column, seed=seed)
        entry["graded"] = stats.probabilistic(gold, self.grades[name], seed=seed)
        if self.pairwise:
            entry["orders"] = stats.both_orders(gold, self.picks[name]["AB"], self.picks[name]["BA"])
        if any(it.pair for it in items):
            pairs: dict[str, list[tuple[int, int | None]]] = {}
            for it, p in zip(items, column, strict=True):
                if it.pair:
                    pairs.setdefault(it.pair, []).append((it.gold, p))
            entry["pairs"] = stats.pair_accuracy(pairs)
        if speed is not None:
            entry["self_consistency"] = stats.self_consistency(self.votes[name])
            entry["judgments_per_second"] = speed.judgments_per_second
            entry["output_tokens_per_second"] = speed.output_tokens_per_second
            entry["samples"] = speed.judgments
            entry["cached_samples"] = speed.cached
        return entry


def _statement_rows(result: RecordResult) -> list[dict[str, Any]]:
    """A composite record's statements as its row shows them, with any quotes."""
    out = []
    for stmt in result.statements or []:
        entry: dict[str, Any] = {
            "statement": stmt.statement,
            "score": stmt.score,
            "votes": {j.model: j.votes for j in stmt.models},
        }
        quoted = {j.model: j.evidence for j in stmt.models if j.evidence is not None}
        if quoted:
            entry["evidence"] = {
                m: [None if x is None else [q.model_dump() for q in x] for x in ev] for m, ev in quoted.items()
            }
        out.append(entry)
    return out
