"""Agreement of judges with gold labels and with each other. Pure functions over 0/1 labels.

A prediction of ``None`` is an abstention: the classification figures are computed on the
records the judge decided, and the abstention rate (with an accuracy that counts abstentions
as wrong) is reported beside them, so that abstaining never looks like being right.
scikit-learn computes the classification figures, scipy the bootstrap intervals, statsmodels
Fleiss' kappa.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

Pred = int | None


def _clean(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _kappa(gold: Sequence[int], pred: Sequence[int]) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    if len(gold) == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined kappa (one label in common): nan -> None
        return _clean(cohen_kappa_score(gold, pred, labels=[0, 1]))


def accuracies(gold: np.ndarray, pred: np.ndarray, axis: int = -1) -> np.ndarray:
    """Accuracy along ``axis`` (one per bootstrap resample), as :func:`_accuracy` gives it."""
    return np.mean(gold == pred, axis=axis)


def kappas(gold: np.ndarray, pred: np.ndarray, axis: int = -1) -> np.ndarray:
    """Cohen's kappa of 0/1 labels along ``axis`` (one per bootstrap resample), as
    scikit-learn's ``cohen_kappa_score(labels=[0, 1])`` computes it: 1 - observed
    disagreements / the disagreements expected from the two sides' label rates; NaN where
    that expectation is 0 (one label in common). Bootstrap intervals call it on every
    resample at once: scikit-learn's per-call input checks cost ~2 ms, 2 s an interval."""
    n = gold.shape[axis]
    gold_1, pred_1 = gold.sum(axis=axis), pred.sum(axis=axis)
    expected = ((n - gold_1) * pred_1 + gold_1 * (n - pred_1)) / n
    disagree = (gold != pred).sum(axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected > 0, 1 - disagree / expected, np.nan)


def bootstrap_ci(
    gold: Sequence[int],
    pred: Sequence[Any],
    statistic: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
    *,
    seed: int = 0,
    resamples: int = 1000,
) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of a paired statistic of gold labels and predictions
    (or scores); None when undefined. ``statistic`` takes the two arrays and an axis and
    gives one value per slice along it (NaN where undefined), as :func:`kappas` does."""
    from scipy.stats import bootstrap

    if len(gold) < 2:
        return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bootstrap(
            (np.asarray(gold), np.asarray(pred)),
            statistic,
            paired=True,
            vectorized=True,
            n_resamples=resamples,
            confidence_level=0.95,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    low, high = _clean(res.confidence_interval.low), _clean(res.confidence_interval.high)
    if low is None or high is None:
        return _defined_ci(np.asarray(gold), np.asarray(pred), statistic, seed, resamples)
    return low, high


#: The share of resamples a statistic may be undefined on (κ of a resample with one class of
#: gold labels) for :func:`_defined_ci` to give an interval of the others.
MAX_UNDEFINED = 0.1


def _defined_ci(
    gold: np.ndarray,
    pred: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
    seed: int,
    resamples: int,
) -> tuple[float, float] | None:
    """The percentile interval of the resamples where the statistic is defined, where scipy's
    is NaN because a few are not (a small or unbalanced sample: some resamples hold one class
    of gold labels, where κ is undefined); None when more than :data:`MAX_UNDEFINED` are."""
    rows = np.random.default_rng(seed).integers(0, len(gold), size=(resamples, len(gold)))
    values = np.asarray(statistic(gold[rows], pred[rows], -1), dtype=float)
    defined = values[np.isfinite(values)]
    if len(defined) < (1 - MAX_UNDEFINED) * resamples:
        return None
    low, high = np.percentile(defined, [2.5, 97.5])
    return float(low), float(high)


def _accuracy(gold: Sequence[int], pred: Sequence[int]) -> float:
    return sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold)


def classification(gold: Sequence[int], pred: Sequence[Pred], *, seed: int = 0) -> dict[str, Any]:
    """Accuracy, balanced accuracy, Cohen's kappa (with 95% bootstrap CIs on accuracy and
    kappa), per-class precision/recall/F1 and the confusion matrix, on the decided records;
    plus coverage, abstention rate, and accuracy counting abstentions as wrong."""
    from sklearn.metrics import balanced_accuracy_score, confusion_matrix, precision_recall_fscore_support

    decided = [(g, p) for g, p in zip(gold, pred, strict=True) if p is not None]
    n = len(gold)
    out: dict[str, Any] = {
        "records": n,
        "decided": len(decided),
        "abstention_rate": (n - len(decided)) / n if n else None,
        "accuracy_abstain_as_wrong": sum(g == p for g, p in decided) / n if n else None,
    }
    if not decided:
        out.update(accuracy=None, accuracy_ci=None, balanced_accuracy=None, kappa=None, kappa_ci=None)
        out.update(per_class=None, confusion=None)
        return out
    g = [d[0] for d in decided]
    p = [int(d[1]) for d in decided]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        balanced = balanced_accuracy_score(g, p) if len(set(g)) > 1 else None
        precision, recall, f1, support = precision_recall_fscore_support(g, p, labels=[0, 1], zero_division=0)
    out.update(
        accuracy=_accuracy(g, p),
        accuracy_ci=bootstrap_ci(g, p, accuracies, seed=seed),
        balanced_accuracy=_clean(balanced) if balanced is not None else None,
        kappa=_kappa(g, p),
        kappa_ci=bootstrap_ci(g, p, kappas, seed=seed),
        per_class={
            str(label): {
                "precision": float(precision[i]),
                "recall": float(recall[i]),
                "f1": float(f1[i]),
                "support": int(support[i]),
            }
            for i, label in enumerate((0, 1))
        },
        confusion=confusion_matrix(g, p, labels=[0, 1]).tolist(),
    )
    return out


Score = float | None

ECE_BINS = 10
"""Equal-width bins of the expected calibration error and the reliability diagram."""


def _auroc(gold: Sequence[int], score: Sequence[float]) -> float | None:
    from sklearn.metrics import roc_auc_score

    if len(set(gold)) < 2:
        return None
    return _clean(roc_auc_score(gold, score))


def _brier(gold: Sequence[int], score: Sequence[float]) -> float:
    return sum((s - g) ** 2 for g, s in zip(gold, score, strict=True)) / len(gold)


def reliability(gold: Sequence[int], score: Sequence[float], bins: int = ECE_BINS) -> list[dict[str, Any]]:
    """The reliability diagram's bins: equal-width bins of the score over [0, 1] (the last
    one closed), each with its record count, mean score and share of gold 1s; empty bins
    are left out."""
    out = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [(g, s) for g, s in zip(gold, score, strict=True) if lo <= s < hi or (b == bins - 1 and s == hi)]
        if members:
            out.append(
                {
                    "low": lo,
                    "high": hi,
                    "count": len(members),
                    "mean_score": sum(s for _, s in members) / len(members),
                    "positive_rate": sum(g for g, _ in members) / len(members),
                }
            )
    return out


def expected_calibration_error(gold: Sequence[int], score: Sequence[float], bins: int = ECE_BINS) -> float | None:
    """ECE: over equal-width score bins, the record-weighted mean of |share of gold 1s -
    mean score|."""
    if not gold:
        return None
    return sum(b["count"] * abs(b["positive_rate"] - b["mean_score"]) for b in reliability(gold, score, bins)) / len(
        gold
    )


def _auroc_ci(
    gold: Sequence[int], score: Sequence[float], *, seed: int, resamples: int = 1000
) -> tuple[float, float] | None:
    """95% percentile interval of the AUROC from a bootstrap stratified by gold class: each
    resample keeps the class counts, so every resample has an AUROC."""
    pos = np.asarray([s for g, s in zip(gold, score, strict=True) if g == 1])
    neg = np.asarray([s for g, s in zip(gold, score, strict=True) if g == 0])
    if len(pos) == 0 or len(neg) == 0 or len(pos) + len(neg) < 3:
        return None
    rng = np.random.default_rng(seed)
    values = [auroc_of(rng.choice(pos, len(pos)), rng.choice(neg, len(neg))) for _ in range(resamples)]
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def auroc_of(pos: np.ndarray, neg: np.ndarray) -> float:
    """The AUROC of positives' and negatives' scores, as the Mann-Whitney statistic: the share
    of (positive, negative) pairs the score orders right, ties counted half. It equals
    scikit-learn's ``roc_auc_score`` (the area under the ROC curve's steps) without its
    per-call input checks, which made a bootstrap interval cost seconds."""
    ordered = np.sort(neg)
    below = np.searchsorted(ordered, pos, side="left")
    tied = np.searchsorted(ordered, pos, side="right") - below
    return float((below.sum() + 0.5 * tied.sum()) / (len(pos) * len(neg)))


def probabilistic(gold: Sequence[int], score: Sequence[Score], *, seed: int = 0) -> dict[str, Any]:
    """How well a graded score in [0, 1] (a verdict probability, or the share of votes for
    pass) ranks and predicts the gold label, on the records that have a score: AUROC (with a
    95% bootstrap CI), Brier score, expected calibration error and the reliability bins."""
    scored = [(g, float(s)) for g, s in zip(gold, score, strict=True) if s is not None]
    g = [x[0] for x in scored]
    s = [x[1] for x in scored]
    if not scored:
        return {"scored": 0, "auroc": None, "auroc_ci": None, "brier": None, "ece": None, "reliability": []}
    return {
        "scored": len(scored),
        "auroc": _auroc(g, s),
        "auroc_ci": _auroc_ci(g, s, seed=seed),
        "brier": _brier(g, s),
        "ece": expected_calibration_error(g, s),
        "reliability": reliability(g, s),
    }


def pair_accuracy(pairs: Mapping[str, Sequence[tuple[int, Pred]]]) -> dict[str, Any]:
    """Pairs (LLMBar, HaluEval QA) judged right: both members decided and each predicted as
    its gold label (the good output passes and the other fails)."""
    full = {k: v for k, v in pairs.items() if len(v) == 2}
    decided = {k: v for k, v in full.items() if all(p is not None for _, p in v)}
    right = sum(all(g == p for g, p in v) for v in decided.values())
    return {
        "pairs": len(full),
        "decided": len(decided),
        "pair_accuracy": right / len(decided) if decided else None,
        "pair_accuracy_abstain_as_wrong": right / len(full) if full else None,
    }


def both_orders(gold: Sequence[int], as_given: Sequence[Pred], swapped: Sequence[Pred]) -> dict[str, Any]:
    """Pairwise judging as LLMBar reports it: each item judged with its two responses as given
    and swapped, each order's pick already corrected to the item's frame (1: response_a).
    Accuracy in each order and their mean (the paper's main figure), the share right in both
    orders, and positional agreement (the same pick in both orders). Every item counts; an
    order without a pick (no valid vote, or an even split) counts as wrong and as a
    disagreement, as an evaluator's unusable answer does in the paper."""
    n = len(gold)
    if n == 0:
        return {"items": 0}
    right_given = [p == g for g, p in zip(gold, as_given, strict=True)]
    right_swapped = [p == g for g, p in zip(gold, swapped, strict=True)]
    given, swap = sum(right_given) / n, sum(right_swapped) / n
    return {
        "items": n,
        "accuracy_as_given": given,
        "accuracy_swapped": swap,
        "accuracy": (given + swap) / 2,
        "both_right": sum(a and b for a, b in zip(right_given, right_swapped, strict=True)) / n,
        "positional_agreement": sum(a is not None and a == b for a, b in zip(as_given, swapped, strict=True)) / n,
        "no_pick": sum((a is None) + (b is None) for a, b in zip(as_given, swapped, strict=True)),
    }


def self_consistency(samples: Sequence[Sequence[Pred]]) -> dict[str, Any]:
    """How often a model's k samples agree: over judgments with at least two valid votes, the
    share where all valid votes agree, and the mean share of votes that agree with the
    majority."""
    usable = [[v for v in votes if v is not None] for votes in samples]
    usable = [v for v in usable if len(v) >= 2]
    if not usable:
        return {"judgments": 0, "unanimous": None, "majority_agreement": None}
    unanimous = sum(len(set(v)) == 1 for v in usable) / len(usable)
    agreement = sum(Counter(v).most_common(1)[0][1] / len(v) for v in usable) / len(usable)
    return {"judgments": len(usable), "unanimous": unanimous, "majority_agreement": agreement}


def fleiss(preds: Mapping[str, Sequence[Pred]]) -> dict[str, Any]:
    """Fleiss' kappa among the models, over the records every model decided."""
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    columns = list(preds.values())
    if len(columns) < 2:
        return {"models": len(columns), "records": 0, "kappa": None}
    rows = [r for r in zip(*columns, strict=True) if all(p is not None for p in r)]
    if not rows:
        return {"models": len(columns), "records": 0, "kappa": None}
    table, _ = aggregate_raters(np.asarray(rows, dtype=int), n_cat=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = fleiss_kappa(table, method="fleiss")
    return {"models": len(columns), "records": len(rows), "kappa": _clean(value)}


def pairwise_kappa(preds: Mapping[str, Sequence[Pred]]) -> dict[str, dict[str, float | None]]:
    """Cohen's kappa between every two models, on the records both decided."""
    names = list(preds)
    matrix: dict[str, dict[str, float | None]] = {a: {} for a in names}
    for a in names:
        for b in names:
            both = [(x, y) for x, y in zip(preds[a], preds[b], strict=True) if x is not None and y is not None]
            if a == b:
                matrix[a][b] = 1.0 if both else None
            else:
                matrix[a][b] = _kappa([x for x, _ in both], [y for _, y in both]) if both else None
    return matrix


def majority_baseline(gold: Sequence[int]) -> dict[str, Any]:
    """The chance baseline: always predict the majority gold class."""
    counts = Counter(gold)
    label, count = max(sorted(counts.items()), key=lambda kv: kv[1]) if counts else (1, 0)
    return {
        "predicts": label,
        "accuracy": count / len(gold) if gold else None,
        "balanced_accuracy": 0.5 if len(counts) > 1 else None,
        "kappa": 0.0,
        "class_counts": {str(k): counts.get(k, 0) for k in (0, 1)},
    }
