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
from localjury.votes.graded import ALPHA_GRID, cross_validated_graded, fit_graded
from localjury.votes.heads import DecisionHead, HeadBinding

BINDING = HeadBinding(model="A", weights_sha256="f" * 64, engine="fake", prompt_format="auto", criterion="Good?")


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


def test_a_fitted_graded_head_is_the_ridge_as_plain_weights_kept_within_the_scale():
    x, scores, groups = scored()
    head = fit_graded(x, scores, groups, [3], BINDING, levels=6, seed=1)
    levels = (np.asarray(scores) + 0.5).astype(int)
    inner = StratifiedGroupKFold(n_splits=3, shuffle=True, random_state=1).split(x, levels, np.asarray(groups))
    search = GridSearchCV(make_pipeline(StandardScaler(), Ridge()), {"ridge__alpha": list(ALPHA_GRID)},
                          cv=list(inner), scoring="neg_mean_squared_error").fit(x, scores)  # fmt: skip
    want = np.clip(search.predict(x), 1, 6)
    np.testing.assert_allclose([head.scale_score(head.output(v)) for v in x], want, rtol=1e-9)
    np.testing.assert_allclose([head.output(v) for v in x], (want - 1) / 5, rtol=1e-9, atol=1e-12)  # as 0..1
    assert (head.levels, head.layer, head.labels) == (6, 3, len(scores))
    assert head.c == pytest.approx(1 / search.best_params_["ridge__alpha"])
    far = x[0] + 100 * np.sign(head.weights)  # a state far along the weights: the scale's top, not beyond
    assert head.output(far) == 1.0 and head.answer(head.output(far)) == {"score": 6}
    assert head.answer(0.29) == {"score": 2} and head.answer(0.3) == {"score": 3}  # 2.45 and 2.5 on 1..6
    assert DecisionHead.model_validate(head.model_dump(mode="json")) == head  # as a profile holds it


def test_a_yes_no_head_still_answers_with_its_verdict_and_probability():
    x, scores, groups = scored()
    head = fit_graded(x, scores, groups, [3], BINDING, levels=6).model_copy(update={"levels": None})
    assert head.output(x[0]) == head.probability(x[0]) and head.answer(0.7) == {"verdict": 1}
