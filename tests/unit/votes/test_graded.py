"""Graded heads: a ridge regression on the judge's states, cross-validated by group, checked
against scikit-learn directly."""

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV, StratifiedGroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from localjury.errors import ConfigError
from localjury.votes.graded import ALPHA_GRID, cross_validated_graded


def scored(n=90, dim=8, seed=0):
    """Records scored 1..6 whose first state number follows the score (the rest noise), two a group."""
    rng = np.random.default_rng(seed)
    scores = rng.uniform(1, 6, size=n).round(1)
    x = rng.normal(size=(n, dim))
    x[:, 0] += scores
    return x, scores.tolist(), [f"g{i // 2}" for i in range(n)]


def test_the_cross_validated_scores_equal_a_direct_scikit_learn_computation():
    x, scores, groups = scored()
    got = cross_validated_graded(x, scores, groups, folds=4, seed=1)
    y, g = np.asarray(scores), np.asarray(groups)
    levels = (y + 0.5).astype(int)
    want = np.zeros(len(y))
    for train, test in StratifiedGroupKFold(n_splits=4, shuffle=True, random_state=1).split(x, levels, g):
        inner = StratifiedGroupKFold(n_splits=3, shuffle=True, random_state=1).split(x[train], levels[train], g[train])
        pipe = make_pipeline(StandardScaler(), Ridge())
        grid = {"ridge__alpha": list(ALPHA_GRID)}
        search = GridSearchCV(pipe, grid, cv=list(inner), scoring="neg_mean_squared_error")
        want[test] = search.fit(x[train], y[train]).predict(x[test])
    np.testing.assert_allclose(got, np.clip(want, y.min(), y.max()), rtol=1e-9)
    assert min(got) >= y.min() and max(got) <= y.max()
    assert spearmanr(got, scores).statistic > 0.8  # the signal in the first number is found


def test_a_graded_head_needs_two_groups():
    x, scores, _ = scored(n=10)
    with pytest.raises(ConfigError, match="two groups or more"):
        cross_validated_graded(x, scores, ["g"] * 10)
