"""What the labels say so far: each model's and the jury's agreement with them, computed by the
code ``bench`` reports with (:func:`localjury.bench.stats.classification`), how many more labels a
decision head needs, and the ``localjury align`` command that uses them."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

import numpy as np

from localjury.review.source import judgments

if TYPE_CHECKING:
    from localjury.review.queue import Review

#: The jury's column, where several models judge.
JURY = "jury"


def agreement(review: Review, *, seed: int = 0) -> list[dict[str, Any]]:
    """Per metric with labels: how many, each judge's figures against them, what a head still
    needs and the align command. Empty without labels, or for a labels file reviewed alone.

    Raises:
        MissingDependencyError: The bench extra (scikit-learn, scipy) is not installed.
    """
    from localjury.bench import require

    labeled = review.labeled()
    out = []
    for metric in review.metrics():
        chosen = np.flatnonzero(review.masks(metric)["labeled"])
        if not len(chosen):
            continue
        require()
        from localjury.bench import stats

        gold = [int(labeled[n]) for n in chosen]
        calls: dict[str, list[int | None]] = {}
        for i, n in enumerate(chosen):
            for m in judgments(review.index.row(int(n))):
                calls.setdefault(m["model"], [None] * len(chosen))[i] = m["prediction"]
        judges = {name: stats.classification(gold, preds, seed=seed) for name, preds in calls.items()}
        if len(calls) > 1:
            jury = [None if review.index.jury[n] < 0 else int(review.index.jury[n]) for n in chosen]
            judges[JURY] = stats.classification(gold, jury, seed=seed)
        out.append(
            {
                "metric": metric,
                "labels": len(gold),
                "pass": sum(gold),
                "fail": len(gold) - sum(gold),
                "judges": judges,
                "baseline": stats.majority_baseline(gold),
                "head_needs": head_needs(gold),
                "align": align_command(review, metric, list(calls)),
            }
        )
    return out


def head_needs(gold: list[int]) -> int:
    """How many more labels a decision head needs (``align`` fits one from 40, 10 of each)."""
    from localjury.bench.decision_ways import MIN_LABELS, MIN_PER_LABEL

    passes = sum(gold)
    short = max(0, MIN_PER_LABEL - passes) + max(0, MIN_PER_LABEL - (len(gold) - passes))
    return short + max(0, MIN_LABELS - len(gold) - short)


def align_command(review: Review, metric: str, models: list[str]) -> str:
    """The ``localjury align`` command that fits a judge profile to these labels."""
    words = ["localjury", "align", str(review.labels.path), "--metric", metric]
    criterion = review.criteria.get(metric)
    if criterion:
        words += ["--criterion", criterion]
    if models:
        words += ["--models", ",".join(models)]
    words += ["--out", str(review.labels.path.with_name(f"{metric}.profile.yaml"))]
    return " ".join(shlex.quote(w) for w in words)
