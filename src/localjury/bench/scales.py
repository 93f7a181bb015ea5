"""Agreement of graded scores (a 1..N rubric's) with human scores, and preferences read from
two scores. Pure functions; scipy computes the correlations and the bootstrap intervals.

A prediction of ``None`` is an abstention: the figures are computed on the records that have
a score, and the coverage is reported beside them. Bootstrap intervals are 95% percentile
intervals over paired resamples of the records, through
:func:`localjury.bench.stats.bootstrap_ci` (1,000 resamples, seeded).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from localjury.bench.stats import _clean, bootstrap_ci

Score = float | None


def spearmans(gold: np.ndarray, pred: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's rank correlation along ``axis`` (one per bootstrap resample), as
    ``scipy.stats.spearmanr`` computes it: Pearson's correlation of the average ranks; NaN
    where either side is constant."""
    from scipy.stats import rankdata

    return _pearsons(rankdata(gold, axis=axis), rankdata(pred, axis=axis), axis)


def _pearsons(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    dx = x - x.mean(axis=axis, keepdims=True)
    dy = y - y.mean(axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (dx * dy).sum(axis=axis) / np.sqrt((dx * dx).sum(axis=axis) * (dy * dy).sum(axis=axis))
    return np.where(np.isfinite(r), r, np.nan)


def kendalls(gold: np.ndarray, pred: np.ndarray, axis: int = -1) -> np.ndarray:
    """Kendall's tau-b along ``axis`` (one per bootstrap resample), ``scipy.stats.kendalltau``
    slice by slice (its O(n log n) algorithm beats any all-pairs vectorisation past a few
    hundred records); NaN where either side is constant."""
    from scipy.stats import kendalltau

    g, p = np.moveaxis(np.asarray(gold, dtype=float), axis, -1), np.moveaxis(np.asarray(pred, dtype=float), axis, -1)
    flat_g, flat_p = g.reshape(-1, g.shape[-1]), p.reshape(-1, p.shape[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant side: nan
        values = [kendalltau(a, b).statistic for a, b in zip(flat_g, flat_p, strict=True)]
    return np.asarray(values, dtype=float).reshape(g.shape[:-1])


def quadratic_kappas(gold: np.ndarray, pred: np.ndarray, axis: int = -1) -> np.ndarray:
    """Quadratically weighted kappa of integer scores along ``axis`` (one per bootstrap
    resample): 1 - the mean squared difference of the paired scores / its expectation were the
    two sides independent with the same marginals (the squared difference of every gold score
    with every predicted one). For scores on one scale of consecutive integers this is
    scikit-learn's ``cohen_kappa_score(weights="quadratic")`` (whose weights are the squared
    differences of the labels' positions), without its per-call checks; NaN where the
    expectation is 0 (both sides one same score)."""
    g, p = np.asarray(gold, dtype=float), np.asarray(pred, dtype=float)
    observed = ((g - p) ** 2).mean(axis=axis)
    expected = g.var(axis=axis) + p.var(axis=axis) + (g.mean(axis=axis) - p.mean(axis=axis)) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected > 0, 1 - observed / expected, np.nan)


def _value(statistic: Any, gold: Sequence[float], pred: Sequence[float]) -> float | None:
    return _clean(float(statistic(np.asarray(gold, dtype=float), np.asarray(pred, dtype=float))))


def scale_agreement(gold: Sequence[int], pred: Sequence[Score], *, seed: int = 0) -> dict[str, Any]:
    """How graded scores agree with human scores of the same records, on the records that have
    a predicted score: Spearman's rho and Kendall's tau-b of the scores as given (an expected
    score may fall between the scale's values), and the quadratically weighted kappa of the
    scores rounded to the nearest integer (half up), each with its 95% bootstrap interval;
    the exact-match rate and mean absolute error of the rounded scores beside them.

    Args:
        gold: The human scores, integers on the scale (e.g. 1..5).
        pred: The judge's scores (a sampled score, a mean of samples, or an expected score),
            None where it gave none.
        seed: Seed of the bootstrap resampling.

    Returns:
        ``records``, ``scored`` and ``coverage``; ``spearman``, ``kendall``,
        ``quadratic_kappa`` with ``*_ci`` (None where undefined: fewer than two scored
        records, or a constant side); ``exact`` and ``mae``.
    """
    pairs = [(int(g), float(p)) for g, p in zip(gold, pred, strict=True) if p is not None and not math.isnan(p)]
    n = len(gold)
    out: dict[str, Any] = {"records": n, "scored": len(pairs), "coverage": len(pairs) / n if n else None}
    g = [x[0] for x in pairs]
    p = [x[1] for x in pairs]
    rounded = [math.floor(x + 0.5) for x in p]
    for name, statistic, values in (
        ("spearman", spearmans, p),
        ("kendall", kendalls, p),
        ("quadratic_kappa", quadratic_kappas, rounded),
    ):
        defined = len(pairs) >= 2
        out[name] = _value(statistic, g, values) if defined else None
        out[f"{name}_ci"] = bootstrap_ci(g, values, statistic, seed=seed) if defined and out[name] is not None else None
    out["exact"] = sum(a == b for a, b in zip(g, rounded, strict=True)) / len(pairs) if pairs else None
    out["mae"] = sum(abs(a - b) for a, b in zip(g, rounded, strict=True)) / len(pairs) if pairs else None
    return out


def preference_accuracy(gold: Sequence[int], score_a: Sequence[Score], score_b: Sequence[Score]) -> dict[str, Any]:
    """Preferences read from two graded scores of each pair's responses, against the human
    preference: the higher-scored response is the one preferred; equal scores are a tie,
    counted half right (as the AUROC counts ties) and reported (``ties``); a pair where
    either score is missing is undecided.

    Args:
        gold: Per pair, 1 when the humans preferred response_a, 0 when response_b.
        score_a: The judge's score of each pair's response_a (None: none).
        score_b: The same for response_b.

    Returns:
        ``pairs``, ``decided`` (both scores given), ``ties``; ``accuracy`` over the decided
        pairs with ties counted half, ``accuracy_ties_wrong`` with ties counted wrong, and
        ``accuracy_abstain_as_wrong`` (ties half) over every pair.
    """
    n = len(gold)
    decided = [(g, a - b) for g, a, b in zip(gold, score_a, score_b, strict=True) if a is not None and b is not None]
    ties = sum(d == 0 for _, d in decided)
    right = sum((d > 0) == (g == 1) for g, d in decided if d != 0)
    credit = right + 0.5 * ties
    return {
        "pairs": n,
        "decided": len(decided),
        "ties": ties,
        "accuracy": credit / len(decided) if decided else None,
        "accuracy_ties_wrong": right / len(decided) if decided else None,
        "accuracy_abstain_as_wrong": credit / n if n else None,
    }
