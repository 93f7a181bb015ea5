"""The decision-heads benchmark's ways beyond one block's head: a preference head on the pairwise
sets, and a jury whose members' verdict probabilities are combined by weights learned from the
labels, beside the mean a run takes today. Imported by ``decision_heads.py``; figures only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from localjury.bench import stats
from localjury.votes.heads import cross_validated
from localjury.votes.preference import cross_validated_preference


def figures_of(gold: list[int], p: list[float], seed: int = 0) -> dict[str, Any]:
    """Kappa [95% bootstrap CI] and accuracy of ``p``'s 0.5 cut against ``gold``, and ``p``'s AUROC."""
    c = stats.classification(gold, [int(x >= 0.5) for x in p], seed=seed)
    return {
        "kappa": c["kappa"],
        "kappa_ci": list(c["kappa_ci"]) if c["kappa_ci"] is not None else None,
        "accuracy": c["accuracy"],
        "auroc": stats.probabilistic(gold, p, seed=seed)["auroc"],
    }


def preference_figures(
    x: np.ndarray, layers: list[int], items: list[Any], gold: list[int], seed: int
) -> dict[str, Any]:
    """A preference head per block and on all of them together (:mod:`localjury.votes.preference`),
    by 5-fold cross-validation over the pairs: its kappa, accuracy (the share of pairs right, in
    both orders: the head is position-free) and AUROC of the preference (A: each pair's first
    response in the set's order)."""
    first: dict[str, int] = {}
    second: dict[str, int] = {}
    for i, it in enumerate(items):
        (second if it.pair in first else first)[it.pair] = i
    ids = [pair for pair in first if pair in second]
    a_rows, b_rows = [first[k] for k in ids], [second[k] for k in ids]
    a_better = [int(gold[i] > gold[j]) for i, j in zip(a_rows, b_rows, strict=True)]
    out = {}
    for j, layer in enumerate([*layers, "+".join(str(i) for i in layers)]):
        together = j == len(layers)
        xs = x.reshape(len(x), -1) if together else x[:, j]
        p = cross_validated_preference(xs[a_rows], xs[b_rows], a_better, ids, folds=5, seed=seed, reduce=together)
        out[str(layer)] = figures_of(a_better, p, seed)
    return {"pairs": len(ids), "heads": out}


def jury_figures(
    run: Path, items: list[Any], gold: list[int], groups: list[str], head: list[float], seed: int
) -> dict[str, Any] | None:
    """The bench run's jury against a stacked one: the mean of its members' verdict
    probabilities (``graded``, as the run's jury probability), a logistic regression on their
    log-odds, and the same with the judge's best head (``head``: its cross-validated
    probabilities) as one more member; each by 5-fold cross-validation grouped as the heads
    are (:func:`localjury.votes.heads.cross_validated`). None where the run had one model."""
    rows = {r["record_id"]: r for r in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}
    models = sorted(next(iter(rows.values()))["models"])
    if len(models) < 2:
        return None
    p = np.array([[rows[str(it.record["id"])]["models"][m]["graded"] for m in models] for it in items], float)
    members = _log_odds(p)
    with_head = np.hstack([members, _log_odds(np.asarray(head, float))[:, None]])
    return {
        "members": models,
        "each": {m: figures_of(gold, p[:, j].tolist(), seed) for j, m in enumerate(models)},
        "mean": figures_of(gold, p.mean(axis=1).tolist(), seed),
        "stacked": figures_of(gold, cross_validated(members, gold, groups, folds=5, seed=seed), seed),
        "stacked_with_head": figures_of(gold, cross_validated(with_head, gold, groups, folds=5, seed=seed), seed),
    }


def _log_odds(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(q / (1 - q))
