"""Graded heads: a rubric's score read from a judge's hidden states by a linear regression fitted
on a user's graded labels (human scores on the rubric's scale), with no text sampled.

The state is the one a decision head reads (:mod:`localjury.votes.heads`: the judge prompt's last
token or its response's mean, one block or several); the head is a standardised ridge regression
on it, its strength chosen by a grouped cross-validation inside the training folds, its predictions
kept within the scale. Fitted on every label (:func:`fit_graded`), it is a
:class:`~localjury.votes.heads.DecisionHead` with ``levels`` set: plain weights in the judge
profile. It is the graded counterpart of a yes/no head, measured as a rubric's expected score is
(Spearman, Kendall and quadratically weighted kappa against the human scores:
:func:`localjury.bench.scales.scale_agreement`).

Pure functions over arrays and labels (scikit-learn for the fits); no engine, no run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from localjury.errors import ConfigError
from localjury.types import Pooling
from localjury.votes.heads import DecisionHead, HeadBinding, grouped_folds, head_of

if TYPE_CHECKING:
    import numpy as np

#: The ridge strengths tried (scikit-learn's alpha, on standardised states), chosen inside each
#: training fold by a grouped cross-validation of its own.
ALPHA_GRID = (1.0, 10.0, 100.0, 1e3, 1e4, 1e5)
#: The alpha of a head whose training rows are too few to choose one by cross-validation.
DEFAULT_ALPHA = 1e3


def _levels(scores: Sequence[float]) -> list[int]:
    """Each score rounded half up: the levels the folds are stratified on."""
    return [int(float(s) + 0.5) for s in scores]


def _fit(x: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int) -> Any:
    """A standardised ridge regression with its alpha chosen by a grouped 3-fold cross-validation
    on these rows only (mean squared error)."""
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipe = make_pipeline(StandardScaler(), Ridge())
    inner = grouped_folds([str(g) for g in groups], _levels(y.tolist()), 3, seed)
    if len(inner) < 2:  # too few groups to choose alpha by cross-validation
        return pipe.set_params(ridge__alpha=DEFAULT_ALPHA).fit(x, y)
    search = GridSearchCV(pipe, {"ridge__alpha": list(ALPHA_GRID)}, cv=inner, scoring="neg_mean_squared_error")
    return search.fit(x, y).best_estimator_


def cross_validated_graded(
    states: np.ndarray,
    scores: Sequence[float],
    groups: Sequence[str],
    *,
    folds: int = 5,
    seed: int = 0,
    levels: int | None = None,
) -> list[float]:
    """Each record's score from a graded head fitted on the other folds (no group in both, the
    rounded scores spread evenly), its alpha chosen inside them, kept within the scale 1..``levels``
    (default: the labels' range).

    Raises:
        ConfigError: Fewer than two groups.
    """
    import numpy as np

    y, g = np.asarray(scores, dtype=float), np.asarray(groups)
    split = grouped_folds(list(groups), _levels(scores), folds, seed)
    if not split:
        raise ConfigError("cross-validating a graded head needs scored records of two groups or more")
    out = np.zeros(len(y))
    for train, test in split:
        out[test] = _fit(states[train], y[train], g[train], seed).predict(states[test])
    low, high = (1.0, float(levels)) if levels is not None else (y.min(), y.max())
    return [float(v) for v in np.clip(out, low, high)]


def fit_graded(
    states: np.ndarray,
    scores: Sequence[float],
    groups: Sequence[str],
    layers: Sequence[int],
    binding: HeadBinding,
    levels: int,
    seed: int = 0,
    pooling: Pooling = "last",
) -> DecisionHead:
    """The graded head fitted on all these records (alpha chosen by grouped cross-validation),
    its standardisation folded into plain weights and a bias: ``state . weights + bias`` is the
    ridge's prediction, kept within 1..``levels`` (:meth:`~localjury.votes.heads.DecisionHead.output`);
    ``states``: the ``layers``' outputs one after another in each row, read where ``pooling`` says."""
    import numpy as np

    model = _fit(states, np.asarray(scores, dtype=float), np.asarray(groups), seed)
    scaler, ridge = (step for _, step in model.steps)
    weights = ridge.coef_ / scaler.scale_
    bias = float(ridge.intercept_) - float(np.dot(weights, scaler.mean_))
    chose = {"C": 1 / float(ridge.alpha), "pca": None}
    return head_of(layers, weights, bias, chose, binding, len(scores), pooling=pooling, levels=levels)
